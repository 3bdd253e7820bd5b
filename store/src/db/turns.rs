//! Turns: opening one (chat bookkeeping, expiring a pending card, audit, all in one
//! transaction) and reading one back for the proxy's credential check.

use std::time::Duration;

use sqlx::Row as _;

use super::audit::{AuditEntry, AuditKind};
use super::{Store, StoreError, flag, json_column};
use crate::ids::{ChatId, SecretHash, TurnId, UserId};
use crate::mode::Mode;
use crate::package::PackageSpec;
use crate::pattern::SitePattern;
use crate::time::Timestamp;

/// What a run is launched with: whether a person can answer, and the sites and packages it
/// may use from the start. The runtime asks for it when it opens the turn and the turn keeps
/// it unchanged to its end, so the request and the stored turn hold one and the same value.
#[derive(Debug, Clone)]
pub struct Launch {
    /// False for unattended runs: approval requests are denied deterministically.
    pub can_ask_human: bool,
    /// Launch-time sites, already validated.
    pub sites: Vec<SitePattern>,
    /// Launch-time sites opened at `read` only (already checked to be inspected).
    pub read_sites: Vec<SitePattern>,
    /// Launch-time packages (with optional pins), already validated.
    pub packages: Vec<PackageSpec>,
}

/// What the runtime asks for when a user message starts an agent run.
#[derive(Debug, Clone)]
pub struct NewTurn {
    /// The person.
    pub user: UserId,
    /// Their chat.
    pub chat: ChatId,
    /// What the run is launched with.
    pub launch: Launch,
    /// How long the credential lives.
    pub ttl: Duration,
}

/// A turn as stored.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Its id (the proxy username).
    pub id: TurnId,
    /// The person.
    pub user: UserId,
    /// Their chat.
    pub chat: ChatId,
    /// The chat's turn counter when this turn opened: a card from an older turn is stale.
    pub seq: i64,
    /// SHA-256 of the proxy password.
    pub secret_hash: SecretHash,
    /// What the run was launched with.
    pub launch: Launch,
    /// When it opened.
    pub created_at: Timestamp,
    /// When the credential stops working (claims may push it later).
    pub expires_at: Timestamp,
    /// The user's own mode, if an administrator set one (else the deployment's applies).
    pub user_mode: Option<Mode>,
}

