//! Administrators' state: the pre-approved site and package lists, who may approve, and the
//! API tokens (hashed). Every change is audited in its own transaction.

use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};

use super::{Store, StoreError, flag};
use crate::access::Access;
use crate::ids::{SecretHash, UserId};
use crate::mode::Mode;
use crate::time::Timestamp;

/// Which pre-approved list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminList {
    /// Site patterns.
    Sites,
    /// Package names.
    Packages,
}

/// What an administrator changes about a user (`None`: left as it is).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserChange {
    /// Whether they may approve cards.
    pub can_approve: Option<bool>,
    /// Their own mode.
    pub mode: Option<Mode>,
    /// How to reach them (Slack, e-mail).
    pub contacts: super::contacts::ContactChange,
}

/// What a site entry asks of the proxy besides letting the host through (packages have none:
/// always the default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SiteRules {
    /// The proxy terminates TLS for matching hosts and sees each request.
    pub inspect: bool,
    /// How much of the host the entry opens.
    pub access: Access,
}

/// One entry of a pre-approved list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminEntry {
    /// The pattern or package name (canonical).
    pub value: String,
    /// Why it is there.
    pub note: Option<String>,
    /// When it was added.
    pub created_at: Timestamp,
    /// Inspection and access level (sites only).
    pub rules: SiteRules,
}

/// An API caller's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Keeps lists and reads the audit log.
    Admin,
    /// The agent runtime.
    Runtime,
}

impl Role {
    /// Stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Runtime => "runtime",
        }
    }
}

/// The statements of one list (table and key column differ; the logic does not).
struct ListSql {
    insert: &'static str,
    select_all: &'static str,
    delete: &'static str,
    noun: &'static str,
}

impl AdminList {
    fn sql(self) -> ListSql {
        match self {
            Self::Sites => ListSql {
                insert: "INSERT INTO admin_sites (pattern, note, created_at, inspect, access) \
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (pattern) DO NOTHING",
                select_all: "SELECT pattern, note, created_at, inspect, access FROM admin_sites \
                             ORDER BY pattern",
                delete: "DELETE FROM admin_sites WHERE pattern = $1",
                noun: "site",
            },
            Self::Packages => ListSql {
                insert: "INSERT INTO admin_packages (name, note, created_at) VALUES ($1, $2, $3) \
                         ON CONFLICT (name) DO NOTHING",
                select_all: "SELECT name, note, created_at, CAST(0 AS BIGINT), 'full' \
                             FROM admin_packages ORDER BY name",
                delete: "DELETE FROM admin_packages WHERE name = $1",
                noun: "package",
            },
        }
    }
}

/// Whether a user may approve cards (`$1` user, `$2` 0/1, `$3` now; the row is made on first use).
const SET_CAN_APPROVE: &str = "INSERT INTO users (user_id, can_approve, updated_at) \
     VALUES ($1, $2, $3) ON CONFLICT (user_id) DO UPDATE SET \
     can_approve = excluded.can_approve, updated_at = excluded.updated_at";

/// A user's own mode (`$1` user, `$2` mode, `$3` now; the row is made on first use).
const SET_MODE: &str = "INSERT INTO user_modes (user_id, mode, updated_at) \
     VALUES ($1, $2, $3) ON CONFLICT (user_id) DO UPDATE SET \
     mode = excluded.mode, updated_at = excluded.updated_at";

