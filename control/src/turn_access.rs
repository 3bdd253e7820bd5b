//! Finding the turn a path names: `404 TURN_NOT_FOUND` when the id is malformed, unknown or
//! belongs to another user than the one the runtime names, `410 TURN_EXPIRED` when the caller
//! needs a live turn. One place, so every turn endpoint answers these cases alike.

use axum::http::{HeaderMap, StatusCode};
use egressgate_store::db::turns::Turn;
use egressgate_store::{Store, Timestamp, TurnId};

use crate::auth::USER_HEADER;
use crate::error::ApiError;

/// Whether an expired turn is still acceptable to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// Reading what already happened (refusals, egress): an expired turn's record is
    /// harmless to read, and the agent may explain a failure after the credential lapsed.
    Record,
    /// Acting for the turn (approval tool, policy): its credential must still work.
    Live,
}

fn not_found() -> ApiError {
    ApiError::not_found("TURN_NOT_FOUND", "no such turn")
}

/// Loads the turn `raw_id` names. When the runtime sends `X-Egressgate-User`, a turn of
/// another user is answered exactly as one that does not exist.
pub(crate) async fn find_turn(
    store: &Store,
    raw_id: &str,
    headers: &HeaderMap,
    need: Need,
    now: Timestamp,
) -> Result<Turn, ApiError> {
    let id = TurnId::parse(raw_id).ok_or_else(not_found)?;
    let turn = store.turn(&id).await?.ok_or_else(not_found)?;
    if let Some(named) = headers.get(USER_HEADER)
        && named.to_str().ok() != Some(turn.user.as_str())
    {
        return Err(not_found());
    }
    if need == Need::Live && turn.expires_at.has_passed(now) {
        return Err(ApiError::new(
            StatusCode::GONE,
            "TURN_EXPIRED",
            "this turn has expired; the next user message opens a new one",
        ));
    }
    Ok(turn)
}
