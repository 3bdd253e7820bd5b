//! Resuming exactly once, in the design's order: validate → read and authenticate the
//! pointer (replay when done) → stale chat → resume slot → right to approve → claim. Nothing
//! before the claim takes ownership; a failed check refuses or expires the request.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use egressgate_store::db::interrupts::{InterruptState, Pointer};
use egressgate_store::db::resume::{ClaimAttempt, Decider};
use egressgate_store::{InterruptId, Secret, SecretHash, Timestamp};
use serde_json::{Value, json};

use super::interrupts::interrupt_not_found;
use crate::AppState;
use crate::body::StrictJson;
use crate::bulk;
use crate::decision::{ResumeStatus, decide};
use crate::error::ApiError;
use crate::holder::SecretHolder;

/// The resume body. A missing `resume` list is zero entries, so step 1 answers it with
/// `422 INCOMPLETE_RESUME` like any other count but one.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    secret: String,
    #[serde(default)]
    resume: Vec<ResumeEntry>,
}

/// One AG-UI resume entry. `status` and `payload` are read leniently, whatever their JSON
/// type, so an odd decision declines (fail closed) instead of failing the request; a missing
/// `interruptId` does not name this request (`INCOMPLETE_RESUME`); `metadata` is ignored.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResumeEntry {
    #[serde(default)]
    interrupt_id: Option<String>,
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<Value>,
}

fn expired(why: &str) -> ApiError {
    ApiError::gone(
        "INTERRUPT_EXPIRED",
        format!("this approval request expired: {why}"),
    )
}

fn in_progress() -> ApiError {
    ApiError::conflict(
        "RESUME_IN_PROGRESS",
        "another resume of this request is in progress",
    )
}

/// Compared against when the id is unknown, so timing does not reveal which ids exist.
fn dummy_hash() -> SecretHash {
    SecretHash::of(b"egressgate: no such interrupt")
}

/// Counts a rejected answer on its card without changing the caller's answer.
async fn note_rejection(state: &AppState, id: &InterruptId, reason: &str) {
    if let Err(e) = state
        .store
        .record_rejected_decision(id, reason, Timestamp::now())
        .await
    {
        tracing::warn!(error = %e, interrupt_id = %id, "could not record a rejected decision");
    }
}

/// The same, off the request path: a wrong secret must answer as fast as an unknown id.
fn note_rejection_later(state: &AppState, id: &InterruptId, reason: &'static str) {
    let (state, id) = (state.clone(), id.clone());
    tokio::spawn(async move { note_rejection(&state, &id, reason).await });
}

/// Step 2: the pointer, if the id exists, the secret matches and the caller may act for its
/// user; otherwise the identical 404.
async fn authenticate(
    state: &AppState,
    id: &str,
    secret: &Secret,
    holder: &SecretHolder,
    now: Timestamp,
) -> Result<Pointer, ApiError> {
    let found = match InterruptId::parse(id) {
        Some(id) => state.store.interrupt(&id, now).await?,
        None => None,
    };
    let Some(p) = found else {
        let _ = dummy_hash().matches(secret);
        return Err(interrupt_not_found());
    };
    if !p.secret_hash.matches(secret) {
        note_rejection_later(state, &p.id, "wrong secret");
        return Err(interrupt_not_found());
    }
    if !holder.may_act_for(&p.user) {
        note_rejection_later(state, &p.id, "another user");
        return Err(interrupt_not_found());
    }
    Ok(p)
}

