//! A chat's event log (`refusal.recorded`, `approval.requested`, `approval.resolved`,
//! `approval.revoked`): appended inside the transaction of the change it reports, read back as
//! "everything after id N", and signalled to subscribers (`signal`) — in-process by a watch
//! channel, across processes on PostgreSQL by `NOTIFY` (delivered on commit) — with polling as
//! the fallback.
//!
//! Ordering: subscribers advance a cursor over ids, so an id must never become visible after a
//! larger one of the same chat. SQLite has one writer at a time; on PostgreSQL an append takes
//! a transaction-scoped advisory lock held until commit, so event-writing transactions commit
//! in id order. Appends come last in their transactions to keep that lock short.

use std::time::Duration;

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Acquire as _, Any, Row as _, Transaction};
use tokio::sync::watch;

use super::signal::Topic;
use super::{Store, StoreError};
use crate::ids::{ChatId, UserId};
use crate::time::Timestamp;

/// Advisory lock key that orders event-writing transactions on PostgreSQL.
const APPEND_LOCK: i64 = 0x6567_6576; // "egev"

/// How long events are kept (a subscriber further behind than this gets a resync).
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// The closed set of event kinds a chat's stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A new (host, port, reason) was refused for one of the chat's turns.
    RefusalRecorded,
    /// A card was registered (a person can answer it now).
    ApprovalRequested,
    /// A card was claimed with a decision (approved, declined, cancelled, or denied at the
    /// claim cap).
    ApprovalResolved,
    /// Approvals were taken back (one revoked, or all with the chat hidden).
    ApprovalRevoked,
    /// A card expired unanswered (announced by the outbox, for webhooks; not part of a chat's
    /// stream, whose kinds are the four above).
    ApprovalExpired,
}

impl EventKind {
    /// The SSE `event:` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RefusalRecorded => "refusal.recorded",
            Self::ApprovalRequested => "approval.requested",
            Self::ApprovalResolved => "approval.resolved",
            Self::ApprovalRevoked => "approval.revoked",
            Self::ApprovalExpired => "approval.expired",
        }
    }
}

/// One stored event.
#[derive(Clone, Debug)]
pub struct ChatEvent {
    /// Monotonic id (the SSE `id:` line).
    pub id: i64,
    /// When it was written.
    pub at: Timestamp,
    /// The stored kind spelling (an [`EventKind::as_str`]).
    pub kind: String,
    /// JSON object text (never a secret).
    pub data: String,
}

/// Whose events a reader follows: one chat of a user (the runtime's stream), or every chat
/// of a user (the person's inbox). Each read takes one, so both streams share one cursor.
#[derive(Clone, Debug)]
pub enum Follow {
    /// One chat.
    Chat(UserId, ChatId),
    /// Every chat of the user.
    User(UserId),
}

impl Follow {
    /// `chat_sql` (user `$1`, chat `$2`) or `user_sql` (user `$1`) with the followed ids
    /// bound; the caller binds the rest after them.
    fn query(
        &self,
        chat_sql: &'static str,
        user_sql: &'static str,
    ) -> Query<'_, Any, AnyArguments> {
        match self {
            Self::Chat(user, chat) => sqlx::query(chat_sql)
                .bind(user.as_str())
                .bind(chat.as_str()),
            Self::User(user) => sqlx::query(user_sql).bind(user.as_str()),
        }
    }
}

/// Whose chat an appended event belongs to.
pub(crate) enum Owner<'a> {
    /// The chat named by its user and id.
    Chat(&'a str, &'a str),
    /// The chat that owns this turn (the recorder knows only the turn).
    TurnOf(&'a str),
}

/// Appends one event inside `tx` (call it last, just before commit): the one insert every
/// event goes through, however its chat is named.
pub(crate) async fn append(
    tx: &mut Transaction<'static, Any>,
    owner: Owner<'_>,
    kind: EventKind,
    data: &serde_json::Value,
    now: Timestamp,
) -> Result<(), StoreError> {
    order_appends(tx).await?;
    let sql = match owner {
        Owner::Chat(..) => {
            "INSERT INTO events (at, kind, data, user_id, chat_id) VALUES ($1, $2, $3, $4, $5)"
        }
        Owner::TurnOf(_) => {
            "INSERT INTO events (at, kind, data, user_id, chat_id) \
             SELECT $1, $2, $3, user_id, chat_id FROM turns WHERE turn_id = $4"
        }
    };
    let query = sqlx::query(sql)
        .bind(now.millis())
        .bind(kind.as_str())
        .bind(data.to_string());
    let query = match owner {
        Owner::Chat(user, chat) => query.bind(user).bind(chat),
        Owner::TurnOf(turn) => query.bind(turn),
    };
    query.execute(&mut **tx).await?;
    Ok(())
}

/// On PostgreSQL: hold the append lock until commit and queue the notification (delivered
/// only if the transaction commits). A no-op on SQLite, whose writers are serialised.
async fn order_appends(tx: &mut Transaction<'static, Any>) -> Result<(), StoreError> {
    let conn = tx.acquire().await?;
    if conn.backend_name() != "PostgreSQL" {
        return Ok(());
    }
    sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock($1)) AS l")
        .bind(APPEND_LOCK)
        .execute(&mut *conn)
        .await?;
    super::signal::notify(conn, Topic::Events).await?;
    Ok(())
}

