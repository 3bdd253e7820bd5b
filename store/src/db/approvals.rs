//! Approval rows as a person's decisions create and remove them: upserted per site and
//! package at the decision's scope (the card's turn, its chat, or every chat of its user) and
//! stamped with the card's id, deleted by that id on a decline, revoked one by one, spent one
//! use at a time when counted, and a chat's dropped when it is hidden.

use sqlx::{Any, Transaction};

use super::audit::{AuditEntry, AuditKind};
use super::pointer::{Decision, Pointer};
use super::policy::ApprovalKind;
use super::{Store, StoreError, slots};
use crate::grant::{CountedRow, Scope};
use crate::ids::{ChatId, UserId};
use crate::package::PackageSpec;
use crate::time::Timestamp;

/// The chat and turn columns of a row at `scope` for `card`: a user row names no chat
/// (`''`), only a turn row names its turn.
fn scope_key(card: &Pointer, scope: Scope) -> (&str, &str) {
    match scope {
        Scope::User => ("", ""),
        Scope::Chat => (card.chat.as_str(), ""),
        Scope::Turn => (card.chat.as_str(), card.turn_id.as_str()),
    }
}

/// Writes one approval row per approved site and package at the decision's scope, stamped
/// with the card id and its own expiry (a later card's approval of the same value at the same
/// scope takes it over). The site rows carry the decision's access level, uses and path
/// prefixes; package rows are `full`, unlimited and whole (a package names no path).
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
    let (chat, turn) = scope_key(card, decision.scope);
    let paths = match &decision.paths {
        Some(p) => Some(serde_json::to_string(p).map_err(|_| StoreError::Corrupt("paths"))?),
        None => None,
    };
    for (kind, value) in rows {
        let site = kind == ApprovalKind::Site;
        sqlx::query(
            "INSERT INTO approvals (user_id, chat_id, turn_id, kind, value, card_id, created_at, \
             expires_at, access, scope, uses_left, paths) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (user_id, chat_id, turn_id, kind, value) \
             DO UPDATE SET card_id = excluded.card_id, created_at = excluded.created_at, \
             expires_at = excluded.expires_at, access = excluded.access, \
             scope = excluded.scope, uses_left = excluded.uses_left, paths = excluded.paths",
        )
        .bind(card.user.as_str())
        .bind(chat)
        .bind(turn)
        .bind(kind.as_str())
        .bind(value.as_str())
        .bind(card.id.as_str())
        .bind(now.millis())
        .bind(expires_at.millis())
        .bind(if site {
            decision.access.as_str()
        } else {
            "full"
        })
        .bind(decision.scope.as_str())
        .bind(decision.max_uses.filter(|_| site))
        .bind(paths.clone().filter(|_| site))
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Deletes only the rows stamped with this card's id (at whatever scope they were written),
/// so a decline never undoes another card's approval. Returns how many went.
pub(crate) async fn delete_card_approvals(
    tx: &mut Transaction<'static, Any>,
    card: &Pointer,
) -> Result<u64, StoreError> {
    Ok(
        sqlx::query("DELETE FROM approvals WHERE user_id = $1 AND card_id = $2")
            .bind(card.user.as_str())
            .bind(card.id.as_str())
            .execute(&mut **tx)
            .await?
            .rows_affected(),
    )
}

impl Store {
    /// Spends one use of a counted grant's row: one conditional write, so of many proxies
    /// sharing the database exactly as many connections as the row had uses get `true`; the
    /// rest (and every later one) get `false` and are refused. A row gone, expired or taken
    /// over by an unlimited approval spends nothing (the caller refuses; its next request
    /// reads the grants again).
    pub async fn spend_use(&self, row: &CountedRow, now: Timestamp) -> Result<bool, StoreError> {
        let spent = sqlx::query(
            "UPDATE approvals SET uses_left = uses_left - 1 WHERE user_id = $1 AND chat_id = $2 \
             AND turn_id = $3 AND kind = 'site' AND value = $4 AND uses_left > 0 \
             AND expires_at > $5 RETURNING uses_left",
        )
        .bind(&row.user_id)
        .bind(&row.chat_id)
        .bind(&row.turn_id)
        .bind(&row.value)
        .bind(now.millis())
        .fetch_optional(self.pool())
        .await?;
        Ok(spent.is_some())
    }

    /// Revokes one unexpired approval of a chat (its chat and turn rows of the value) and
    /// audits it; `false` when there was none.
    pub async fn revoke_approval(
        &self,
        user: &UserId,
        chat: &ChatId,
        kind: ApprovalKind,
        value: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let entry =
            |detail| AuditEntry::chat(AuditKind::ApprovalRevoked, "runtime", user, chat, detail);
        self.revoke_rows(user, chat.as_str(), kind, value, now, entry)
            .await
    }

    /// Revokes one unexpired user-scope approval (it applies to every chat of the user) and
    /// audits it; `false` when there was none.
    pub async fn revoke_user_approval(
        &self,
        user: &UserId,
        kind: ApprovalKind,
        value: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let entry = |detail| AuditEntry {
            kind: AuditKind::ApprovalRevoked,
            actor: "runtime",
            user_id: Some(user.as_str()),
            chat_id: None,
            interrupt_id: None,
            detail,
        };
        self.revoke_rows(user, "", kind, value, now, entry).await
    }

    /// Deletes the unexpired rows of `value` whose chat column is `chat` (`''`: the user's
    /// user-scope rows) and audits it with the entry `audit` makes of the detail.
    async fn revoke_rows<'a>(
        &self,
        user: &UserId,
        chat: &str,
        kind: ApprovalKind,
        value: &str,
        now: Timestamp,
        audit: impl FnOnce(serde_json::Value) -> AuditEntry<'a>,
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
            .bind(chat)
            .bind(kind.as_str())
            .bind(bound)
            .bind(now.millis());
        let Some(tx) = self.begin_guarded(write).await? else {
            return Ok(false);
        };
        let scope = if chat.is_empty() { "user" } else { "chat" };
        let detail = serde_json::json!({"kind": kind, "value": value, "scope": scope});
        self.commit_audited(tx, audit(detail), now).await?;
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
        slots::Held::InChat(user, chat).free(&mut tx).await?;
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