/// Why a turn could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenTurnError {
    /// The chat was hidden: no new turns.
    #[error("chat is hidden")]
    ChatHidden,
    /// The database (or the audit write) failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    /// Opens a turn: advances the chat's turn counter, expires a *pending* card of the chat
    /// (the person typed instead of answering; a claimed one is left alone), stores the turn
    /// with only its secret's hash, and audits the launch grants — one transaction.
    pub async fn open_turn(
        &self,
        new: &NewTurn,
        secret_hash: &SecretHash,
        now: Timestamp,
    ) -> Result<Turn, OpenTurnError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "INSERT INTO chats (user_id, chat_id, turn_seq, created_at) VALUES ($1, $2, 1, $3) \
             ON CONFLICT (user_id, chat_id) DO UPDATE SET turn_seq = chats.turn_seq + 1 \
             RETURNING turn_seq, hidden_at",
        )
        .bind(new.user.as_str())
        .bind(new.chat.as_str())
        .bind(now.millis())
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::from)?;
        let seq: i64 = row.try_get(0).map_err(StoreError::from)?;
        let hidden: Option<i64> = row.try_get(1).map_err(StoreError::from)?;
        if hidden.is_some() {
            return Err(OpenTurnError::ChatHidden);
        }
        sqlx::query(
            "UPDATE interrupts SET state = 'expired' \
             WHERE user_id = $1 AND chat_id = $2 AND state = 'pending'",
        )
        .bind(new.user.as_str())
        .bind(new.chat.as_str())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
        let turn = Turn {
            id: TurnId::generate(),
            user: new.user.clone(),
            chat: new.chat.clone(),
            seq,
            secret_hash: secret_hash.clone(),
            launch: new.launch.clone(),
            created_at: now,
            expires_at: now.plus(new.ttl),
            // Read by the proxy when it loads the turn; opening it does not need it.
            user_mode: None,
        };
        let launch = &turn.launch;
        let sites: Vec<String> = launch.sites.iter().map(SitePattern::to_key).collect();
        let packages: Vec<&str> = launch.packages.iter().map(PackageSpec::as_str).collect();
        let sites_json = serde_json::to_string(&sites).unwrap_or_else(|_| "[]".into());
        let read_sites: Vec<String> = launch.read_sites.iter().map(SitePattern::to_key).collect();
        let read_json = serde_json::to_string(&read_sites).unwrap_or_else(|_| "[]".into());
        let packages_json = serde_json::to_string(&packages).unwrap_or_else(|_| "[]".into());
        sqlx::query(
            "INSERT INTO turns (turn_id, user_id, chat_id, seq, secret_hash, can_ask_human, \
             sites, packages, created_at, expires_at, read_sites) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(turn.id.as_str())
        .bind(turn.user.as_str())
        .bind(turn.chat.as_str())
        .bind(seq)
        .bind(secret_hash.as_str())
        .bind(flag(launch.can_ask_human))
        .bind(&sites_json)
        .bind(&packages_json)
        .bind(now.millis())
        .bind(turn.expires_at.millis())
        .bind(&read_json)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
        let mut detail = serde_json::json!({
            "turn_id": turn.id.as_str(),
            "can_ask_human": launch.can_ask_human,
            "sites": sites,
            "packages": packages,
            "expires_at": turn.expires_at,
        });
        if !read_sites.is_empty() {
            detail["read_sites"] = read_sites.into();
        }
        let entry = AuditEntry::chat(
            AuditKind::TurnOpened,
            "runtime",
            &turn.user,
            &turn.chat,
            detail,
        );
        self.commit_audited(tx, entry, now).await?;
        Ok(turn)
    }

    /// Reads a turn by id, expired or not (callers decide what expiry means for them).
    pub async fn turn(&self, id: &TurnId) -> Result<Option<Turn>, StoreError> {
        let row = sqlx::query(
            "SELECT t.turn_id, t.user_id, t.chat_id, t.seq, t.secret_hash, t.can_ask_human, \
             t.sites, t.packages, t.created_at, t.expires_at, m.mode, t.read_sites FROM turns t \
             LEFT JOIN user_modes m ON m.user_id = t.user_id WHERE t.turn_id = $1",
        )
        .bind(id.as_str())
        .fetch_optional(self.pool())
        .await?;
        let Some(r) = row else { return Ok(None) };
        let sites: Vec<String> = json_column(&r.try_get::<String, _>(6)?, "turns.sites")?;
        let packages: Vec<String> = json_column(&r.try_get::<String, _>(7)?, "turns.packages")?;
        let read_sites: Vec<String> =
            json_column(&r.try_get::<String, _>(11)?, "turns.read_sites")?;
        let patterns = |list: &[String]| -> Vec<SitePattern> {
            list.iter()
                .filter_map(|s| {
                    let p = SitePattern::from_db(s);
                    if p.is_none() {
                        tracing::warn!(value = %s, "stored launch site does not parse; ignored");
                    }
                    p
                })
                .collect()
        };
        Ok(Some(Turn {
            id: TurnId::from_db(r.try_get(0)?),
            user: UserId::from_db(r.try_get(1)?),
            chat: ChatId::from_db(r.try_get(2)?),
            seq: r.try_get(3)?,
            secret_hash: SecretHash::from_db(r.try_get(4)?),
            launch: Launch {
                can_ask_human: r.try_get::<i64, _>(5)? != 0,
                // A launch pattern an older release stored but the rules now refuse
                // (`*.amazonaws.com`) grants nothing; the turn itself stays usable.
                sites: patterns(&sites),
                read_sites: patterns(&read_sites),
                packages: packages
                    .iter()
                    .map(|p| {
                        PackageSpec::parse(p).map_err(|_| StoreError::Corrupt("turns.packages"))
                    })
                    .collect::<Result<_, _>>()?,
            },
            created_at: Timestamp::from_millis(r.try_get(8)?),
            expires_at: Timestamp::from_millis(r.try_get(9)?),
            user_mode: r
                .try_get::<Option<String>, _>(10)?
                .map(|m| Mode::parse(&m).ok_or(StoreError::Corrupt("user_modes.mode")))
                .transpose()?,
        }))
    }

    /// The chat's current turn counter and hidden flag: resume checks whether a newer turn
    /// was opened since a card was shown.
    pub async fn chat_state(
        &self,
        user: &UserId,
        chat: &ChatId,
    ) -> Result<Option<ChatState>, StoreError> {
        let row = sqlx::query(
            "SELECT turn_seq, hidden_at FROM chats WHERE user_id = $1 AND chat_id = $2",
        )
        .bind(user.as_str())
        .bind(chat.as_str())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(ChatState {
                turn_seq: r.try_get(0)?,
                hidden: r.try_get::<Option<i64>, _>(1)?.is_some(),
            })
        })
        .transpose()
    }
}

/// A chat's bookkeeping row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatState {
    /// How many turns were opened.
    pub turn_seq: i64,
    /// Whether the chat was hidden.
    pub hidden: bool,
}