/// Sets one of a user's settings inside `tx` with `sql` ([`SET_CAN_APPROVE`], [`SET_MODE`]).
async fn set_for_user<'q, T>(
    tx: &mut Transaction<'static, Any>,
    sql: &'static str,
    user: &'q UserId,
    value: T,
    now: Timestamp,
) -> Result<(), StoreError>
where
    T: 'q + sqlx::Encode<'q, Any> + sqlx::Type<Any>,
{
    sqlx::query(sql)
        .bind(user.as_str())
        .bind(value)
        .bind(now.millis())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Store {
    /// Adds an entry; `Ok(true)` when new, `Ok(false)` when it was already there (no audit,
    /// and its rules stay as they were). `rules` only apply to sites.
    pub async fn admin_add(
        &self,
        list: AdminList,
        value: &str,
        note: Option<&str>,
        rules: SiteRules,
        actor: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let sql = list.sql();
        let mut tx = self.begin().await?;
        let mut q = sqlx::query(sql.insert)
            .bind(value)
            .bind(note)
            .bind(now.millis());
        if list == AdminList::Sites {
            q = q.bind(flag(rules.inspect)).bind(rules.access.as_str());
        }
        let added = q.execute(&mut *tx).await?.rows_affected() > 0;
        if added {
            let mut detail = serde_json::json!({"action": "add", "list": sql.noun, "value": value, "note": note});
            if list == AdminList::Sites {
                detail["inspect"] = rules.inspect.into();
                detail["access"] = rules.access.as_str().into();
            }
            self.commit_admin_change(tx, actor, detail, now).await?;
        }
        Ok(added)
    }

    /// Removes an entry; `Ok(false)` when it was not there.
    pub async fn admin_remove(
        &self,
        list: AdminList,
        value: &str,
        actor: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let sql = list.sql();
        self.remove_audited(sql.delete, sql.noun, value, actor, now)
            .await
    }

    /// Removes the one row `delete` (a `DELETE … WHERE key = $1`) names by `value` and, only
    /// when there was one, commits an `admin_change` audit row `{"action": "remove", "list":
    /// noun, "value": value}` in the same transaction: the lists and the named tokens are
    /// removed, and audited, the same way. `Ok(false)` when there was none.
    pub(crate) async fn remove_audited(
        &self,
        delete: &'static str,
        noun: &str,
        value: &str,
        actor: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let removed = sqlx::query(delete)
            .bind(value)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        if removed {
            let detail = serde_json::json!({"action": "remove", "list": noun, "value": value});
            self.commit_admin_change(tx, actor, detail, now).await?;
        }
        Ok(removed)
    }

    /// The whole list, sorted.
    pub async fn admin_list(&self, list: AdminList) -> Result<Vec<AdminEntry>, StoreError> {
        let query = sqlx::query(list.sql().select_all);
        super::fetch_all(self.pool(), query).await
    }

    /// Applies an administrator's change to a user in one audited transaction: whether they
    /// may approve cards, their own mode, and how to reach them. Taking the right to approve away also withdraws
    /// the approvals that person made (every chat's site and package rows of the user), so
    /// what they let through stops, open connections included, within a proxy poll.
    pub async fn set_user(
        &self,
        user: &UserId,
        change: UserChange,
        actor: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let mut detail = serde_json::json!({"action": "set_user", "user_id": user.as_str()});
        if let Some(can_approve) = change.can_approve {
            set_for_user(&mut tx, SET_CAN_APPROVE, user, flag(can_approve), now).await?;
            detail["can_approve"] = can_approve.into();
            if !can_approve {
                let revoked = sqlx::query("DELETE FROM approvals WHERE user_id = $1")
                    .bind(user.as_str())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                detail["approvals_revoked"] = revoked.into();
            }
        }
        if let Some(mode) = change.mode {
            set_for_user(&mut tx, SET_MODE, user, mode.as_str(), now).await?;
            detail["mode"] = mode.as_str().into();
        }
        super::contacts::apply(&mut tx, user, &change.contacts, &mut detail, now).await?;
        self.commit_admin_change(tx, actor, detail, now).await
    }

    /// A user's own mode; `None` when none was set (the deployment's applies).
    pub async fn user_mode(&self, user: &UserId) -> Result<Option<Mode>, StoreError> {
        let row = sqlx::query("SELECT mode FROM user_modes WHERE user_id = $1")
            .bind(user.as_str())
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| crate::db::word_column(&r, 0, Mode::parse, "user_modes.mode"))
            .transpose()
    }

    /// Whether a user may approve; `None` when no row exists (the caller applies the default).
    pub async fn can_approve(&self, user: &UserId) -> Result<Option<bool>, StoreError> {
        let row = sqlx::query("SELECT can_approve FROM users WHERE user_id = $1")
            .bind(user.as_str())
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok(r.try_get::<i64, _>(0)? != 0)).transpose()
    }

    /// The stored hash of a role's API token, if one was ever generated.
    pub async fn token_hash(&self, role: Role) -> Result<Option<SecretHash>, StoreError> {
        let row = sqlx::query("SELECT token_hash FROM api_tokens WHERE role = $1")
            .bind(role.as_str())
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok(SecretHash::from_db(r.try_get(0)?)))
            .transpose()
    }

    /// Stores a role's token hash unless one exists; `Ok(false)` when another process won.
    pub async fn init_token_hash(
        &self,
        role: Role,
        hash: &SecretHash,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.changed_a_row(
            sqlx::query(
                "INSERT INTO api_tokens (role, token_hash, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (role) DO NOTHING",
            )
            .bind(role.as_str())
            .bind(hash.as_str())
            .bind(now.millis()),
        )
        .await
    }

    /// The deployment key `name`, generating and storing `fresh()` on first use. When two
    /// processes start at once, both end up with the one that was stored first.
    pub async fn deployment_key(
        &self,
        name: &str,
        fresh: impl FnOnce() -> Vec<u8>,
        now: Timestamp,
    ) -> Result<Vec<u8>, StoreError> {
        sqlx::query(
            "INSERT INTO deployment_keys (name, key_hex, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(hex::encode(fresh()))
        .bind(now.millis())
        .execute(self.pool())
        .await?;
        let row = sqlx::query("SELECT key_hex FROM deployment_keys WHERE name = $1")
            .bind(name)
            .fetch_one(self.pool())
            .await?;
        let text: String = row.try_get(0)?;
        hex::decode(text).map_err(|_| StoreError::Corrupt("deployment key is not hex"))
    }
}

impl super::FromRow for AdminEntry {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            value: r.try_get(0)?,
            note: r.try_get(1)?,
            created_at: Timestamp::from_millis(r.try_get(2)?),
            rules: SiteRules {
                inspect: r.try_get::<i64, _>(3)? != 0,
                access: crate::db::word_column(r, 4, Access::parse, "admin_sites.access")?,
            },
        })
    }
}
