//! The claim holder's side of a resume: heartbeats that keep the lease alive (never past the
//! claim's deadline) and completion, which keeps the answer for replays and frees the slot.
//! Authenticated by the claim id, which only the winning resume ever saw.

use axum::Json;
use axum::extract::{Path, State};
use egressgate_store::db::interrupts::{InterruptState, Pointer};
use egressgate_store::{Secret, Timestamp};
use serde_json::Value;

use super::openapi::schemas;
use super::openapi::shared::{ClaimLost, InterruptNotFound, InterruptParams};
use super::pointer::{self, CardCall, claim_lost, interrupt_not_found};
use crate::bulk;
use crate::error::{ApiError, found};
use crate::holder::SecretHolder;
use crate::state::AppState;

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeartbeatBody {
    claim_id: String,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompleteBody {
    claim_id: String,
    #[serde(default)]
    answer: Option<Value>,
}

/// The pointer, the claim the holder presents, and whether that claim is its current one.
async fn read<B>(
    call: &CardCall<SecretHolder, B>,
    claim_id: &str,
) -> Result<(Pointer, Secret, bool), ApiError> {
    let p = pointer::find(&call.state, &call.id, call.now).await?;
    if !call.caller.may_act_for(&p.user) {
        return Err(interrupt_not_found());
    }
    let claim = Secret::from_presented(claim_id);
    let ours = p.claim.as_ref().is_some_and(|c| c.hash.matches(&claim));
    Ok((p, claim, ours))
}

/// `POST /v1/interrupts/{id}/heartbeat`.
#[utoipa::path(post, path = "/v1/interrupts/{id}/heartbeat", tag = "approval", security((), ("runtime" = [])), request_body = HeartbeatBody, params(InterruptParams),
    responses(
        (status = 200, description = "The new lease expiry, never past the deadline.", body = schemas::Heartbeat),
        InterruptNotFound,
        ClaimLost,
        (status = 410, description = "`DEADLINE_PASSED`: the resume ran past its deadline.", body = schemas::ErrorBody),
    ))]
pub(crate) async fn heartbeat(
    call: CardCall<SecretHolder, HeartbeatBody>,
) -> Result<Json<schemas::Heartbeat>, ApiError> {
    let (p, claim, ours) = read(&call, &call.body.claim_id).await?;
    let (state, now) = (&call.state, call.now);
    if !ours || p.state != InterruptState::Claimed {
        return Err(claim_lost());
    }
    let deadline = p.claim.as_ref().map_or(now, |c| c.deadline);
    if deadline.has_passed(now) {
        return Err(ApiError::gone(
            "DEADLINE_PASSED",
            "the resume ran past its deadline; the claim cannot be extended",
        ));
    }
    let lease = now.plus(state.settings.lease).min(deadline);
    let held = state
        .store
        .heartbeat_claim(&p, &claim.hash(), lease, now)
        .await?;
    found(held, claim_lost)?;
    Ok(Json(schemas::Heartbeat {
        lease_expires_at: lease,
    }))
}

/// `POST /v1/interrupts/{id}/complete`.
#[utoipa::path(post, path = "/v1/interrupts/{id}/complete", tag = "approval", security((), ("runtime" = [])), request_body = CompleteBody, params(InterruptParams),
    responses(
        (status = 200, description = "Done; the answer is kept for replays.", body = schemas::Completed),
        InterruptNotFound,
        ClaimLost,
        (status = 507, description = "`SNAPSHOT_FAILED`: the answer could not be stored.", body = schemas::ErrorBody),
    ))]
