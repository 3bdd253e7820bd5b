//! Registering an interrupt (snapshot confirmed → pointer written → card returned), reissuing
//! its resume secret, and answering the tool's resume branch from stored data only.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use egressgate_store::db::interrupts::Pointer;
use egressgate_store::db::register::{NewPointer, RegisterError};
use egressgate_store::db::resume::StoredAnswer;
use egressgate_store::{ChatId, DraftId, InterruptId, Secret, Timestamp};
use serde_json::{Value, json};

use super::openapi::schemas;
use super::openapi::shared::{ChatParams, InterruptNotFound, InterruptParams, MissingUser};
use super::pointer::{self, claim_lost, interrupt_not_found};
use crate::auth::{ApprovalsAuth, ApprovalsUser, CardsReadAuth};
use crate::bulk;
use crate::error::ApiError;
use crate::holder::names_another_user;
use crate::state::AppState;

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterBody {
    draft_id: String,
    #[serde(default)]
    snapshot: Option<String>,
    #[serde(default)]
    first_answer: Option<String>,
    #[serde(default)]
    claim_id: Option<String>,
}

fn draft_not_found() -> ApiError {
    ApiError::not_found(
        "DRAFT_NOT_FOUND",
        "no such draft, or it expired with its turn",
    )
}

fn draft_used() -> ApiError {
    ApiError::conflict("DRAFT_USED", "this draft was already registered")
}

fn pending() -> ApiError {
    ApiError::conflict(
        "INTERRUPT_PENDING",
        "this chat already has an open approval request",
    )
}

/// The JSON Schema of the resume payload: every field narrows what the card asks, and a field
/// it does not list is refused (`additionalProperties: false`, as `crate::decision` reads it).
fn response_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "packages": {"type": "array", "items": {"type": "string"}},
            "access": {
                "type": "string",
                "enum": ["full", "read"],
                "description": "full (the card's level: downloads and uploads) or read (downloads only, for inspected hosts)"
            },
            "scope": {
                "type": "string",
                "enum": ["turn", "chat", "user"],
                "default": "chat",
                "description": "turn (this turn and its resumed run), chat (the rest of the chat) or user (every chat of the person, only where the administrator allows it)"
            },
            "max_uses": {
                "type": "integer",
                "minimum": 1,
                "maximum": crate::decision::MAX_USES,
                "description": "connections each approved site admits (a tunnel or a forwarded request each), then it is spent; leave out for unlimited"
            },
            "paths": {
                "type": "array",
                "minItems": 1,
                "maxItems": egressgate_store::path_prefix::MAX_PREFIXES,
                "items": {"type": "string", "pattern": "^/"},
                "description": "path prefixes (\"/org/\") the approved sites are narrowed to, for inspected hosts; leave out for the whole host"
            }
        },
        "required": ["approved"],
        "additionalProperties": false
    })
}

/// The AG-UI 1.0 `Interrupt` for a pointer.
pub(crate) fn interrupt_json(p: &Pointer) -> Value {
    let mut v = json!({
        "id": p.id,
        "reason": if p.tool_call_id.is_some() { "tool_call" } else { "egressgate:approval" },
        "message": p.card.message(),
        "responseSchema": response_schema(),
        "expiresAt": p.expires_at,
    });
    if let (Some(obj), Some(call)) = (v.as_object_mut(), &p.tool_call_id) {
        obj.insert("toolCallId".into(), json!(call));
    }
    v
}

/// The answer that shows a card's secret, the one time it is issued; with the card page's
/// link when the operator set where people reach this control plane (never a guessed one).
fn issued(state: &AppState, p: &Pointer, secret: &Secret) -> Value {
    let mut v =
        json!({"interrupt": interrupt_json(p), "card": p.card, "resume_secret": secret.expose()});
    if let Some(base) = &state.settings.link_base {
        v["card_url"] = json!(crate::links::card(base, p.id.as_str(), secret.expose()));
    }
    v
}

/// Largest body the registration reads: a base64 snapshot at the limit plus a first answer.
fn body_limit(state: &AppState) -> usize {
    let s = &state.settings;
    let snapshot = s.snapshot_max_bytes.saturating_add(2) / 3 * 4;
    usize::try_from(
        snapshot
            .saturating_add(s.item_max_bytes.saturating_mul(6))
            .saturating_add(65_536),
    )
    .unwrap_or(usize::MAX)
}

