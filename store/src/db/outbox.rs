//! The outbox: the event log (0014) read through one cursor and turned into delivery rows —
//! webhook deliveries per endpoint (0018) and channel messages per person (0020: Slack,
//! e-mail) — deliveries taken when due and their attempts recorded ([`queue`]), and card
//! expiries announced as `approval.expired` events. Every change already appends its event in
//! its own transaction and appends commit in id order, so "events after the cursor" never
//! skips one that commits later; a delivery row, once written, carries its own state across
//! restarts.

mod queue;

pub use queue::{Attempt, ChannelDue, Due, Queue};

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::FromRow as _;
use super::contacts::Contacts;
use super::events::{ChatEvent, EventKind, Owner, RETENTION};
use super::{Backend, Store, StoreError};
use crate::ids::MessageId;
use crate::spelling::spelling;
use crate::time::Timestamp;

/// How long delivered and failed deliveries stay listed.
pub const DELIVERY_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A way to reach one person directly (the `channel` column of 0020).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    /// A Slack message (a DM through the bot, or the incoming webhook's channel).
    Slack,
    /// An e-mail.
    Email,
}

// The stored spelling is also the metric prefix (`egressgate_slack_…`), and metrics are
// exported for every channel of `ALL` from the start.
spelling!(Channel {
    Slack => "slack",
    Email => "email",
});

/// One event as the fan-out hands it to the payload builder.
#[derive(Clone, Debug)]
pub struct OutboxEvent {
    /// Event log id.
    pub id: i64,
    /// When it was written.
    pub at: Timestamp,
    /// The chat's user.
    pub user: String,
    /// The chat.
    pub chat: String,
    /// `approval.requested`, …
    pub kind: String,
    /// The event's data (never a secret).
    pub data: serde_json::Value,
    /// The card, for an event about a card still stored.
    pub card: Option<serde_json::Value>,
    /// How to reach the user, for an event about a card (empty otherwise).
    pub contacts: Contacts,
}

/// What one event becomes.
#[derive(Clone, Debug, Default)]
pub struct Fanned {
    /// The webhook body, for the endpoints that want the event; `None`: not a webhook.
    pub webhook: Option<serde_json::Value>,
    /// Messages to people.
    pub messages: Vec<ChannelMessage>,
}

/// One message to one recipient over one channel.
#[derive(Clone, Debug)]
pub struct ChannelMessage {
    /// The channel.
    pub channel: Channel,
    /// The channel's address (a Slack user id, `webhook`, an e-mail address).
    pub recipient: String,
    /// What to send, as the channel will read it back.
    pub payload: serde_json::Value,
}

