//! One interrupt pointer as the interrupt endpoints read it: by id for a caller, the errors
//! they all answer with, the call on one card that the secret and claim holders' endpoints
//! take, and the claim labels that tell a runtime's claim from a handoff. Registering,
//! resuming and the claim holder's calls all build on it, so none of them has to import
//! another for these.

use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::response::{IntoResponse, Response};
use egressgate_store::db::interrupts::{InterruptState, Pointer};
use egressgate_store::{InterruptId, SecretHash, Timestamp};
use serde::de::DeserializeOwned;

use crate::body::StrictJson;
use crate::error::ApiError;
use crate::state::AppState;

/// A call on the card `{id}` names: who calls (`C`, a resume secret's attempt or a claim
/// holder), the strict JSON body `B`, and the time the call is judged at. The view, resume,
/// heartbeat and complete endpoints take it, so they extract their parts in one order: the
/// path, the caller, then the body.
pub(crate) struct CardCall<C, B> {
    /// The process's state.
    pub(crate) state: AppState,
    /// The card id as the path gave it (parsed by the lookup, so a malformed one is the same
    /// 404 as an unknown one).
    pub(crate) id: String,
    /// Who calls.
    pub(crate) caller: C,
    /// The request body.
    pub(crate) body: B,
    /// When the call is judged.
    pub(crate) now: Timestamp,
}

impl<C, B> FromRequest<AppState> for CardCall<C, B>
where
    C: FromRequestParts<AppState> + Send,
    C::Rejection: IntoResponse,
    B: DeserializeOwned + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Path(id) = Path::<String>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let caller = C::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let StrictJson(body) = StrictJson::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self {
            state: state.clone(),
            id,
            caller,
            body,
            now: Timestamp::now(),
        })
    }
}

/// `404 INTERRUPT_NOT_FOUND`, identical for unknown ids, wrong secrets and other users.
pub(crate) fn interrupt_not_found() -> ApiError {
    ApiError::not_found("INTERRUPT_NOT_FOUND", "no such approval request")
}

/// `409 CLAIM_LOST`: the caller no longer holds the claim it names.
pub(crate) fn claim_lost() -> ApiError {
    ApiError::conflict("CLAIM_LOST", "the claim is no longer held")
}

/// The pointer `id` names as of `now`, or [`interrupt_not_found`] for a malformed or unknown
/// id. Whose card it is, is the caller's check.
pub(crate) async fn find(state: &AppState, id: &str, now: Timestamp) -> Result<Pointer, ApiError> {
    let id = InterruptId::parse(id).ok_or_else(interrupt_not_found)?;
    state
        .store
        .interrupt(&id, now)
        .await?
        .ok_or_else(interrupt_not_found)
}

/// Label prefix of a claim made without the runtime token, which the runtime takes over.
pub(crate) const HANDOFF: &str = "handoff";

/// A claim's worker label: its kind and a prefix of its hash (never the claim id itself).
pub(crate) fn worker_label(kind: &str, claim_hash: &SecretHash) -> String {
    format!(
        "{kind}-{}",
        claim_hash.as_str().get(..12).unwrap_or_default()
    )
}

/// Whether the current claim was made by a bare secret holder (the card page) and waits for
/// the runtime to take it over.
pub(crate) fn awaits_takeover(p: &Pointer, now: Timestamp) -> bool {
    p.state == InterruptState::Claimed
        && p.claim
            .as_ref()
            .is_some_and(|c| !c.deadline.has_passed(now) && c.worker.starts_with(HANDOFF))
}
