//! Resume slots: a user holds at most a few live resumes at once, one row per user and card
//! (retries on the same card share it). Claiming, heartbeats, completion, expiry, chaining
//! and hiding a chat all take or free slots through these statements, so the rooms that do
//! those jobs need not import one another.

use sqlx::{Any, Row as _, Transaction};

use super::{Backend, Store, StoreError};
use crate::ids::{ChatId, InterruptId, UserId};
use crate::time::Timestamp;

/// What a step of a claim does to its user's resume slot.
pub(crate) enum SlotMove {
    /// Take (or keep) the slot until then: a new holder.
    Hold(Timestamp),
    /// Move an existing slot's end (a heartbeat); a slot that is gone stays gone.
    Renew(Timestamp),
    /// Give it back (the claim is done, or a chained card replaced it).
    Free,
}

/// Moves `user`'s resume slot on card `id` as `step` says. Every statement names the slot
/// by `$1` user and `$2` card, and a new end by `$3`.
pub(crate) async fn apply(
    tx: &mut Transaction<'static, Any>,
    user: &UserId,
    id: &InterruptId,
    step: SlotMove,
) -> Result<(), StoreError> {
    let (sql, until) = match step {
        SlotMove::Hold(until) => (
            "INSERT INTO resume_slots (user_id, interrupt_id, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (user_id, interrupt_id) DO UPDATE SET expires_at = excluded.expires_at",
            Some(until),
        ),
        SlotMove::Renew(until) => (
            "UPDATE resume_slots SET expires_at = $3 WHERE user_id = $1 AND interrupt_id = $2",
            Some(until),
        ),
        SlotMove::Free => (
            "DELETE FROM resume_slots WHERE user_id = $1 AND interrupt_id = $2",
            None,
        ),
    };
    let mut query = sqlx::query(sql).bind(user.as_str()).bind(id.as_str());
    if let Some(until) = until {
        query = query.bind(until.millis());
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// A set of resume slots freed at once, beyond one user's slot on one card (that is
/// [`SlotMove::Free`]).
pub(crate) enum Held<'a> {
    /// Every slot held on a card, whoever holds it (the card expired).
    OnCard(&'a InterruptId),
    /// A user's slots on any card of one chat (the chat was hidden).
    InChat(&'a UserId, &'a ChatId),
}

impl Held<'_> {
    /// Frees the resume slots this names: the one statement runner for every way a card
    /// or a chat gives its slots back.
    pub(crate) async fn free(self, tx: &mut Transaction<'static, Any>) -> Result<(), StoreError> {
        let query = match self {
            Held::OnCard(id) => {
                sqlx::query("DELETE FROM resume_slots WHERE interrupt_id = $1").bind(id.as_str())
            }
            Held::InChat(user, chat) => sqlx::query(
                "DELETE FROM resume_slots WHERE user_id = $1 AND interrupt_id IN \
                 (SELECT interrupt_id FROM interrupts WHERE user_id = $1 AND chat_id = $2)",
            )
            .bind(user.as_str())
            .bind(chat.as_str()),
        };
        query.execute(&mut **tx).await?;
        Ok(())
    }
}

impl Store {
    /// Reserves a resume slot for `user` on `id` until `until`. A user holds at most `cap`
    /// live slots; retries on the same card share one. `false` means busy.
    pub async fn reserve_resume_slot(
        &self,
        user: &UserId,
        id: &InterruptId,
        cap: u32,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        if self.backend() == Backend::Postgres {
            // Serialise one user's reservations across processes (SQLite's BEGIN IMMEDIATE
            // already serialises every writer).
            sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS l")
                .bind(user.as_str())
                .execute(&mut *tx)
                .await?;
        }
        let held: i64 = sqlx::query(
            "SELECT COUNT(*) FROM resume_slots WHERE user_id = $1 AND interrupt_id <> $2 \
             AND expires_at > $3",
        )
        .bind(user.as_str())
        .bind(id.as_str())
        .bind(now.millis())
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        if held >= i64::from(cap) {
            return Ok(false);
        }
        apply(&mut tx, user, id, SlotMove::Hold(until)).await?;
        tx.commit().await?;
        Ok(true)
    }
}
