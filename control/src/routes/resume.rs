//! Resuming exactly once, in the design's order: validate → read and authenticate the
//! pointer (replay when done) → stale chat → resume slot → right to approve → claim. Nothing
//! before the claim takes ownership; a failed check refuses or expires the request.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use egressgate_store::db::interrupts::{InterruptState, Outcome, Pointer};
use egressgate_store::db::resume::{ClaimAttempt, Decider};
use egressgate_store::{Access, InterruptId, Scope, Secret, SecretHash, Timestamp};
use serde_json::{Value, json};

use super::openapi::schemas;
use super::openapi::shared::InterruptParams;
use super::pointer::{CardCall, HANDOFF, interrupt_not_found, worker_label};
use crate::bulk;
use crate::decision::{Allowances, ResumeStatus, decide};
use crate::error::ApiError;
use crate::holder::{ClientAddr, SecretHolder};
use crate::resume_guard::{ClientKey, Failure, ResumeGuard};
use crate::state::AppState;

/// The resume body. A missing `resume` list is zero entries, so step 1 answers it with
/// `422 INCOMPLETE_RESUME` like any other count but one.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    secret: String,
    #[serde(default)]
    resume: Vec<ResumeEntry>,
}

/// One AG-UI resume entry. `status` and `payload` are read leniently, whatever their JSON
/// type, so an odd decision declines (fail closed) instead of failing the request; a missing
/// `interruptId` does not name this request (`INCOMPLETE_RESUME`); `metadata` is ignored.
#[derive(serde::Deserialize, utoipa::ToSchema)]
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

pub(crate) fn expired(why: &str) -> ApiError {
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

/// Whoever presents a resume secret, from where, under the process's resume limits: every
/// endpoint that checks one (resume, the card page's view) takes this, so they all count
/// failures the same way. Extracted in the order the handlers took its parts: the limits, the
/// client's address, then the optional runtime token.
pub(crate) struct Attempt {
    guard: Arc<ResumeGuard>,
    client: ClientKey,
    holder: SecretHolder,
}

impl FromRequestParts<AppState> for Attempt {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Extension(guard) = Extension::<Arc<ResumeGuard>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let client = match ClientAddr::from_request_parts(parts, state).await {
            Ok(ClientAddr(addr)) => ClientKey::of(addr),
            Err(never) => match never {},
        };
        let holder = SecretHolder::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self {
            guard,
            client,
            holder,
        })
    }
}

impl Attempt {
    /// Step 2: the pointer, if the id exists, the secret presented matches (the card's own,
    /// or a live inbox secret of its user) and the caller may act for its user; otherwise the identical 404. A client or card past its failure limit
    /// is refused before the database is asked; a failure is charged and tallied, never
    /// written on its own.
    pub(crate) async fn authenticate(
        &self,
        state: &AppState,
        id: &str,
        presented: &str,
        now: Timestamp,
    ) -> Result<Pointer, ApiError> {
        let secret = &Secret::from_presented(presented);
        let id = InterruptId::parse(id);
        self.guard.admit(self.client, id.as_ref(), secret)?;
        let found = match &id {
            Some(id) => state.store.interrupt(id, now).await?,
            None => None,
        };
        let Some(p) = found else {
            let _ = dummy_hash().matches(secret);
            self.guard
                .failed(&state.store, self.client, Failure::Unknown);
            return Err(interrupt_not_found());
        };
        let opens = p.secret_hash.matches(secret)
            || crate::inbox::opens_card_of(state, &p.user, presented, now).await?;
        let reason = if !opens {
            "wrong secret"
        } else if !self.holder.may_act_for(&p.user) {
            "another user"
        } else {
            return Ok(p);
        };
        let failure = Failure::Card {
            id: &p.id,
            secret_hash: &p.secret_hash,
            reason,
        };
        self.guard.failed(&state.store, self.client, failure);
        Err(interrupt_not_found())
    }
}

/// `POST /v1/interrupts/{id}/resume`.
#[utoipa::path(post, path = "/v1/interrupts/{id}/resume", tag = "approval", security((), ("runtime" = [])), request_body = ResumeBody, params(InterruptParams),
    responses(
        (status = 200, description = "`claimed` with the claim and the decision, or a replay of a done request (`replayed: true`), which runs nothing.", body = schemas::ResumeAnswer),
        (status = 404, description = "`INTERRUPT_NOT_FOUND`: unknown id, wrong secret or another user's card (identical).", body = schemas::ErrorBody),
        (status = 409, description = "`RESUME_IN_PROGRESS`: another resume holds the claim. `DECISION_CONFLICT`: answered differently before.", body = schemas::ErrorBody),
        (status = 410, description = "`INTERRUPT_EXPIRED`: no longer answerable (expired, chat hidden or moved on, right to approve lost, claim cap).", body = schemas::ErrorBody),
        (status = 422, description = "`INCOMPLETE_RESUME`: not exactly one entry for this id. `INVALID_DECISION`: a package not on the card, an access level other than `full`/`read`, or `read` for a host the proxy does not inspect.", body = schemas::ErrorBody),
        (status = 429, description = "`BUSY`: no resume slot free for this user. `TOO_MANY_ATTEMPTS`: too many failed secrets from this client or on this card; see `Retry-After`.", body = schemas::ErrorBody),
    ))]
