//! Named API tokens: each with scopes and an optional expiry, stored as SHA-256 only, read on
//! every request that presents one (no cache, so an added token works and a removed one stops
//! on the very next request). Every change is audited as `admin_change`, never with the secret.

use sqlx::Row as _;

use super::{FromRow, Store, StoreError};
use crate::ids::SecretHash;
use crate::spelling::spelling;
use crate::time::Timestamp;

/// What a token may do. The env runtime token holds every scope but `admin`; the env admin
/// token holds `admin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Open turns; read their refusals, egress and policy.
    Turns,
    /// The approval tool, interrupts (register, reissue), resume/heartbeat/complete with a
    /// bearer token, batches.
    Approvals,
    /// Read cards' outcomes.
    CardsRead,
    /// A chat's approvals (list, revoke) and hiding a chat.
    Chats,
    /// The admin API.
    Admin,
}

// The spelling in the API, the CLI and the database; `ALL`'s order is the bit order.
spelling!(Scope {
    Turns => "turns",
    Approvals => "approvals",
    CardsRead => "cards:read",
    Chats => "chats",
    Admin => "admin",
});

/// Longest token name.
pub const NAME_MAX: usize = 64;

/// Longest lifetime a token may be given (ten years).
pub const TTL_MAX: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

/// A token name: 1–64 of `A-Z a-z 0-9 . _ -`, so it is safe in a path, a log and the CLI.
pub fn valid_name(name: &str) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A set of scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Scopes(u8);

impl Scopes {
    /// The env runtime token's scopes: all but `admin`.
    pub const RUNTIME: Scopes = Scopes(0b01111);
    /// The env admin token's scopes.
    pub const ADMIN: Scopes = Scopes(0b10000);

    fn bit(s: Scope) -> u8 {
        1 << (Scope::ALL.iter().position(|v| *v == s).unwrap_or(0))
    }

    /// Whether `s` is in the set.
    pub fn contains(self, s: Scope) -> bool {
        self.0 & Self::bit(s) != 0
    }

    /// The set of `scopes`.
    pub fn of(scopes: impl IntoIterator<Item = Scope>) -> Self {
        Self(scopes.into_iter().fold(0, |acc, s| acc | Self::bit(s)))
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes, in [`Scope::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// The stored form: space-separated spellings.
    fn to_db(self) -> String {
        self.iter().map(Scope::as_str).collect::<Vec<_>>().join(" ")
    }

    /// Reads the stored form; `None` for a word we never wrote.
    fn from_db(s: &str) -> Option<Self> {
        s.split_whitespace()
            .map(Scope::parse)
            .collect::<Option<Vec<_>>>()
            .map(Self::of)
    }
}

/// A named token as listed (never its hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    /// Its name.
    pub name: String,
    /// What it may do.
    pub scopes: Scopes,
    /// When it was added.
    pub created_at: Timestamp,
    /// When it stops working (`None`: never).
    pub expires_at: Option<Timestamp>,
}

/// A token to add.
pub struct NewToken<'a> {
    /// Its name (unique).
    pub name: &'a str,
    /// SHA-256 of the secret.
    pub hash: &'a SecretHash,
    /// What it may do.
    pub scopes: Scopes,
    /// When it stops working.
    pub expires_at: Option<Timestamp>,
}

impl FromRow for TokenInfo {
    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        let scopes: String = r.try_get(1)?;
        Ok(Self {
            name: r.try_get(0)?,
            scopes: Scopes::from_db(&scopes).ok_or(StoreError::Corrupt("scoped_tokens.scopes"))?,
            created_at: Timestamp::from_millis(r.try_get(2)?),
            expires_at: r.try_get::<Option<i64>, _>(3)?.map(Timestamp::from_millis),
        })
    }
}

impl Store {
    /// Adds a named token; `Ok(false)` (and nothing written) when the name is taken.
    pub async fn add_token(
        &self,
        t: &NewToken<'_>,
        actor: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let added = sqlx::query(
            "INSERT INTO scoped_tokens (name, token_hash, scopes, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
        )
        .bind(t.name)
        .bind(t.hash.as_str())
        .bind(t.scopes.to_db())
        .bind(now.millis())
        .bind(t.expires_at.map(Timestamp::millis))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        if added {
            let scopes: Vec<&str> = t.scopes.iter().map(Scope::as_str).collect();
            let detail = serde_json::json!({"action": "add", "list": "token", "value": t.name,
                "scopes": scopes, "expires_at": t.expires_at});
            self.commit_admin_change(tx, actor, detail, now).await?;
        }
        Ok(added)
    }

    /// Removes a named token; `Ok(false)` when there was none.
    pub async fn remove_token(
        &self,
        name: &str,
        actor: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let delete = "DELETE FROM scoped_tokens WHERE name = $1";
        self.remove_audited(delete, "token", name, actor, now).await
    }

    /// Every named token, by name.
    pub async fn list_tokens(&self) -> Result<Vec<TokenInfo>, StoreError> {
        let query = sqlx::query(
            "SELECT name, scopes, created_at, expires_at FROM scoped_tokens ORDER BY name",
        );
        super::fetch_all(self.pool(), query).await
    }

    /// The named token whose hash is `hash` (looked up by the hash's index, then compared in
    /// constant time), expired or not: the caller tells expired from unknown.
    pub async fn token_by_hash(&self, hash: &SecretHash) -> Result<Option<TokenInfo>, StoreError> {
        let row = sqlx::query(
            "SELECT name, scopes, created_at, expires_at, token_hash FROM scoped_tokens \
             WHERE token_hash = $1",
        )
        .bind(hash.as_str())
        .fetch_optional(self.pool())
        .await?;
        let Some(r) = row else { return Ok(None) };
        let stored = SecretHash::from_db(r.try_get(4)?);
        if !stored.matches_hash(hash) {
            return Ok(None);
        }
        TokenInfo::from_row(&r).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_and_the_env_defaults_split_admin_off() {
        let s = Scopes::of([Scope::CardsRead, Scope::Turns]);
        assert_eq!(s.to_db(), "turns cards:read");
        assert_eq!(Scopes::from_db("turns cards:read"), Some(s));
        assert_eq!(Scopes::from_db("turns root"), None);
        assert!(Scopes::RUNTIME.iter().all(|s| s != Scope::Admin));
        assert_eq!(Scopes::RUNTIME.iter().count(), 4);
        assert_eq!(Scopes::ADMIN.iter().collect::<Vec<_>>(), [Scope::Admin]);
        assert!(Scopes::default().is_empty());
    }

    #[test]
    fn names_are_plain() {
        assert!(valid_name("ci-runner_2.prod"));
        for bad in ["", "a b", "a/b", "ü", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
