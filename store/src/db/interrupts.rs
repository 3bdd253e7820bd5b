//! Reading the pointer record (one row per chat naming its open approval request), reissuing
//! its secret and expiring it. Its shape is `pointer`; writing a new one is `register`,
//! claiming it is `resume`.

use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, Row as _};

use super::pointer::{pointer_columns, pointer_from_row, select_pointer};
use super::{Store, StoreError, slots};
use crate::ids::{ChatId, InterruptId, SecretHash, UserId};
use crate::time::Timestamp;

/// The pointer's words, at the path callers have always named them by.
pub use super::pointer::{Claim, Decision, InterruptState, Outcome, Pointer};

/// The condition that finds a chat's pointer row, unless purged: `$1` the user, `$2` the
/// chat, `$3` now. Every statement about "the chat's pointer" (reading it, reissuing its
/// secret) is built on it and bound by [`of_chat`], so they all address the same row.
macro_rules! chat_pointer {
    () => {
        "user_id = $1 AND chat_id = $2 AND purge_at > $3"
    };
}

/// A statement built on [`chat_pointer`] with its three parameters bound; any further
/// parameters (`$4` on) are bound by the caller.
fn of_chat<'q>(
    sql: &'static str,
    user: &'q UserId,
    chat: &'q ChatId,
    now: Timestamp,
) -> Query<'q, Any, AnyArguments> {
    sqlx::query(sql)
        .bind(user.as_str())
        .bind(chat.as_str())
        .bind(now.millis())
}

impl Store {
    /// How many cards are in each state (`pending`, `claimed`, `done`, `expired`), for the
    /// control plane's metrics; states without cards are absent.
    pub async fn card_states(&self) -> Result<Vec<(String, i64)>, StoreError> {
        sqlx::query("SELECT state, COUNT(*) FROM interrupts GROUP BY state")
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    /// Runs a statement that selects (or returns) at most one row of [`pointer_columns`]
    /// and parses it: the one way every pointer read loads its row.
    async fn fetch_pointer(
        &self,
        statement: Query<'_, Any, AnyArguments>,
    ) -> Result<Option<Pointer>, StoreError> {
        let row = statement.fetch_optional(self.pool()).await?;
        row.as_ref().map(pointer_from_row).transpose()
    }

    /// The pointer with this interrupt id, unless purged.
    pub async fn interrupt(
        &self,
        id: &InterruptId,
        now: Timestamp,
    ) -> Result<Option<Pointer>, StoreError> {
        self.fetch_pointer(
            sqlx::query(select_pointer!("interrupt_id = $1 AND purge_at > $2"))
                .bind(id.as_str())
                .bind(now.millis()),
        )
        .await
    }

    /// The chat's pointer row, unless purged (open or not: callers check).
    pub async fn chat_interrupt(
        &self,
        user: &UserId,
        chat: &ChatId,
        now: Timestamp,
    ) -> Result<Option<Pointer>, StoreError> {
        self.fetch_pointer(of_chat(select_pointer!(chat_pointer!()), user, chat, now))
            .await
    }

    /// The user's cards still waiting for an answer, across chats, oldest first: what a
    /// runtime shows as a badge and re-renders after a reload (after reissuing a secret).
    pub async fn pending_interrupts(
        &self,
        user: &UserId,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<Pointer>, StoreError> {
        let rows = sqlx::query(select_pointer!(
            "user_id = $1 AND state = 'pending' AND expires_at > $2 AND purge_at > $2 \
             ORDER BY created_at, interrupt_id LIMIT $3"
        ))
        .bind(user.as_str())
        .bind(now.millis())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(pointer_from_row).collect()
    }

    /// Gives the chat's open request a fresh resume secret (the old one stops working) and
    /// returns it; `None` when the chat has no open request.
    pub async fn reissue_secret(
        &self,
        user: &UserId,
        chat: &ChatId,
        secret_hash: &SecretHash,
        now: Timestamp,
    ) -> Result<Option<Pointer>, StoreError> {
        self.fetch_pointer(
            of_chat(
                concat!(
                    "UPDATE interrupts SET secret_hash = $4 WHERE ",
                    chat_pointer!(),
                    " AND ((state = 'pending' AND expires_at > $3) \
                     OR (state = 'claimed' AND lease_expires_at > $3)) RETURNING ",
                    pointer_columns!()
                ),
                user,
                chat,
                now,
            )
            .bind(secret_hash.as_str()),
        )
        .await
    }

    /// Expires a request that nobody holds a live claim on (stale card, hidden chat, lost
    /// right to approve) and frees its resume slots; `false` when it was not expirable.
    pub async fn expire_interrupt(
        &self,
        id: &InterruptId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(
            "UPDATE interrupts SET state = 'expired' WHERE interrupt_id = $1 \
             AND (state = 'pending' OR (state = 'claimed' AND lease_expires_at <= $2))",
        )
        .bind(id.as_str())
        .bind(now.millis())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        slots::Held::OnCard(id).free(&mut tx).await?;
        tx.commit().await?;
        Ok(n > 0)
    }
}
