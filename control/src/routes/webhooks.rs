//! `GET|POST /v1/admin/webhooks`, `DELETE /v1/admin/webhooks/{id}`, an endpoint's deliveries
//! and a retry by hand. The target URL is vetted like any egress before anything is written;
//! the signing secret is returned once and stored sealed (HMAC needs it whole, so it cannot be
//! hashed). The API only writes rows: the outbox worker sends.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use egressgate_store::db::webhooks::{Delivery, DeliveryStatus, Endpoint, NewEndpoint};
use egressgate_store::{MessageId, Timestamp, WebhookId};
use serde::Deserialize;
use serde_json::{Value, json};

use super::listing;
use super::openapi::schemas;
use super::openapi::shared::errors;
use crate::auth::AdminAuth;
use crate::body::StrictJson;
use crate::error::{ApiError, found};
use crate::notify::http::Target;
use crate::notify::webhooks::{EVENT_TYPES, new_secret};
use crate::state::AppState;
use crate::validate;

/// Who the audit log names for changes made with an admin token.
const ACTOR: &str = "admin";
/// Longest accepted target URL.
const URL_MAX: usize = 2048;
/// Deliveries listed per endpoint (newest first).
const DELIVERIES_LISTED: i64 = 100;

/// `POST /v1/admin/webhooks` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WebhookBody {
    /// `http` or `https`, a host name, no credentials.
    url: String,
    /// Event types to receive (default: all four).
    #[serde(default)]
    events: Option<Vec<String>>,
    #[serde(default)]
    description: Option<String>,
    /// Put the card's resume secret into `card_url`'s fragment (default `false`).
    #[serde(default)]
    include_link: bool,
}

errors!(
    /// An unknown endpoint.
    WebhookNotFound: "404" => "`WEBHOOK_NOT_FOUND`: no such webhook endpoint.",
);

fn webhook_not_found() -> ApiError {
    ApiError::not_found("WEBHOOK_NOT_FOUND", "no such webhook endpoint")
}

/// The id of a stored endpoint, or `404 WEBHOOK_NOT_FOUND`.
async fn known_endpoint(state: &AppState, id: &str) -> Result<WebhookId, ApiError> {
    let id = WebhookId::parse(id).ok_or_else(webhook_not_found)?;
    state
        .store
        .webhook(&id)
        .await?
        .ok_or_else(webhook_not_found)?;
    Ok(id)
}

fn endpoint_json(e: &Endpoint) -> Value {
    json!({"id": e.id, "url": e.url, "events": e.events, "description": e.description,
           "include_link": e.include_link, "created_at": e.created_at})
}

fn delivery_json(d: &Delivery) -> Value {
    let next = (d.status == DeliveryStatus::Pending).then_some(d.next_try_at);
    json!({"id": d.id, "event_id": d.event_id, "type": d.event_type, "status": d.status.as_str(),
           "attempts": d.attempts, "last_status": d.last_status, "last_error": d.last_error,
           "created_at": d.created_at, "next_try_at": next, "delivered_at": d.delivered_at})
}

/// The event types a body names: known ones, at least one, each once.
fn event_types(events: Option<Vec<String>>) -> Result<Vec<String>, ApiError> {
    let Some(events) = events else {
        return Ok(Vec::new());
    };
    let mut out: Vec<String> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if !EVENT_TYPES.contains(&e.as_str()) {
            return Err(ApiError::invalid_input(format!(
                "events[{i}] ({}): unknown event type; known: {}",
                validate::quote(e),
                EVENT_TYPES.join(", ")
            )));
        }
        if !out.contains(e) {
            out.push(e.clone());
        }
    }
    if out.is_empty() {
        return Err(ApiError::invalid_input(
            "events must name at least one event type (leave it out for all)",
        ));
    }
    Ok(out)
}

/// The URL, checked and, when this process can reach out, resolved and vetted.
async fn vetted_url(state: &AppState, url: &str) -> Result<(), ApiError> {
    if url.len() > URL_MAX {
        return Err(ApiError::invalid_input(format!(
            "url is longer than {URL_MAX} bytes"
        )));
    }
    let target =
        Target::parse(url, &state.settings.internal_suffixes).map_err(ApiError::invalid_input)?;
    if let Some(egress) = &state.settings.webhooks.egress {
        egress
            .vet(&target.host, target.port)
            .await
            .map_err(|e| ApiError::invalid_input(format!("url: {e}")))?;
    }
    Ok(())
}

/// `GET /v1/admin/webhooks`.
#[utoipa::path(get, path = "/v1/admin/webhooks", tag = "admin", security(("admin" = [])),
    responses((status = 200, description = "The webhook endpoints (never their secrets).", body = schemas::Webhooks)))]
