//! One interrupt pointer as the interrupt endpoints read it: by id for a caller, the errors
//! they all answer with, and the claim labels that tell a runtime's claim from a handoff.
//! Registering, resuming and the claim holder's calls all build on it, so none of them has
//! to import another for these.

use egressgate_store::db::interrupts::{InterruptState, Pointer};
use egressgate_store::{InterruptId, SecretHash, Timestamp};

use crate::error::ApiError;
use crate::state::AppState;

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
        && p.deadline.is_some_and(|d| !d.has_passed(now))
        && p.worker.as_deref().is_some_and(|w| w.starts_with(HANDOFF))
}
