//! The audit log: written inside the caller's transaction, so a change and its record commit
//! together or not at all (a failed audit write fails the change).

use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};

use super::events::{EventKind, Owner};
use super::pointer::Pointer;
use super::{Store, StoreError};
use crate::ids::{ChatId, InterruptId, UserId};
use crate::spelling::spelling;
use crate::time::Timestamp;

/// What kind of change a row records (the closed set the admin API filters on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// A turn was opened (with its launch-time grants).
    TurnOpened,
    /// A card was registered as an interrupt.
    ApprovalRequested,
    /// A person's decision was applied.
    ApprovalResolved,
    /// Malformed or conflicting decisions for one card (one aggregated row per card).
    DecisionRejected,
    /// A card hit the claim cap and was expired.
    ClaimCapExpired,
    /// An approval was revoked.
    ApprovalRevoked,
    /// A chat was hidden.
    ChatHidden,
    /// An administrator changed a list or a user's permission.
    AdminChange,
}

spelling!(AuditKind {
    TurnOpened => "turn_opened",
    ApprovalRequested => "approval_requested",
    ApprovalResolved => "approval_resolved",
    DecisionRejected => "decision_rejected",
    ClaimCapExpired => "claim_cap_expired",
    ApprovalRevoked => "approval_revoked",
    ChatHidden => "chat_hidden",
    AdminChange => "admin_change",
});

/// One audit row to write.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    /// What happened.
    pub kind: AuditKind,
    /// Who did it: `admin`, `runtime`, `user:<id>`, `resume-secret`, `system`.
    pub actor: &'a str,
    /// The chat's user, when chat-scoped.
    pub user_id: Option<&'a str>,
    /// The chat, when chat-scoped.
    pub chat_id: Option<&'a str>,
    /// The card, when card-scoped.
    pub interrupt_id: Option<&'a str>,
    /// Structured detail (never secrets).
    pub detail: serde_json::Value,
}

impl<'a> AuditEntry<'a> {
    /// A row about one chat of one user.
    pub fn chat(
        kind: AuditKind,
        actor: &'a str,
        user: &'a UserId,
        chat: &'a ChatId,
        detail: serde_json::Value,
    ) -> Self {
        Self {
            kind,
            actor,
            user_id: Some(user.as_str()),
            chat_id: Some(chat.as_str()),
            interrupt_id: None,
            detail,
        }
    }

    /// The same row, also naming the card it is about.
    pub fn on_card(self, id: &'a InterruptId) -> Self {
        Self {
            interrupt_id: Some(id.as_str()),
            ..self
        }
    }

    /// A row about one card, scoped to the card's chat.
    pub fn card(
        kind: AuditKind,
        actor: &'a str,
        card: &'a Pointer,
        detail: serde_json::Value,
    ) -> Self {
        Self::chat(kind, actor, &card.user, &card.chat, detail).on_card(&card.id)
    }

    /// An administrator's change to a list or a permission: not chat-scoped.
    pub fn admin_change(actor: &'a str, detail: serde_json::Value) -> Self {
        Self {
            kind: AuditKind::AdminChange,
            actor,
            user_id: None,
            chat_id: None,
            interrupt_id: None,
            detail,
        }
    }
}

/// One audit row as read back.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditRecord {
    /// Monotonic id.
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// What happened (stored spelling).
    pub kind: String,
    /// Who.
    pub actor: String,
    /// The chat's user, when chat-scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The chat, when chat-scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The card, when card-scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupt_id: Option<String>,
    /// Structured detail.
    pub detail: serde_json::Value,
}

/// Appends an audit row inside `tx`. Its failure is reported as [`StoreError::Audit`] so the
/// API answers `503 AUDIT_FAILED` and the caller's transaction is dropped (rolled back).
pub async fn write(
    tx: &mut Transaction<'static, Any>,
    entry: AuditEntry<'_>,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit (at, kind, actor, user_id, chat_id, interrupt_id, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(now.millis())
    .bind(entry.kind.as_str())
    .bind(entry.actor)
    .bind(entry.user_id)
    .bind(entry.chat_id)
    .bind(entry.interrupt_id)
    .bind(entry.detail.to_string())
    .execute(&mut **tx)
    .await
    .map_err(StoreError::Audit)?;
    if let (Some(kind), Some(user), Some(chat)) =
        (event_of(entry.kind), entry.user_id, entry.chat_id)
    {
        let mut data = entry.detail;
        if let Some(obj) = data.as_object_mut() {
            obj.insert("chat_id".into(), chat.into());
            obj.insert("audit_kind".into(), entry.kind.as_str().into());
            if let Some(id) = entry.interrupt_id {
                obj.insert("interrupt_id".into(), id.into());
            }
        }
        super::events::append(tx, Owner::Chat(user, chat), kind, &data, now).await?;
    }
    Ok(())
}