pub(crate) async fn list(
    _auth: AdminAuth,
    State(state): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    let all = state.store.webhooks().await?;
    Ok(listing("webhooks", &all, endpoint_json))
}

/// `POST /v1/admin/webhooks` → `201 {"id", "secret"}` (the secret shown this once).
#[utoipa::path(post, path = "/v1/admin/webhooks", tag = "admin", security(("admin" = [])), request_body = WebhookBody,
    responses((status = 201, description = "Added: its id and signing secret (shown this once).", body = schemas::WebhookCreated),
        (status = 422, description = "`INVALID_INPUT`: the URL is not http or https, carries credentials or a fragment, names an address or an internal name, does not resolve, or resolves to an address the proxy would refuse (outside `--allow-cidr`); an unknown event type; the description is too long.", body = schemas::ErrorBody)))]
pub(crate) async fn add(
    _auth: AdminAuth,
    State(state): State<AppState>,
    StrictJson(body): StrictJson<WebhookBody>,
) -> Result<(StatusCode, Json<schemas::WebhookCreated>), ApiError> {
    let events = event_types(body.events)?;
    let description = validate::note(body.description)?;
    vetted_url(&state, &body.url).await?;
    let seal = state.settings.webhooks.seal.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "STORE_UNAVAILABLE",
            "this process has no key to seal webhook secrets with",
        )
    })?;
    let id = WebhookId::generate();
    let secret = new_secret();
    let sealed = seal
        .seal_for(&crate::notify::secret_context(id.as_str()), &secret)
        .map_err(|e| {
            tracing::error!(error = %e, "sealing a webhook secret failed");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "STORE_UNAVAILABLE",
                "try again",
            )
        })?;
    let new = NewEndpoint {
        id: &id,
        url: &body.url,
        events: &events,
        description: description.as_deref(),
        secret_sealed: &sealed,
        include_link: body.include_link,
    };
    state
        .store
        .add_webhook(new, ACTOR, Timestamp::now())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(schemas::WebhookCreated {
            id: id.to_string(),
            secret,
        }),
    ))
}

/// `DELETE /v1/admin/webhooks/{id}`: the endpoint and its deliveries (pending ones are never
/// sent).
#[utoipa::path(delete, path = "/v1/admin/webhooks/{id}", tag = "admin", security(("admin" = [])), params(("id" = String, Path, description = "The endpoint's id.")),
    responses((status = 204, description = "Removed, with its deliveries."), WebhookNotFound))]
pub(crate) async fn remove(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = WebhookId::parse(&id).ok_or_else(webhook_not_found)?;
    let removed = state
        .store
        .remove_webhook(&id, ACTOR, Timestamp::now())
        .await?;
    found(removed, webhook_not_found)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/admin/webhooks/{id}/deliveries`: attempts, status and next try, newest first.
#[utoipa::path(get, path = "/v1/admin/webhooks/{id}/deliveries", tag = "admin", security(("admin" = [])), params(("id" = String, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "The endpoint's latest deliveries, newest first.", body = schemas::WebhookDeliveries), WebhookNotFound))]
pub(crate) async fn deliveries(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = known_endpoint(&state, &id).await?;
    let list = state
        .store
        .webhook_deliveries(&id, DELIVERIES_LISTED)
        .await?;
    Ok(listing("deliveries", &list, delivery_json))
}

/// `POST /v1/admin/webhooks/{id}/deliveries/{delivery_id}/retry`: due now, with a fresh set
/// of attempts.
#[utoipa::path(post, path = "/v1/admin/webhooks/{id}/deliveries/{delivery_id}/retry", tag = "admin", security(("admin" = [])),
    params(("id" = String, Path, description = "The endpoint's id."), ("delivery_id" = String, Path, description = "The delivery's id (its `webhook-id`).")),
    responses((status = 200, description = "Due now.", body = schemas::WebhookRetry),
        (status = 404, description = "`WEBHOOK_NOT_FOUND`: no such endpoint. `DELIVERY_NOT_FOUND`: it has no such delivery, or that one was delivered already.", body = schemas::ErrorBody)))]
pub(crate) async fn retry(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path((id, delivery)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let id = known_endpoint(&state, &id).await?;
    let not_found = || {
        ApiError::not_found(
            "DELIVERY_NOT_FOUND",
            "this endpoint has no such delivery still to make",
        )
    };
    let delivery = MessageId::parse(&delivery).ok_or_else(not_found)?;
    let due = state
        .store
        .retry_delivery(&id, &delivery, Timestamp::now())
        .await?;
    found(due, not_found)?;
    Ok(Json(json!({"id": delivery, "status": "pending"})))
}