/// Logical lifetime, clamped below the snapshot retention so no request outlives its snapshot.
fn clamped_ttl(state: &AppState) -> Duration {
    let s = &state.settings;
    s.interrupt_ttl.min(
        s.snapshot_retention
            .saturating_sub(s.snapshot_retention / 10),
    )
}

/// `POST /v1/interrupts`.
#[utoipa::path(post, path = "/v1/interrupts", tag = "approval", security(("runtime" = [])), request_body = RegisterBody,
    responses(
        (status = 201, description = "The AG-UI interrupt, the card and the resume secret (shown once); `card_url`, the card page's link with that secret, when `--control-public-url` is set.", body = schemas::InterruptIssued),
        (status = 404, description = "`DRAFT_NOT_FOUND`: unknown or expired draft.", body = schemas::ErrorBody),
        (status = 409, description = "`DRAFT_USED`: the draft was registered already. `INTERRUPT_PENDING`: the chat has an open request. `CLAIM_LOST`: the chained card's claim is no longer held.", body = schemas::ErrorBody),
        (status = 410, description = "`TURN_SUPERSEDED`: a newer turn of the chat was opened since the draft; the card could never be answered. `CHAT_HIDDEN`: the chat was hidden.", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: the snapshot is not base64.", body = schemas::ErrorBody),
        (status = 507, description = "`SNAPSHOT_FAILED`: the snapshot was too large or could not be stored; nothing was created.", body = schemas::ErrorBody),
    ))]
pub(crate) async fn register(
    _: ApprovalsAuth,
    State(state): State<AppState>,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    // A body over the limit can only be an oversized snapshot.
    let bytes = axum::body::to_bytes(body, body_limit(&state))
        .await
        .map_err(|_| bulk::snapshot_failed("the snapshot is larger than snapshot-max-bytes"))?;
    let body: RegisterBody = crate::body::parse(&bytes)?;
    let now = Timestamp::now();
    let draft_id = DraftId::parse(&body.draft_id).ok_or_else(draft_not_found)?;
    let draft = state
        .store
        .draft(&draft_id)
        .await?
        .ok_or_else(draft_not_found)?;
    if draft.expires_at.has_passed(now) {
        return Err(draft_not_found());
    }
    if draft.used_at.is_some() {
        return Err(draft_used());
    }
    stale_check(&state, &draft).await?;
    let chain = body
        .claim_id
        .as_deref()
        .map(|c| Secret::from_presented(c).hash());
    // Cheap pre-check so a doomed registration writes no snapshot; the conditional write
    // in the transaction decides.
    let current = state
        .store
        .chat_interrupt(&draft.user, &draft.chat, now)
        .await?;
    match (&chain, &current) {
        (None, Some(p)) if p.is_open(now) => return Err(pending()),
        (Some(h), p)
            if !p.as_ref().is_some_and(|p| {
                p.lease_live(now) && p.claim.as_ref().is_some_and(|c| &c.hash == h)
            }) =>
        {
            return Err(claim_lost());
        }
        _ => {}
    }
    let snapshot = match body.snapshot {
        Some(b64) => Some(
            STANDARD
                .decode(b64.as_bytes())
                .map_err(|_| ApiError::invalid_input("snapshot is not valid base64"))?,
        ),
        None => None,
    };
    if snapshot
        .as_ref()
        .is_some_and(|s| s.len() as u64 > state.settings.snapshot_max_bytes)
    {
        return Err(bulk::snapshot_failed(
            "the snapshot is larger than snapshot-max-bytes",
        ));
    }
    let snapshot = match snapshot {
        Some(bytes) => Some(state.blobs.put(bytes).await.map_err(|e| {
            tracing::error!(error = %e, "snapshot write failed");
            bulk::snapshot_failed(
                "the snapshot could not be stored; no approval request was created",
            )
        })?),
        None => None,
    };
    let base = bulk::base_size(&draft.card, draft.tool_call_id.as_deref());
    let (first_answer, first_answer_blob) =
        match bulk::place_first_answer(&state, base, body.first_answer).await {
            Ok(placed) => placed,
            Err(e) => {
                bulk::discard(&state, snapshot).await;
                return Err(e);
            }
        };
    let written: Vec<_> = snapshot
        .iter()
        .chain(first_answer_blob.iter())
        .cloned()
        .collect();
    let secret = Secret::generate();
    let id = InterruptId::generate();
    let ttl = clamped_ttl(&state);
    let purge_at = now.plus(ttl + state.settings.interrupt_retention);
    crate::notify::keep_link(
        &state.store,
        &state.settings.webhooks,
        &id,
        &secret,
        purge_at,
    )
    .await;
    let new = NewPointer {
        draft: &draft,
        id,
        secret_hash: secret.hash(),
        snapshot,
        first_answer: StoredAnswer {
            inline: first_answer,
            key: first_answer_blob.as_ref().map(|b| b.locator()),
        },
        ttl,
        retention: state.settings.interrupt_retention,
        chain_claim: chain,
    };
    match state.store.register_interrupt(new, now).await {
        Ok(p) => Ok((StatusCode::CREATED, Json(issued(&state, &p, &secret)))),
        Err(e) => {
            bulk::discard(&state, written).await;
            Err(match e {
                RegisterError::DraftNotFound => draft_not_found(),
                RegisterError::DraftUsed => draft_used(),
                RegisterError::Pending => pending(),
                RegisterError::ClaimLost => claim_lost(),
                RegisterError::Store(e) => e.into(),
            })
        }
    }
}

