//! Approval rows as a person's decisions create and remove them: upserted per site and
//! package for the chat and stamped with the card's id, deleted by that id on a decline,
//! revoked one by one, and all dropped when a chat is hidden.

use sqlx::{Any, Transaction};

use super::audit::{AuditEntry, AuditKind};
use super::pointer::{Decision, Pointer};
use super::policy::ApprovalKind;
use super::{Store, StoreError, slots};
use crate::ids::{ChatId, UserId};
use crate::package::PackageSpec;
use crate::time::Timestamp;

/// Writes one approval row per approved site and package for the card's chat, stamped with
/// the card id and its own expiry (a later card's approval of the same value takes it over).
pub(crate) async fn upsert_card_approvals(
    tx: &mut Transaction<'static, Any>,
    card: &Pointer,
    decision: &Decision,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    let rows = decision
        .sites
        .iter()
        .map(|s| (ApprovalKind::Site, s))
        .chain(decision.packages.iter().map(|p| (ApprovalKind::Package, p)));
    for (kind, value) in rows {
        sqlx::query(
            "INSERT INTO approvals (user_id, chat_id, kind, value, card_id, created_at, expires_at, \
             access) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (user_id, chat_id, kind, value) \
             DO UPDATE SET card_id = excluded.card_id, created_at = excluded.created_at, \
             expires_at = excluded.expires_at, access = excluded.access",
        )
        .bind(card.user.as_str())
        .bind(card.chat.as_str())
        .bind(kind.as_str())
        .bind(value.as_str())
        .bind(card.id.as_str())
        .bind(now.millis())
        .bind(expires_at.millis())
        .bind(match kind {
            ApprovalKind::Site => decision.access.as_str(),
            ApprovalKind::Package => "full",
        })
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Deletes only the rows stamped with this card's id, so a decline never undoes another
/// card's approval. Returns how many went.
pub(crate) async fn delete_card_approvals(
    tx: &mut Transaction<'static, Any>,
    card: &Pointer,
) -> Result<u64, StoreError> {
    Ok(
        sqlx::query("DELETE FROM approvals WHERE user_id = $1 AND chat_id = $2 AND card_id = $3")
            .bind(card.user.as_str())
            .bind(card.chat.as_str())
            .bind(card.id.as_str())
            .execute(&mut **tx)
            .await?
            .rows_affected(),
    )
}

impl Store {
    /// Revokes one unexpired approval of a chat and audits it; `false` when there was none.
    pub async fn revoke_approval(
        &self,
        user: &UserId,
        chat: &ChatId,
        kind: ApprovalKind,
        value: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        // A package revoked by its bare name goes with every pin it was approved under, and
        // with no other package (matched by its canonical name, however it was spelt).
        let (value_matches, bound) = match (kind, PackageSpec::parse(value)) {
            (ApprovalKind::Package, Ok(spec)) if !spec.is_pinned() => (
                super::policy::names_package("value", spec.package(), "$4"),
                spec.package().as_str().to_owned(),
            ),
            _ => ("value = $4".to_owned(), value.to_owned()),
        };
        let sql = format!(
            "DELETE FROM approvals WHERE user_id = $1 AND chat_id = $2 AND kind = $3 \
             AND {value_matches} AND expires_at > $5"
        );
        let write = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user.as_str())
            .bind(chat.as_str())
            .bind(kind.as_str())
            .bind(bound)
            .bind(now.millis());
        let Some(tx) = self.begin_guarded(write).await? else {
            return Ok(false);
        };
        let detail = serde_json::json!({"kind": kind, "value": value});
        let entry = AuditEntry::chat(AuditKind::ApprovalRevoked, "runtime", user, chat, detail);
        self.commit_audited(tx, entry, now).await?;
        Ok(true)
    }

    /// Hides a chat: new turns are refused, its live turns end (their proxy credentials stop
    /// working), its request is expired (a claim in progress loses it too), its approvals and
    /// resume slots are dropped, and `chat_hidden` is audited — one transaction. `false` when the user has no such chat.
    pub async fn hide_chat(
        &self,
        user: &UserId,
        chat: &ChatId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let write = sqlx::query(
            "UPDATE chats SET hidden_at = COALESCE(hidden_at, $1) WHERE user_id = $2 AND chat_id = $3",
        )
        .bind(now.millis())
        .bind(user.as_str())
        .bind(chat.as_str());
        let Some(mut tx) = self.begin_guarded(write).await? else {
            return Ok(false);
        };
        let expired = sqlx::query(
            "UPDATE interrupts SET state = 'expired' WHERE user_id = $1 AND chat_id = $2 \
             AND state IN ('pending', 'claimed')",
        )
        .bind(user.as_str())
        .bind(chat.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        slots::free_chat(&mut tx, user, chat).await?;
        let revoked = sqlx::query("DELETE FROM approvals WHERE user_id = $1 AND chat_id = $2")
            .bind(user.as_str())
            .bind(chat.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        // Its turns end now: their credentials stop working and every proxy closes their
        // open connections (shortening bumps the cache epoch, migration 3).
        let turns_ended = sqlx::query(
            "UPDATE turns SET expires_at = $1 WHERE user_id = $2 AND chat_id = $3 AND expires_at > $1",
        )
        .bind(now.millis())
        .bind(user.as_str())
        .bind(chat.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let detail = serde_json::json!({
            "requests_expired": expired,
            "approvals_revoked": revoked,
            "turns_ended": turns_ended,
        });
        let entry = AuditEntry::chat(AuditKind::ChatHidden, "runtime", user, chat, detail);
        self.commit_audited(tx, entry, now).await?;
        Ok(true)
    }
}