/// `POST /v1/interrupts/{id}/resume`.
pub(crate) async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    holder: SecretHolder,
    StrictJson(body): StrictJson<ResumeBody>,
) -> Result<Json<Value>, ApiError> {
    let now = Timestamp::now();
    // 1. Exactly one entry, for this interrupt.
    let entry = match body.resume.as_slice() {
        [only] if only.interrupt_id.as_deref() == Some(id.as_str()) => only,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "INCOMPLETE_RESUME",
                "send exactly one resume entry, whose interruptId is this request's id",
            ));
        }
    };
    // 2. The pointer, by id and secret.
    let p = authenticate(
        &state,
        &id,
        &Secret::from_presented(&body.secret),
        &holder,
        now,
    )
    .await?;
    if p.state == InterruptState::Done {
        let answer = bulk::load_answer(&state, &p).await?;
        return Ok(Json(
            json!({"state": "done", "replayed": true, "decision": p.decision, "answer": answer}),
        ));
    }
    if p.lease_live(now) {
        return Err(in_progress());
    }
    if p.state == InterruptState::Expired || p.expires_at.has_passed(now) {
        return Err(expired("it is no longer answerable"));
    }
    let status = ResumeStatus::of(entry.status.as_ref());
    let decision = match decide(&p.card, status, entry.payload.as_ref()) {
        Ok(d) => d,
        Err(e) => {
            note_rejection(&state, &p.id, "invalid decision").await;
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "INVALID_DECISION",
                e.0,
            ));
        }
    };
    if p.decision.as_ref().is_some_and(|first| *first != decision) {
        note_rejection(&state, &p.id, "decision conflict").await;
        return Err(ApiError::conflict(
            "DECISION_CONFLICT",
            "this request was already answered differently",
        ));
    }
    // 3. The conversation moved on or was hidden.
    let chat = state.store.chat_state(&p.user, &p.chat).await?;
    if chat.is_none_or(|c| c.hidden || c.turn_seq > p.turn_seq) {
        state.store.expire_interrupt(&p.id, now).await?;
        return Err(expired(
            "the chat was hidden or moved on to a newer message",
        ));
    }
    // 4. A resume slot for the user.
    let s = &state.settings;
    let slot_until = now.plus(s.lease);
    if !state
        .store
        .reserve_resume_slot(&p.user, &p.id, s.resume_slots_per_user, slot_until, now)
        .await?
    {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "BUSY",
            "too many resumes in progress for this user; try again shortly",
        ));
    }
    // 5. The right to approve, as of now.
    if !state
        .store
        .can_approve(&p.user)
        .await?
        .unwrap_or(s.default_can_approve)
    {
        state.store.expire_interrupt(&p.id, now).await?;
        return Err(expired("the user may no longer approve"));
    }
    // 6. The claim (or, past the cap, denial and expiry).
    let decider = holder
        .0
        .as_ref()
        .map_or(Decider::SecretOnly, Decider::Person);
    if p.claim_count >= i64::from(s.claim_cap) {
        return Err(
            if state.store.expire_at_claim_cap(&p, decider, now).await? {
                expired("it was claimed too many times without finishing, so it was denied")
            } else {
                in_progress()
            },
        );
    }
    let claim = Secret::generate();
    let claim_hash = claim.hash();
    let deadline = now.plus(s.resume_deadline);
    let lease = now.plus(s.lease).min(deadline);
    let attempt = ClaimAttempt {
        read: &p,
        worker: format!(
            "claim-{}",
            claim_hash.as_str().get(..12).unwrap_or_default()
        ),
        claim_hash,
        lease_expires_at: lease,
        deadline,
        decision: &decision,
        approval_expires_at: now.plus(s.approval_ttl),
        decider,
    };
    if !state.store.claim_interrupt(&attempt, now).await? {
        return Err(in_progress());
    }
    let snapshot = match &p.snapshot {
        Some(blob) => Some(
            STANDARD.encode(
                state
                    .blobs
                    .get(blob)
                    .await
                    .map_err(|e| bulk::unavailable(&e.to_string()))?,
            ),
        ),
        None => None,
    };
    Ok(Json(json!({
        "state": "claimed",
        "claim": {"claim_id": claim.expose(), "lease_expires_at": lease, "deadline": deadline},
        "decision": decision,
        "snapshot": snapshot,
    })))
}
