//! The webhook administration's answers: an endpoint (never its secret), the endpoint just
//! made with its secret shown once, and an endpoint's deliveries.

use utoipa::ToSchema;

use super::Time;

/// One webhook endpoint, never its secret.
#[derive(ToSchema)]
pub struct Webhook {
    /// `wh_…`.
    id: String,
    url: String,
    /// The event types it receives; empty: all of them.
    events: Vec<String>,
    description: Option<String>,
    /// Whether `approval.requested` carries the resume secret in `card_url`'s fragment.
    include_link: bool,
    created_at: Time,
}

/// `GET /v1/admin/webhooks`.
#[derive(ToSchema)]
pub struct Webhooks {
    webhooks: Vec<Webhook>,
}

/// `201` of `POST /v1/admin/webhooks`: the new endpoint's id and, this once, its signing
/// secret.
#[derive(ToSchema, serde::Serialize)]
pub struct WebhookCreated {
    /// `wh_…`.
    pub id: String,
    /// `whsec_` + base64 of 32 random bytes: the Standard Webhooks signing secret.
    pub secret: String,
}

/// One delivery of one event to one endpoint.
#[derive(ToSchema)]
pub struct WebhookDelivery {
    /// The `webhook-id` header: the same on every attempt.
    id: String,
    /// The event log id it reports.
    event_id: i64,
    /// `approval.requested`, `approval.resolved`, `approval.expired` or `approval.revoked`.
    r#type: String,
    /// `pending`, `delivered` or `failed`.
    status: String,
    /// Attempts made so far.
    attempts: i64,
    /// The last attempt's HTTP status, if it got an answer.
    last_status: Option<i64>,
    /// Why the last attempt failed, if it did.
    last_error: Option<String>,
    created_at: Time,
    /// When the next attempt is due (while `pending`).
    next_try_at: Option<Time>,
    delivered_at: Option<Time>,
}

/// `GET /v1/admin/webhooks/{id}/deliveries`: newest first.
#[derive(ToSchema)]
pub struct WebhookDeliveries {
    deliveries: Vec<WebhookDelivery>,
}

/// `POST /v1/admin/webhooks/{id}/deliveries/{delivery_id}/retry`.
#[derive(ToSchema)]
pub struct WebhookRetry {
    id: String,
    /// `pending`: due now.
    status: String,
}

/// `POST /v1/slack/interactions`: what became of a verified click.
#[derive(ToSchema)]
pub struct SlackAnswer {
    /// `approved`, `denied`, `already_answered`, `unknown_user`, `other_user`,
    /// `cannot_approve`, `not_found`, `expired`, `in_progress`, `invalid`, `busy`, `ignored`.
    outcome: String,
    /// What the clicker is told.
    text: String,
}