/// A card whose chat was hidden, or whose turn a newer one replaced, could never be answered
/// (resume expires it at the first click): refuse it now, with nothing written, so the runtime
/// learns it at registration instead of from the person.
async fn stale_check(
    state: &AppState,
    draft: &egressgate_store::db::drafts::Draft,
) -> Result<(), ApiError> {
    let turn = state
        .store
        .turn(&draft.turn)
        .await?
        .ok_or_else(draft_not_found)?;
    let chat = state.store.chat_state(&draft.user, &draft.chat).await?;
    match chat {
        Some(c) if c.hidden => Err(ApiError::gone("CHAT_HIDDEN", "this chat was hidden")),
        Some(c) if c.turn_seq <= turn.seq => Ok(()),
        _ => Err(ApiError::gone(
            "TURN_SUPERSEDED",
            "a newer turn of this chat was opened since this card was drafted, so nobody \
             could answer it; ask again in the new turn if it is still needed",
        )),
    }
}

/// `POST /v1/chats/{chat_id}/interrupt/reissue`: the open request with a fresh secret.
#[utoipa::path(post, path = "/v1/chats/{chat_id}/interrupt/reissue", tag = "approval", security(("runtime" = [])), params(ChatParams),
    responses(
        (status = 200, description = "The open request with a fresh secret (and its `card_url` when `--control-public-url` is set); the old secret stops working.", body = schemas::InterruptIssued),
        MissingUser,
        (status = 404, description = "`INTERRUPT_NOT_FOUND`: the chat has no open request.", body = schemas::ErrorBody),
    ))]
pub(crate) async fn reissue(
    ApprovalsUser(user): ApprovalsUser,
    State(state): State<AppState>,
    axum::Extension(guard): axum::Extension<std::sync::Arc<crate::resume_guard::ResumeGuard>>,
    Path(chat_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let chat = ChatId::parse(&chat_id).ok_or_else(interrupt_not_found)?;
    let secret = Secret::generate();
    let p = state
        .store
        .reissue_secret(&user, &chat, &secret.hash(), Timestamp::now())
        .await?
        .ok_or_else(interrupt_not_found)?;
    // The resume limits keep the old secret's hash beside the card's bucket.
    guard.forget_card(&p.id);
    Ok(Json(issued(&state, &p, &secret)))
}

/// `GET /v1/interrupts/{id}/outcome`: state, card and decision from stored data only.
#[utoipa::path(get, path = "/v1/interrupts/{id}/outcome", tag = "approval", security(("runtime" = [])), params(InterruptParams),
    responses(
        (status = 200, description = "State, card and decision, from stored data only (never re-merged).", body = schemas::OutcomeAnswer),
        InterruptNotFound,
    ))]
pub(crate) async fn outcome(
    _: CardsReadAuth,
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let now = Timestamp::now();
    let p = pointer::find(&state, &id, now).await?;
    if names_another_user(&headers, &p.user) {
        return Err(interrupt_not_found());
    }
    Ok(Json(json!({
        "user_id": p.user,
        "state": p.effective_state(now),
        "card": p.card,
        "decision": p.decision,
        "handoff": pointer::awaits_takeover(&p, now),
    })))
}