impl Store {
    /// Commits a transaction that may have appended events and, when it did (`appended`),
    /// tells this process's subscribers — after the commit, so a woken subscriber finds them.
    /// Other processes learn by `NOTIFY` or by polling.
    pub(crate) async fn commit_events(
        &self,
        tx: Transaction<'static, Any>,
        appended: bool,
    ) -> Result<(), StoreError> {
        tx.commit().await?;
        if appended {
            self.signal.bump(Topic::Events);
        }
        Ok(())
    }

    /// A receiver that changes whenever events may have been committed (in this process, or
    /// in any process on PostgreSQL). Subscribers still poll as a fallback.
    pub fn subscribe_events(&self) -> watch::Receiver<u64> {
        self.signal.subscribe(Topic::Events)
    }

    /// The followed events after `after`, oldest first, at most `limit`. A chat's stream
    /// leaves out `approval.expired` (written for webhooks, not one of its kinds); a user's
    /// spans every chat of the user: what a person's inbox follows.
    pub async fn events_after(
        &self,
        follow: &Follow,
        after: i64,
        limit: i64,
    ) -> Result<Vec<ChatEvent>, StoreError> {
        let query = follow.query(
            "SELECT id, at, kind, data FROM events WHERE user_id = $1 AND chat_id = $2 \
             AND id > $3 AND kind <> 'approval.expired' ORDER BY id LIMIT $4",
            "SELECT id, at, kind, data FROM events WHERE user_id = $1 AND id > $2 \
             ORDER BY id LIMIT $3",
        );
        super::fetch_all(self.pool(), query.bind(after).bind(limit)).await
    }

    /// The largest followed event id (0 when none): where a fresh subscriber starts, and
    /// where a lagging one resumes after a resync.
    pub async fn latest_event_id(&self, follow: &Follow) -> Result<i64, StoreError> {
        let row = follow
            .query(
                "SELECT COALESCE(MAX(id), 0) FROM events WHERE user_id = $1 AND chat_id = $2",
                "SELECT COALESCE(MAX(id), 0) FROM events WHERE user_id = $1",
            )
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get(0)?)
    }

    /// The smallest event id still kept across all chats (0 when none): a `Last-Event-ID`
    /// below it may have missed pruned events.
    pub async fn oldest_event_id(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COALESCE(MIN(id), 0) FROM events")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get(0)?)
    }
}

impl super::FromRow for ChatEvent {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: r.try_get(0)?,
            at: Timestamp::from_millis(r.try_get(1)?),
            kind: r.try_get(2)?,
            data: r.try_get(3)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{append_event, fresh};

    async fn add(store: &Store, user: &str, chat: &str, kind: EventKind, at: Timestamp) {
        append_event(store, (user, chat), kind, &serde_json::json!({"n": 1}), at).await;
    }

    #[tokio::test]
    async fn a_chat_reads_only_its_own_events_in_id_order() {
        let db = fresh().await;
        let s = &db.store;
        let alice = UserId::from_db("alice".into());
        let c1 = Follow::Chat(alice.clone(), ChatId::from_db("c1".into()));
        let wake = s.subscribe_events();
        let now = Timestamp::now();
        add(s, "alice", "c1", EventKind::ApprovalRequested, now).await;
        add(s, "bob", "c1", EventKind::ApprovalRequested, now).await;
        add(s, "alice", "c1", EventKind::ApprovalResolved, now).await;
        assert!(wake.has_changed().unwrap_or(false), "subscribers are woken");
        let all = s.events_after(&c1, 0, 10).await.unwrap_or_default();
        let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["approval.requested", "approval.resolved"]);
        assert!(all[0].id < all[1].id);
        let after = s.events_after(&c1, all[0].id, 10).await.unwrap_or_default();
        assert_eq!(after.len(), 1);
        assert_eq!(s.latest_event_id(&c1).await.ok(), Some(all[1].id));
        let none = Follow::Chat(alice.clone(), ChatId::from_db("none".into()));
        assert_eq!(s.latest_event_id(&none).await.ok(), Some(0));
        // The user's stream spans chats and leaves other users out.
        add(s, "alice", "c2", EventKind::ApprovalRequested, now).await;
        let alice = Follow::User(alice);
        let mine = s.events_after(&alice, 0, 10).await.unwrap_or_default();
        assert_eq!(mine.len(), 3);
        let latest = s.latest_event_id(&alice).await.ok();
        assert_eq!(latest, mine.last().map(|e| e.id));
        let rest = s.events_after(&alice, all[1].id, 10).await;
        assert_eq!(rest.unwrap_or_default().len(), 1);
    }

    #[tokio::test]
    async fn the_janitor_prunes_events_past_retention_only() {
        let db = fresh().await;
        let s = &db.store;
        let now = Timestamp::now();
        let old = Timestamp::from_millis(now.millis() - 25 * 3600 * 1000);
        add(s, "alice", "c1", EventKind::ApprovalRevoked, old).await;
        add(s, "alice", "c1", EventKind::ApprovalRevoked, now).await;
        let counts = s.janitor_sweep(now).await.unwrap_or_default();
        assert_eq!(counts.events, 1);
        let c1 = Follow::Chat(
            UserId::from_db("alice".into()),
            ChatId::from_db("c1".into()),
        );
        let left = s.events_after(&c1, 0, 10).await.unwrap_or_default();
        assert_eq!(left.len(), 1);
        assert!(s.oldest_event_id().await.unwrap_or(0) == left[0].id);
    }
}