pub(crate) async fn complete(
    call: CardCall<SecretHolder, CompleteBody>,
) -> Result<Json<schemas::Completed>, ApiError> {
    let (p, claim, ours) = read(&call, &call.body.claim_id).await?;
    let state = &call.state;
    if ours && p.state == InterruptState::Done {
        return Ok(Json(schemas::Completed::DONE));
    }
    if !ours || p.state != InterruptState::Claimed {
        return Err(claim_lost());
    }
    let (answer, blob) = bulk::place_answer(state, &p, call.body.answer.as_ref()).await?;
    if !state
        .store
        .complete_claim(&p, &claim.hash(), &answer)
        .await?
    {
        bulk::discard(state, blob).await;
        return Err(claim_lost());
    }
    Ok(Json(schemas::Completed::DONE))
}

/// The claim a runtime takes over, in the resume answer's shape.
#[derive(serde::Serialize)]
pub(crate) struct Takeover {
    /// Always `claimed`.
    state: InterruptState,
    /// The runtime's claim: heartbeat and complete with it.
    claim: ClaimOut,
    /// The decision the page's click fixed.
    decision: Option<egressgate_store::db::interrupts::Decision>,
    /// The paused run's snapshot, base64.
    snapshot: Option<String>,
}

/// A claim as the resume answer shows it.
#[derive(serde::Serialize)]
pub(crate) struct ClaimOut {
    claim_id: String,
    lease_expires_at: Timestamp,
    deadline: Timestamp,
}

/// `POST /v1/interrupts/{id}/takeover` (runtime token + `X-Egressgate-User`): the runtime
/// takes over a claim that a bare secret holder (the card page) made, gets a fresh claim id
/// and does the resumed work with it. Exactly one caller wins (a conditional write on the
/// claim read); the page's own claim id stops working. Nothing to take over — no claim, a
/// runtime's own claim, or one already taken over — is `409 CLAIM_LOST`.
#[utoipa::path(post, path = "/v1/interrupts/{id}/takeover", tag = "approval", security(("runtime" = [])),
    params(("id" = String, Path, description = "The interrupt (card) id."), ("X-Egressgate-User" = String, Header, description = "The card's user.")),
    responses((status = 200, description = "The runtime's own claim of a card the page answered: `state`, `claim`, `decision`, `snapshot`.", body = schemas::TakeoverAnswer),
        (status = 404, description = "`INTERRUPT_NOT_FOUND`: no such card (or another user's).", body = schemas::ErrorBody),
        (status = 409, description = "`CLAIM_LOST`: nothing to take over (no claim, a runtime's own claim, or one already taken over).", body = schemas::ErrorBody),
        (status = 410, description = "`DEADLINE_PASSED`: the claim's deadline passed.", body = schemas::ErrorBody)))]
pub(crate) async fn takeover(
    crate::auth::ApprovalsUser(user): crate::auth::ApprovalsUser,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Takeover>, ApiError> {
    let now = Timestamp::now();
    let p = pointer::find(&state, &id, now).await?;
    if p.user != user {
        return Err(interrupt_not_found());
    }
    if p.state == InterruptState::Claimed
        && p.claim.as_ref().is_some_and(|c| c.deadline.has_passed(now))
    {
        return Err(ApiError::gone(
            "DEADLINE_PASSED",
            "the resume ran past its deadline; the claim cannot be taken over",
        ));
    }
    if !pointer::awaits_takeover(&p, now) {
        return Err(claim_lost());
    }
    let claim = Secret::generate();
    let hash = claim.hash();
    let deadline = p.claim.as_ref().map_or(now, |c| c.deadline);
    let lease = now.plus(state.settings.lease).min(deadline);
    let worker = pointer::worker_label("claim", &hash);
    let taken = state
        .store
        .take_over_claim(&p, &hash, &worker, lease, now)
        .await?;
    found(taken, claim_lost)?;
    let snapshot = bulk::load_snapshot(&state, &p).await?;
    Ok(Json(Takeover {
        state: InterruptState::Claimed,
        claim: ClaimOut {
            claim_id: claim.expose().to_owned(),
            lease_expires_at: lease,
            deadline,
        },
        decision: p.decision,
        snapshot,
    }))
}
