//! How to reach a user outside the API (migration 0020): the Slack user id a click maps back
//! from, and the e-mail address a card is mailed to. Set by the administrator in the same
//! audited transaction as the user's other settings; read both ways (user → contacts for the
//! outbox, Slack user → user for an interactive click).

use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, Row as _, Transaction};

use super::{Store, StoreError};
use crate::ids::UserId;
use crate::time::Timestamp;

/// A user's contact fields; `None` where none is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contacts {
    /// Their Slack user id (`U…` / `W…`), unique across users.
    pub slack_user_id: Option<String>,
    /// Their e-mail address.
    pub email: Option<String>,
}

/// What an administrator changes about a user's contacts: `None` leaves a field as it is,
/// `Some(None)` clears it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContactChange {
    /// The Slack user id (validated by the caller).
    pub slack_user_id: Option<Option<String>>,
    /// The e-mail address (validated by the caller).
    pub email: Option<Option<String>>,
}

impl ContactChange {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.slack_user_id.is_none() && self.email.is_none()
    }
}

/// Applies `change` inside the caller's audited transaction and notes it in the audit
/// `detail`. A Slack id that belongs to another user is [`StoreError::Taken`] (checked first
/// for a clear answer; the unique index decides a race between two processes).
pub(super) async fn apply(
    tx: &mut Transaction<'static, Any>,
    user: &UserId,
    change: &ContactChange,
    detail: &mut serde_json::Value,
    now: Timestamp,
) -> Result<(), StoreError> {
    if change.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO user_contacts (user_id, updated_at) VALUES ($1, $2) \
         ON CONFLICT (user_id) DO UPDATE SET updated_at = excluded.updated_at",
    )
    .bind(user.as_str())
    .bind(now.millis())
    .execute(&mut **tx)
    .await?;
    if let Some(slack) = &change.slack_user_id {
        if let Some(id) = slack
            && let Some(owner) = slack_owner(tx, id).await?
            && owner != user.as_str()
        {
            return Err(StoreError::Taken("slack_user_id"));
        }
        sqlx::query("UPDATE user_contacts SET slack_user_id = $1 WHERE user_id = $2")
            .bind(slack.as_deref())
            .bind(user.as_str())
            .execute(&mut **tx)
            .await
            .map_err(|e| taken_or(e, "slack_user_id"))?;
        detail["slack_user_id"] = slack.clone().into();
    }
    if let Some(email) = &change.email {
        sqlx::query("UPDATE user_contacts SET email = $1 WHERE user_id = $2")
            .bind(email.as_deref())
            .bind(user.as_str())
            .execute(&mut **tx)
            .await?;
        detail["email"] = email.clone().into();
    }
    Ok(())
}

/// A unique index's refusal as [`StoreError::Taken`]; any other error as it is.
fn taken_or(e: sqlx::Error, what: &'static str) -> StoreError {
    if e.as_database_error()
        .is_some_and(sqlx::error::DatabaseError::is_unique_violation)
    {
        StoreError::Taken(what)
    } else {
        StoreError::Unavailable(e)
    }
}

async fn slack_owner(conn: &mut AnyConnection, slack: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT user_id FROM user_contacts WHERE slack_user_id = $1")
        .bind(slack)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(|r| r.try_get(0)).transpose()?)
}

/// A user's contacts on `conn` (a transaction's, in the outbox's fan-out).
pub(crate) async fn read(conn: &mut AnyConnection, user: &str) -> Result<Contacts, StoreError> {
    let row = sqlx::query("SELECT slack_user_id, email FROM user_contacts WHERE user_id = $1")
        .bind(user)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map_or(Ok(Contacts::default()), contacts_of)
}

fn contacts_of(r: &AnyRow) -> Result<Contacts, StoreError> {
    Ok(Contacts {
        slack_user_id: r.try_get(0)?,
        email: r.try_get(1)?,
    })
}

impl Store {
    /// A user's contacts (empty when none were set).
    pub async fn contacts(&self, user: &UserId) -> Result<Contacts, StoreError> {
        let mut conn = self.pool().acquire().await?;
        read(&mut conn, user.as_str()).await
    }

    /// The user a Slack user id belongs to, if an administrator mapped one.
    pub async fn user_by_slack_id(&self, slack: &str) -> Result<Option<UserId>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(slack_owner(&mut conn, slack).await?.map(UserId::from_db))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::admin::UserChange;
    use crate::db::testing::fresh;

    fn user(s: &str) -> UserId {
        UserId::parse(s).unwrap_or_else(|| unreachable!())
    }

    fn set_slack(id: Option<&str>) -> UserChange {
        UserChange {
            contacts: ContactChange {
                slack_user_id: Some(id.map(str::to_owned)),
                email: None,
            },
            ..UserChange::default()
        }
    }

    #[tokio::test]
    async fn contacts_are_set_cleared_and_read_both_ways_and_a_slack_id_has_one_owner() {
        let db = fresh().await;
        let s = &db.store;
        let now = Timestamp::now();
        let (alice, bob) = (user("alice"), user("bob"));
        assert_eq!(s.contacts(&alice).await.ok(), Some(Contacts::default()));
        let change = UserChange {
            contacts: ContactChange {
                slack_user_id: Some(Some("U012AB3CD".into())),
                email: Some(Some("alice@example.com".into())),
            },
            ..UserChange::default()
        };
        s.set_user(&alice, change, "admin", now)
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        let got = s.contacts(&alice).await.unwrap_or_default();
        assert_eq!(got.slack_user_id.as_deref(), Some("U012AB3CD"));
        assert_eq!(got.email.as_deref(), Some("alice@example.com"));
        assert_eq!(
            s.user_by_slack_id("U012AB3CD").await.ok().flatten(),
            Some(alice.clone())
        );
        assert_eq!(s.user_by_slack_id("U999").await.ok().flatten(), None);

        // Another user cannot take it; its owner may set it again.
        let taken = s.set_user(&bob, set_slack(Some("U012AB3CD")), "admin", now);
        assert!(matches!(
            taken.await,
            Err(StoreError::Taken("slack_user_id"))
        ));
        s.set_user(&alice, set_slack(Some("U012AB3CD")), "admin", now)
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));

        // Clearing one field keeps the other; the id is then free for bob.
        s.set_user(&alice, set_slack(None), "admin", now)
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        let got = s.contacts(&alice).await.unwrap_or_default();
        assert_eq!(got.slack_user_id, None);
        assert_eq!(got.email.as_deref(), Some("alice@example.com"));
        s.set_user(&bob, set_slack(Some("U012AB3CD")), "admin", now)
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            s.user_by_slack_id("U012AB3CD").await.ok().flatten(),
            Some(bob)
        );
    }
}
