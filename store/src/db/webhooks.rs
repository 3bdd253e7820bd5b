//! Webhook endpoints and what the administrator sees of their deliveries: adding (audited,
//! with the signing secret already sealed by the caller), listing (never a secret), removing
//! (with its deliveries), each endpoint's delivery history, and a retry by hand. What happens
//! to a delivery between attempts is the outbox's ([`super::outbox`]).

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::{Store, StoreError};
use crate::ids::{MessageId, WebhookId};
use crate::spelling::spelling;
use crate::time::Timestamp;

/// An endpoint as the administrator sees it (no secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `wh_…`.
    pub id: WebhookId,
    /// Where deliveries are POSTed (vetted by the caller).
    pub url: String,
    /// The event types it wants; empty means all of them.
    pub events: Vec<String>,
    /// The administrator's note.
    pub description: Option<String>,
    /// Whether `approval.requested` carries the resume secret in `card_url`'s fragment.
    pub include_link: bool,
    /// When it was added.
    pub created_at: Timestamp,
}

impl Endpoint {
    /// Whether this endpoint asked for events of `kind`.
    pub fn wants(&self, kind: &str) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == kind)
    }
}

/// A new endpoint, its secret sealed by the caller (the store never sees it in clear).
#[derive(Debug)]
pub struct NewEndpoint<'a> {
    /// Fresh id (the caller sealed the secret for it).
    pub id: &'a WebhookId,
    /// Vetted target URL.
    pub url: &'a str,
    /// Event types wanted; empty for all.
    pub events: &'a [String],
    /// Optional note.
    pub description: Option<&'a str>,
    /// The sealed signing secret.
    pub secret_sealed: &'a str,
    /// See [`Endpoint::include_link`].
    pub include_link: bool,
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not yet accepted; due at `next_try_at`.
    Pending,
    /// A 2xx answer was received.
    Delivered,
    /// Given up after the last attempt (a retry by hand makes it pending again).
    Failed,
}

spelling!(DeliveryStatus {
    Pending => "pending",
    Delivered => "delivered",
    Failed => "failed",
});

/// One delivery as the administrator sees it.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The `webhook-id`.
    pub id: MessageId,
    /// The event log id it reports.
    pub event_id: i64,
    /// `approval.requested`, …
    pub event_type: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i64,
    /// The last attempt's HTTP status, if it got an answer.
    pub last_status: Option<i64>,
    /// The last attempt's error (timeout, connection, non-2xx), if it failed.
    pub last_error: Option<String>,
    /// When it was written.
    pub created_at: Timestamp,
    /// When the next attempt is due (meaningful while pending).
    pub next_try_at: Timestamp,
    /// When a 2xx was received.
    pub delivered_at: Option<Timestamp>,
}

const ENDPOINT_COLUMNS: &str = "id, url, events, description, include_link, created_at";

impl Store {
    /// Adds an endpoint (audited as an admin change, never with its secret). Events already
    /// in the log when it is added are not its.
    pub async fn add_webhook(
        &self,
        new: NewEndpoint<'_>,
        actor: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let events =
            serde_json::to_string(new.events).map_err(|_| StoreError::Corrupt("events"))?;
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO webhook_endpoints (id, url, events, description, secret_sealed, \
             include_link, created_at, after_event) \
             SELECT $1, $2, $3, $4, $5, $6, $7, COALESCE(MAX(id), 0) FROM events",
        )
        .bind(new.id.as_str())
        .bind(new.url)
        .bind(events)
        .bind(new.description)
        .bind(new.secret_sealed)
        .bind(super::flag(new.include_link))
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({
            "webhook_added": new.id.as_str(), "url": new.url, "events": new.events,
            "include_link": new.include_link,
        });
        self.commit_admin_change(tx, actor, detail, now).await
    }

    /// Every endpoint, oldest first.
    pub async fn webhooks(&self) -> Result<Vec<Endpoint>, StoreError> {
        let sql =
            format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY created_at, id");
        super::fetch_all(self.pool(), sqlx::query(sqlx::AssertSqlSafe(sql))).await
    }

    /// One endpoint.
    pub async fn webhook(&self, id: &WebhookId) -> Result<Option<Endpoint>, StoreError> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1");
        let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id.as_str());
        Ok(super::fetch_all(self.pool(), query).await?.pop())
    }

    /// Whether any endpoint wants resume links (only then is a card's secret sealed for it).
    pub async fn any_webhook_with_link(&self) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM webhook_endpoints WHERE include_link = 1")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>(0)? > 0)
    }

    /// Removes an endpoint and its deliveries (pending ones are never sent); `false` when
    /// there was none.
    pub async fn remove_webhook(
        &self,
        id: &WebhookId,
        actor: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let Some(mut tx) = self
            .begin_guarded(
                sqlx::query("DELETE FROM webhook_endpoints WHERE id = $1").bind(id.as_str()),
            )
            .await?
        else {
            return Ok(false);
        };
        sqlx::query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
        let detail = serde_json::json!({"webhook_removed": id.as_str()});
        self.commit_admin_change(tx, actor, detail, now).await?;
        Ok(true)
    }

    /// An endpoint's deliveries, newest first, at most `limit`.
    pub async fn webhook_deliveries(
        &self,
        id: &WebhookId,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let query = sqlx::query(
            "SELECT id, event_id, event_type, status, attempts, last_status, last_error, \
             created_at, next_try_at, delivered_at FROM webhook_deliveries \
             WHERE endpoint_id = $1 ORDER BY event_id DESC LIMIT $2",
        )
        .bind(id.as_str())
        .bind(limit);
        super::fetch_all(self.pool(), query).await
    }

    /// Makes a delivery due now again (a failed one too, with a fresh set of attempts);
    /// `false` when the endpoint has no such delivery or it was already delivered.
    pub async fn retry_delivery(
        &self,
        endpoint: &WebhookId,
        delivery: &MessageId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.changed_a_row(
            sqlx::query(
                "UPDATE webhook_deliveries SET status = 'pending', next_try_at = $1, \
                 attempts = 0 WHERE id = $2 AND endpoint_id = $3 AND status <> 'delivered'",
            )
            .bind(now.millis())
            .bind(delivery.as_str())
            .bind(endpoint.as_str()),
        )
        .await
    }
}

impl super::FromRow for Endpoint {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: WebhookId::from_db(r.try_get(0)?),
            url: r.try_get(1)?,
            events: super::json_column(&r.try_get::<String, _>(2)?, "webhook_endpoints.events")?,
            description: r.try_get(3)?,
            include_link: r.try_get::<i64, _>(4)? != 0,
            created_at: Timestamp::from_millis(r.try_get(5)?),
        })
    }
}

impl super::FromRow for Delivery {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            id: MessageId::from_db(r.try_get(0)?),
            event_id: r.try_get(1)?,
            event_type: r.try_get(2)?,
            status: crate::db::word_column(
                r,
                3,
                DeliveryStatus::parse,
                "webhook_deliveries.status",
            )?,
            attempts: r.try_get(4)?,
            last_status: r.try_get(5)?,
            last_error: r.try_get(6)?,
            created_at: Timestamp::from_millis(r.try_get(7)?),
            next_try_at: Timestamp::from_millis(r.try_get(8)?),
            delivered_at: r.try_get::<Option<i64>, _>(9)?.map(Timestamp::from_millis),
        })
    }
}