impl Store {
    /// Turns events after the cursor (at most `limit`) into webhook deliveries for the
    /// endpoints that want them and into the channel messages `build` makes, and advances the
    /// cursor, in one transaction (on PostgreSQL the cursor row is locked, so two processes
    /// never fan out the same events). Returns the rows written.
    pub async fn outbox_fan_out(
        &self,
        limit: i64,
        now: Timestamp,
        build: &(dyn Fn(&OutboxEvent) -> Fanned + Sync),
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        };
        let sql = format!("SELECT last_event_id FROM webhook_cursor WHERE id = 1{lock}");
        let cursor: i64 = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let rows = sqlx::query(
            "SELECT id, at, kind, data, user_id, chat_id FROM events WHERE id > $1 \
             ORDER BY id LIMIT $2",
        )
        .bind(cursor)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last().map(|r| r.try_get::<i64, _>(0)).transpose()? else {
            return Ok(0);
        };
        let endpoints = sqlx::query("SELECT id, events, after_event FROM webhook_endpoints")
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| -> Result<(String, Vec<String>, i64), StoreError> {
                let events: String = r.try_get(1)?;
                Ok((
                    r.try_get(0)?,
                    super::json_column(&events, "webhook_endpoints.events")?,
                    r.try_get(2)?,
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut written = 0;
        for row in &rows {
            let mut event = read_event(row)?;
            let takers: Vec<&String> = endpoints
                .iter()
                .filter(|(_, kinds, after)| {
                    *after < event.id && (kinds.is_empty() || kinds.contains(&event.kind))
                })
                .map(|(id, _, _)| id)
                .collect();
            let card_id = event.data["interrupt_id"].as_str().map(str::to_owned);
            if let Some(id) = &card_id {
                let card = sqlx::query("SELECT card FROM interrupts WHERE interrupt_id = $1")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(r) = card {
                    event.card = Some(super::json_column(&r.try_get::<String, _>(0)?, "card")?);
                }
                event.contacts = super::contacts::read(&mut tx, &event.user).await?;
            }
            let fanned = build(&event);
            let new = NewRow {
                event: &event,
                interrupt_id: card_id.as_deref(),
                now,
            };
            if let Some(body) = fanned.webhook.filter(|_| !takers.is_empty()) {
                for endpoint in takers {
                    written += new.webhook(&mut tx, endpoint, &body).await?;
                }
            }
            for message in &fanned.messages {
                written += new.message(&mut tx, message).await?;
            }
        }
        sqlx::query("UPDATE webhook_cursor SET last_event_id = $1 WHERE id = 1")
            .bind(last)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(written)
    }

    /// Announces cards that expired unanswered (their time ran out, or a newer turn, a hidden
    /// chat or a lost permission expired them) as `approval.expired` events, each once across
    /// processes: the notice row and the event are written in one transaction. Cards that
    /// expired longer than the event retention ago are not announced. Returns how many.
    pub async fn announce_expiries(&self, limit: i64, now: Timestamp) -> Result<u64, StoreError> {
        let rows = sqlx::query(
            "SELECT user_id, chat_id, interrupt_id, expires_at FROM interrupts i \
             WHERE expires_at > $1 AND decision IS NULL \
             AND (state = 'expired' OR (state = 'pending' AND expires_at <= $2)) \
             AND NOT EXISTS (SELECT 1 FROM expiry_notices n WHERE n.interrupt_id = i.interrupt_id) \
             LIMIT $3",
        )
        .bind(horizon(now, RETENTION))
        .bind(now.millis())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        let mut announced = 0;
        for r in rows {
            let (user, chat, id): (String, String, String) =
                (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
            let expires_at = Timestamp::from_millis(r.try_get(3)?);
            let notice = sqlx::query(
                "INSERT INTO expiry_notices (interrupt_id, at) VALUES ($1, $2) \
                 ON CONFLICT (interrupt_id) DO NOTHING",
            )
            .bind(id.clone())
            .bind(now.millis());
            let Some(mut tx) = self.begin_guarded(notice).await? else {
                continue;
            };
            let data = serde_json::json!({
                "interrupt_id": id, "chat_id": chat, "expires_at": expires_at,
            });
            super::events::append(
                &mut tx,
                Owner::Chat(&user, &chat),
                EventKind::ApprovalExpired,
                &data,
                now,
            )
            .await?;
            self.commit_events(tx, true).await?;
            announced += 1;
        }
        Ok(announced)
    }

    /// Keeps a card's resume secret, sealed, for endpoints that want the link (see
    /// migration 0018); purged with the card.
    pub async fn put_resume_link(
        &self,
        interrupt_id: &str,
        sealed: &str,
        purge_at: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO resume_links (interrupt_id, sealed, purge_at) VALUES ($1, $2, $3)",
        )
        .bind(interrupt_id)
        .bind(sealed)
        .bind(purge_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// A card's sealed resume secret, if one was kept.
    pub async fn resume_link(&self, interrupt_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT sealed FROM resume_links WHERE interrupt_id = $1")
            .bind(interrupt_id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    /// Deletes what the outbox no longer needs: finished deliveries (webhook and channel) past
    /// [`DELIVERY_RETENTION`], expiry notices past the event retention, purged cards' links.
    pub async fn outbox_prune(&self, now: Timestamp) -> Result<(), StoreError> {
        for (sql, at) in [
            (
                "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at <= $1",
                horizon(now, DELIVERY_RETENTION),
            ),
            (
                "DELETE FROM channel_deliveries WHERE status <> 'pending' AND created_at <= $1",
                horizon(now, DELIVERY_RETENTION),
            ),
            (
                "DELETE FROM expiry_notices WHERE at <= $1",
                horizon(now, RETENTION),
            ),
            (
                "DELETE FROM resume_links WHERE purge_at <= $1",
                now.millis(),
            ),
        ] {
            sqlx::query(sql).bind(at).execute(self.pool()).await?;
        }
        Ok(())
    }
}

/// The rows one event writes: each once (a second fan-out of the same event, after a crash
/// between writing and advancing, finds them there).
struct NewRow<'a> {
    event: &'a OutboxEvent,
    interrupt_id: Option<&'a str>,
    now: Timestamp,
}

impl NewRow<'_> {
    async fn webhook(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        endpoint: &str,
        body: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        let q = sqlx::query(
            "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, \
             interrupt_id, payload, status, created_at, next_try_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7) \
             ON CONFLICT (endpoint_id, event_id) DO NOTHING",
        )
        .bind(MessageId::generate().as_str())
        .bind(endpoint)
        .bind(self.event.id)
        .bind(&self.event.kind)
        .bind(self.interrupt_id)
        .bind(body.to_string())
        .bind(self.now.millis());
        Ok(q.execute(&mut **tx).await?.rows_affected())
    }

    async fn message(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        m: &ChannelMessage,
    ) -> Result<u64, StoreError> {
        let q = sqlx::query(
            "INSERT INTO channel_deliveries (id, channel, recipient, user_id, event_id, \
             event_type, interrupt_id, payload, status, created_at, next_try_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $9) \
             ON CONFLICT (channel, recipient, event_id) DO NOTHING",
        )
        .bind(MessageId::generate().as_str())
        .bind(m.channel.as_str())
        .bind(m.recipient.as_str())
        .bind(self.event.user.as_str())
        .bind(self.event.id)
        .bind(&self.event.kind)
        .bind(self.interrupt_id)
        .bind(m.payload.to_string())
        .bind(self.now.millis());
        Ok(q.execute(&mut **tx).await?.rows_affected())
    }
}

/// `now - age` in milliseconds.
fn horizon(now: Timestamp, age: std::time::Duration) -> i64 {
    now.millis()
        .saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}

/// An events row (the chat stream's columns first, then its user and chat) as the outbox
/// fans it out: the shared columns are read by [`ChatEvent`]'s reader, its data parsed.
fn read_event(r: &AnyRow) -> Result<OutboxEvent, StoreError> {
    let ChatEvent { id, at, kind, data } = ChatEvent::from_row(r)?;
    Ok(OutboxEvent {
        id,
        at,
        user: r.try_get(4)?,
        chat: r.try_get(5)?,
        kind,
        data: super::json_column(&data, "events.data")?,
        card: None,
        contacts: Contacts::default(),
    })
}

#[cfg(test)]
mod tests;
