//! The two delivery queues — webhook deliveries (0018) and channel messages (0020) — with one
//! bookkeeping: take the due rows under a lease (PostgreSQL skips rows another process is
//! taking), record each attempt (delivered, or failed with a next try or given up), count the
//! pending ones. Only the table and the columns read back differ.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::Channel;
use crate::db::{Backend, Store, StoreError};
use crate::ids::{MessageId, UserId, WebhookId};
use crate::time::Timestamp;

/// Which delivery table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queue {
    /// `webhook_deliveries`.
    Webhooks,
    /// `channel_deliveries`, of one channel.
    Channel(Channel),
}

impl Queue {
    fn table(self) -> &'static str {
        match self {
            Self::Webhooks => "webhook_deliveries",
            Self::Channel(_) => "channel_deliveries",
        }
    }

    /// The condition that keeps a channel's rows to that channel (`$4`), none for webhooks.
    fn only(self) -> &'static str {
        match self {
            Self::Webhooks => "",
            Self::Channel(_) => " AND channel = $4",
        }
    }
}

/// A webhook delivery taken for an attempt, with what sending it needs.
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

/// A channel message taken for an attempt.
#[derive(Clone, Debug)]
pub struct ChannelDue {
    /// The message's id, the same on every attempt (a receiver may de-duplicate on it).
    pub id: MessageId,
    /// Its channel.
    pub channel: Channel,
    /// The channel's address.
    pub recipient: String,
    /// The person it is for.
    pub user: UserId,
    /// The event type.
    pub event_type: String,
    /// The card it is about, if any.
    pub interrupt_id: Option<String>,
    /// The message as built at fan-out.
    pub payload: String,
    /// Attempts made before this one.
    pub attempts: i64,
}

/// How one attempt ended.
#[derive(Clone, Debug)]
pub enum Attempt {
    /// Accepted (a 2xx answer, or the channel's own "ok").
    Delivered {
        /// The status received.
        status: u16,
        /// What the channel answered about the message (a Slack message's ts), kept for
        /// channel messages.
        reference: Option<String>,
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
    /// Takes up to `limit` due rows of `queue`: each is pushed to `lease_until`, so no other
    /// process takes it meanwhile, and is taken again then if this process dies before
    /// recording the attempt. `returning` names the columns read back.
    async fn take(
        &self,
        queue: Queue,
        returning: &str,
        limit: i64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<AnyRow>, StoreError> {
        let skip = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let (table, only) = (queue.table(), queue.only());
        let sql = format!(
            "UPDATE {table} SET next_try_at = $1 WHERE id IN (SELECT id FROM {table} \
             WHERE status = 'pending' AND next_try_at <= $2{only} \
             ORDER BY next_try_at LIMIT $3{skip}) RETURNING {returning}"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(lease_until.millis())
            .bind(now.millis())
            .bind(limit);
        if let Queue::Channel(c) = queue {
            q = q.bind(c.as_str());
        }
        let mut tx = self.begin().await?;
        let taken = q.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(taken)
    }

    /// Takes up to `limit` due webhook deliveries for an attempt (see [`Self::take`]), with
    /// their endpoints' targets; a delivery whose endpoint was removed meanwhile is dropped.
    pub async fn outbox_take_due(
        &self,
        limit: i64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Due>, StoreError> {
        let returning = "id, endpoint_id, event_type, interrupt_id, payload, attempts";
        let taken = self
            .take(Queue::Webhooks, returning, limit, now, lease_until)
            .await?;
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

    /// Takes up to `limit` due messages of `channel` for an attempt (see [`Self::take`]).
    pub async fn channel_take_due(
        &self,
        channel: Channel,
        limit: i64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<ChannelDue>, StoreError> {
        let returning =
            "id, channel, recipient, user_id, event_type, interrupt_id, payload, attempts";
        let taken = self
            .take(Queue::Channel(channel), returning, limit, now, lease_until)
            .await?;
        taken
            .iter()
            .map(|r| {
                Ok(ChannelDue {
                    id: MessageId::from_db(r.try_get(0)?),
                    channel: crate::db::word_column(
                        r,
                        1,
                        Channel::parse,
                        "channel_deliveries.channel",
                    )?,
                    recipient: r.try_get(2)?,
                    user: UserId::from_db(r.try_get(3)?),
                    event_type: r.try_get(4)?,
                    interrupt_id: r.try_get(5)?,
                    payload: r.try_get(6)?,
                    attempts: r.try_get(7)?,
                })
            })
            .collect()
    }

    /// Records one attempt of a row of `queue` taken by [`Self::outbox_take_due`] or
    /// [`Self::channel_take_due`].
    pub async fn outbox_record(
        &self,
        queue: Queue,
        id: &MessageId,
        attempt: &Attempt,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let table = queue.table();
        let sql = match attempt {
            Attempt::Delivered { .. } => format!(
                "UPDATE {table} SET status = 'delivered', attempts = attempts + 1, \
                 last_status = $1, last_error = NULL, delivered_at = $2{} WHERE id = $3",
                match queue {
                    Queue::Webhooks => "",
                    Queue::Channel(_) => ", reference = $4",
                }
            ),
            Attempt::Failed { .. } => format!(
                "UPDATE {table} SET status = $1, attempts = attempts + 1, last_status = $2, \
                 last_error = $3, next_try_at = $4 WHERE id = $5 AND status = 'pending'"
            ),
        };
        let q = sqlx::query(sqlx::AssertSqlSafe(sql));
        let q = match attempt {
            Attempt::Delivered { status, reference } => {
                let q = q
                    .bind(i64::from(*status))
                    .bind(now.millis())
                    .bind(id.as_str());
                match queue {
                    Queue::Webhooks => q,
                    Queue::Channel(_) => q.bind(reference.clone()),
                }
            }
            Attempt::Failed {
                status,
                error,
                retry_at,
            } => q
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

    /// Rows of `queue` not yet delivered nor given up (the pending gauges).
    pub async fn outbox_pending(&self, queue: Queue) -> Result<i64, StoreError> {
        let sql = match queue {
            Queue::Webhooks => {
                "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'".to_owned()
            }
            Queue::Channel(c) => format!(
                "SELECT COUNT(*) FROM channel_deliveries WHERE status = 'pending' \
                 AND channel = '{}'",
                c.as_str()
            ),
        };
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get(0)?)
    }
}
