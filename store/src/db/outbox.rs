//! The outbox: the event log (0014) read through one cursor and turned into delivery rows,
//! deliveries taken when due and their attempts recorded, and card expiries announced as
//! `approval.expired` events. Every change already appends its event in its own transaction
//! and appends commit in id order, so "events after the cursor" never skips one that commits
//! later; a delivery row, once written, carries its own state across restarts.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::events::{EventKind, RETENTION};
use super::{Backend, Store, StoreError};
use crate::ids::{MessageId, WebhookId};
use crate::time::Timestamp;

/// How long delivered and failed deliveries stay listed.
pub const DELIVERY_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

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
}

/// A delivery taken for an attempt, with what sending it needs.
#[derive(Clone, Debug)]
pub struct Due {
    /// The `webhook-id`.
    pub id: MessageId,
    /// Its endpoint.
    pub endpoint: WebhookId,
    /// The endpoint's URL.
    pub url: String,
    /// The endpoint's sealed signing secret.
    pub secret_sealed: String,
    /// Whether the endpoint wants the resume link.
    pub include_link: bool,
    /// The event type.
    pub event_type: String,
    /// The card it is about, if any.
    pub interrupt_id: Option<String>,
    /// The body as built at fan-out.
    pub payload: String,
    /// Attempts made before this one.
    pub attempts: i64,
}

/// How one attempt ended.
#[derive(Clone, Debug)]
pub enum Attempt {
    /// A 2xx answer.
    Delivered {
        /// The status received.
        status: u16,
    },
    /// Anything else; `retry_at` is `None` when this was the last attempt.
    Failed {
        /// The status received, if any.
        status: Option<u16>,
        /// What went wrong.
        error: String,
        /// When to try again.
        retry_at: Option<Timestamp>,
    },
}

impl Store {
    /// Turns events after the cursor (at most `limit`) into deliveries for the endpoints that
    /// want them, and advances the cursor, in one transaction (on PostgreSQL the cursor row
    /// is locked, so two processes never fan out the same events). `payload` builds an
    /// event's body, or says it is not delivered (`None`). Returns the deliveries written.
    pub async fn outbox_fan_out(
        &self,
        limit: i64,
        now: Timestamp,
        payload: &(dyn Fn(&OutboxEvent) -> Option<serde_json::Value> + Sync),
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
            "SELECT id, at, user_id, chat_id, kind, data FROM events WHERE id > $1 \
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
            if takers.is_empty() {
                continue;
            }
            let card_id = event.data["interrupt_id"].as_str().map(str::to_owned);
            if let Some(id) = &card_id {
                let card = sqlx::query("SELECT card FROM interrupts WHERE interrupt_id = $1")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(r) = card {
                    event.card = Some(super::json_column(&r.try_get::<String, _>(0)?, "card")?);
                }
            }
            let Some(body) = payload(&event) else {
                continue;
            };
            for endpoint in takers {
                written += sqlx::query(
                    "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, \
                     interrupt_id, payload, status, created_at, next_try_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7) \
                     ON CONFLICT (endpoint_id, event_id) DO NOTHING",
                )
                .bind(MessageId::generate().as_str())
                .bind(endpoint)
                .bind(event.id)
                .bind(&event.kind)
                .bind(card_id.as_deref())
                .bind(body.to_string())
                .bind(now.millis())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
        }
        sqlx::query("UPDATE webhook_cursor SET last_event_id = $1 WHERE id = 1")
            .bind(last)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(written)
    }

    /// Takes up to `limit` due deliveries for an attempt: each is pushed to `lease_until`, so
    /// no other process takes it meanwhile, and is taken again then if this process dies
    /// before recording the attempt. PostgreSQL skips rows another process is taking.
    pub async fn outbox_take_due(
        &self,
        limit: i64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Due>, StoreError> {
        let skip = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE webhook_deliveries SET next_try_at = $1 WHERE id IN (SELECT id FROM \
             webhook_deliveries WHERE status = 'pending' AND next_try_at <= $2 \
             ORDER BY next_try_at LIMIT $3{skip}) \
             RETURNING id, endpoint_id, event_type, interrupt_id, payload, attempts"
        );
        let mut tx = self.begin().await?;
        let taken = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(lease_until.millis())
            .bind(now.millis())
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        if taken.is_empty() {
            return Ok(Vec::new());
        }
        let endpoints =
            sqlx::query("SELECT id, url, secret_sealed, include_link FROM webhook_endpoints")
                .fetch_all(self.pool())
                .await?;
        let mut out = Vec::new();
        for r in &taken {
            let endpoint: String = r.try_get(1)?;
            // An endpoint removed meanwhile took its deliveries with it.
            let Some(e) = endpoints
                .iter()
                .find(|e| e.try_get::<String, _>(0).is_ok_and(|id| id == endpoint))
            else {
                continue;
            };
            out.push(Due {
                id: MessageId::from_db(r.try_get(0)?),
                endpoint: WebhookId::from_db(endpoint),
                url: e.try_get(1)?,
                secret_sealed: e.try_get(2)?,
                include_link: e.try_get::<i64, _>(3)? != 0,
                event_type: r.try_get(2)?,
                interrupt_id: r.try_get(3)?,
                payload: r.try_get(4)?,
                attempts: r.try_get(5)?,
            });
        }
        Ok(out)
    }

    /// Records one attempt of a delivery taken by [`Self::outbox_take_due`].
    pub async fn outbox_record(
        &self,
        id: &MessageId,
        attempt: &Attempt,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let q = match attempt {
            Attempt::Delivered { status } => sqlx::query(
                "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, \
                 last_status = $1, last_error = NULL, delivered_at = $2 WHERE id = $3",
            )
            .bind(i64::from(*status))
            .bind(now.millis())
            .bind(id.as_str()),
            Attempt::Failed {
                status,
                error,
                retry_at,
            } => sqlx::query(
                "UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, \
                 last_status = $2, last_error = $3, next_try_at = $4 WHERE id = $5 \
                 AND status = 'pending'",
            )
            .bind(if retry_at.is_some() {
                "pending"
            } else {
                "failed"
            })
            .bind(status.map(i64::from))
            .bind(error.clone())
            .bind(retry_at.unwrap_or(now).millis())
            .bind(id.as_str()),
        };
        q.execute(self.pool()).await?;
        Ok(())
    }

    /// Deliveries not yet delivered nor given up (the pending gauge).
    pub async fn outbox_pending(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get(0)?)
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
                &user,
                &chat,
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

    /// Deletes what the outbox no longer needs: finished deliveries past
    /// [`DELIVERY_RETENTION`], expiry notices past the event retention, purged cards' links.
    pub async fn outbox_prune(&self, now: Timestamp) -> Result<(), StoreError> {
        for (sql, at) in [
            (
                "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at <= $1",
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

/// `now - age` in milliseconds.
fn horizon(now: Timestamp, age: std::time::Duration) -> i64 {
    now.millis()
        .saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}

fn read_event(r: &AnyRow) -> Result<OutboxEvent, StoreError> {
    Ok(OutboxEvent {
        id: r.try_get(0)?,
        at: Timestamp::from_millis(r.try_get(1)?),
        user: r.try_get(2)?,
        chat: r.try_get(3)?,
        kind: r.try_get(4)?,
        data: super::json_column(&r.try_get::<String, _>(5)?, "events.data")?,
        card: None,
    })
}

#[cfg(test)]
mod tests;