/// Whether [`write`] also appends a chat event for `entry`: a chat-scoped row of a kind that
/// has one.
fn publishes_event(entry: &AuditEntry<'_>) -> bool {
    event_of(entry.kind).is_some() && entry.user_id.is_some() && entry.chat_id.is_some()
}

/// The chat event an audited change publishes, if any: the audit row and the event are
/// written together, so a stream never reports a change that did not commit.
fn event_of(kind: AuditKind) -> Option<EventKind> {
    match kind {
        AuditKind::ApprovalRequested => Some(EventKind::ApprovalRequested),
        AuditKind::ApprovalResolved | AuditKind::ClaimCapExpired => {
            Some(EventKind::ApprovalResolved)
        }
        AuditKind::ApprovalRevoked | AuditKind::ChatHidden => Some(EventKind::ApprovalRevoked),
        AuditKind::TurnOpened | AuditKind::DecisionRejected | AuditKind::AdminChange => None,
    }
}

impl Store {
    /// Ends an administrator's change (a list entry, a token, a webhook, a user's settings):
    /// one `admin_change` row by `actor` with `detail`, through [`Self::commit_audited`].
    pub(crate) async fn commit_admin_change(
        &self,
        tx: Transaction<'static, Any>,
        actor: &str,
        detail: serde_json::Value,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.commit_audited(tx, AuditEntry::admin_change(actor, detail), now)
            .await
    }

    /// Ends an audited change: writes `entry` last in `tx` (the chat event it publishes holds
    /// PostgreSQL's ordering lock until commit, so it must come last), commits, and wakes this
    /// process's event subscribers when a chat event was written. A change of a kind that may
    /// move the cache epoch is announced to every proxy as it commits (see [`super::epoch`]).
    /// Nothing commits unless the audit row was written.
    pub(crate) async fn commit_audited(
        &self,
        mut tx: Transaction<'static, Any>,
        entry: AuditEntry<'_>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let publishes = publishes_event(&entry);
        let epoch = entry.kind.may_move_epoch();
        if epoch {
            self.announce_epoch(&mut tx).await?;
        }
        write(&mut tx, entry, now).await?;
        self.commit_events(tx, publishes).await?;
        if epoch {
            self.epoch_committed();
        }
        Ok(())
    }

    /// Reads the audit log, oldest first, from `since`, optionally of one kind.
    pub async fn list_audit(
        &self,
        since: Timestamp,
        kind: Option<AuditKind>,
        limit: i64,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let query = sqlx::query(
            "SELECT id, at, kind, actor, user_id, chat_id, interrupt_id, detail FROM audit \
             WHERE at >= $1 AND ($2 = '' OR kind = $2) ORDER BY id LIMIT $3",
        )
        .bind(since.millis())
        .bind(kind.map_or("", AuditKind::as_str))
        .bind(limit);
        super::fetch_all(self.pool(), query).await
    }
}

impl super::FromRow for AuditRecord {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: r.try_get(0)?,
            at: Timestamp::from_millis(r.try_get(1)?),
            kind: r.try_get(2)?,
            actor: r.try_get(3)?,
            user_id: r.try_get(4)?,
            chat_id: r.try_get(5)?,
            interrupt_id: r.try_get(6)?,
            detail: super::json_column(&r.try_get::<String, _>(7)?, "audit.detail")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_chat_scoped_rows_of_kinds_with_an_event_publish_one() {
        let (user, chat) = (
            UserId::from_db("alice".into()),
            ChatId::from_db("c1".into()),
        );
        let detail = serde_json::json!({});
        let on_chat = |kind| AuditEntry::chat(kind, "runtime", &user, &chat, detail.clone());
        for kind in AuditKind::ALL {
            assert_eq!(
                publishes_event(&on_chat(kind)),
                event_of(kind).is_some(),
                "{kind:?}"
            );
        }
        assert!(publishes_event(&on_chat(AuditKind::ChatHidden)));
        assert!(!publishes_event(&on_chat(AuditKind::TurnOpened)));
        assert!(!publishes_event(&AuditEntry::admin_change(
            "admin",
            detail.clone()
        )));
        let unscoped = AuditEntry {
            chat_id: None,
            ..on_chat(AuditKind::ApprovalRevoked)
        };
        assert!(!publishes_event(&unscoped), "no chat, no chat event");
    }
}