pub(crate) async fn resume(call: CardCall<Attempt, ResumeBody>) -> Result<Json<Value>, ApiError> {
    let CardCall {
        state,
        id,
        caller: who,
        body,
        now,
    } = call;
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
    let p = who.authenticate(&state, &id, &body.secret, now).await?;
    let answerer = Answerer {
        guard: &who.guard,
        decider: who
            .holder
            .user
            .as_ref()
            .map_or(Decider::SecretOnly, Decider::Person),
        runtime: who.holder.runtime,
    };
    let status = ResumeStatus::of(entry.status.as_ref());
    answer(&state, p, status, entry.payload.as_ref(), answerer, now)
        .await
        .map(Json)
}

/// Who answers a card whose pointer was already read and authenticated (the secret holder of
/// [`resume`], or a Slack user mapped and checked by the interactions endpoint), and where
/// their failures are counted.
pub(crate) struct Answerer<'a> {
    /// The process's resume limits (an invalid decision or a conflict is tallied there).
    pub(crate) guard: &'a ResumeGuard,
    /// Who the audit log names.
    pub(crate) decider: Decider<'a>,
    /// The runtime's own claim (`true`), or a handoff claim the runtime takes over.
    pub(crate) runtime: bool,
}

/// Steps 2b to 6 of resuming `p` with `status` and `payload`: a done request replays, a live
/// claim is in progress, an expired one is gone; then the decision, the chat, the resume slot,
/// the right to approve and the claim, exactly as the card page's resume does them. Answers
/// the resume endpoint's body (`replayed` or `claimed`).
pub(crate) async fn answer(
    state: &AppState,
    p: Pointer,
    status: ResumeStatus,
    payload: Option<&Value>,
    who: Answerer<'_>,
    now: Timestamp,
) -> Result<Value, ApiError> {
    if p.state == InterruptState::Done {
        let answer = bulk::load_answer(state, &p).await?;
        return Ok(
            json!({"state": "done", "replayed": true, "decision": p.decision, "answer": answer}),
        );
    }
    if p.lease_live(now) {
        return Err(in_progress());
    }
    if p.state == InterruptState::Expired || p.expires_at.has_passed(now) {
        return Err(expired("it is no longer answerable"));
    }
    let allow = Allowances {
        user_scope: state.settings.allow_user_scope,
    };
    let decision = match decide(&p.card, status, payload, allow) {
        Ok(d) => d,
        Err(e) => {
            who.guard.tally(&state.store, &p.id, "invalid decision");
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "INVALID_DECISION",
                e.0,
            ));
        }
    };
    // `read` and path prefixes are kept only where the proxy sees each request.
    let per_request = match (decision.access == Access::Read, decision.paths.is_some()) {
        (_, true) => Some("paths"),
        (true, false) => Some("access \"read\""),
        (false, false) => None,
    };
    if decision.outcome == Outcome::Approved
        && let Some(what) = per_request
        && let Some(host) = crate::grants::first_not_inspected(state, &decision.sites).await?
    {
        who.guard.tally(&state.store, &p.id, "invalid decision");
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_DECISION",
            format!(
                "{what} cannot be enforced for {host}: the proxy does not inspect it; answer \
                 with the whole host at \"full\" or decline"
            ),
        ));
    }
    if p.decision.as_ref().is_some_and(|first| *first != decision) {
        who.guard.tally(&state.store, &p.id, "decision conflict");
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
    let decider = who.decider;
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
        worker: worker_label(if who.runtime { "claim" } else { HANDOFF }, &claim_hash),
        claim_hash,
        lease_expires_at: lease,
        deadline,
        decision: &decision,
        approval_expires_at: now.plus(match decision.scope {
            Scope::User => s.approval_ttl.min(s.user_grant_ttl),
            Scope::Turn | Scope::Chat => s.approval_ttl,
        }),
        decider,
    };
    if !state.store.claim_interrupt(&attempt, now).await? {
        return Err(in_progress());
    }
    let snapshot = bulk::load_snapshot(state, &p).await?;
    Ok(json!({
        "state": "claimed",
        "claim": {"claim_id": claim.expose(), "lease_expires_at": lease, "deadline": deadline},
        "decision": decision,
        "snapshot": snapshot,
    }))
}
