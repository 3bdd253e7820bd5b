//! Finding the turn a path names: `404 TURN_NOT_FOUND` when the id is malformed, unknown or
//! belongs to another user than the one the runtime names, `410 TURN_EXPIRED` when it has
//! expired (the design: "a request on an expired turn is `410 TURN_EXPIRED`"). One place, so
//! every turn endpoint answers these cases alike.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use egressgate_store::db::turns::Turn;
use egressgate_store::{Secret, SecretHash, Store, Timestamp, TurnId};

use crate::auth::{TurnsAuth, USER_HEADER};
use crate::error::ApiError;
use crate::state::AppState;

fn not_found() -> ApiError {
    ApiError::not_found("TURN_NOT_FOUND", "no such turn")
}

/// Loads the live turn `raw_id` names. When the runtime sends `X-Egressgate-User`, a turn of
/// another user is answered exactly as one that does not exist.
pub(crate) async fn find_turn(
    store: &Store,
    raw_id: &str,
    headers: &HeaderMap,
    now: Timestamp,
) -> Result<Turn, ApiError> {
    let id = TurnId::parse(raw_id).ok_or_else(not_found)?;
    let turn = store.turn(&id).await?.ok_or_else(not_found)?;
    if let Some(named) = headers.get(USER_HEADER)
        && named.to_str().ok() != Some(turn.user.as_str())
    {
        return Err(not_found());
    }
    if turn.expires_at.has_passed(now) {
        return Err(ApiError::gone(
            "TURN_EXPIRED",
            "this turn has expired; the next user message opens a new one",
        ));
    }
    Ok(turn)
}

/// The live turn a `/v1/turns/{turn_id}/…` path names, for a caller whose token holds `turns`:
/// the token is checked first, then [`find_turn`]. For endpoints without a body (with
/// one, the handler calls [`find_turn`] itself after the body is parsed).
pub(crate) struct PathTurn(pub(crate) Turn);

impl FromRequestParts<AppState> for PathTurn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        TurnsAuth::from_request_parts(parts, state).await?;
        let Path(turn_id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found())?;
        find_turn(&state.store, &turn_id, &parts.headers, Timestamp::now())
            .await
            .map(Self)
    }
}

/// The live turn of a `/v1/turns/{turn_id}/policy` path, for a caller holding either the
/// runtime token or that turn's own proxy credential (`Authorization: Basic
/// base64(turn_id:secret)`, the secret of its `proxy_url`), so a package installer in the
/// sandbox never needs the runtime token. The credential is checked like the proxy checks
/// it (hash compared in constant time, expiry) and reads its own turn only: another turn's
/// path is `404` as if it did not exist.
pub(crate) struct PolicyTurn(pub(crate) Turn);

fn bad_credential() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
        "unknown, wrong or expired turn credential",
    )
}

/// The turn a Basic credential proves, or `401`.
async fn credential_turn(store: &Store, header: &[u8]) -> Result<Turn, ApiError> {
    let (id, secret) =
        egressgate_store::credential::parse_basic(header).ok_or_else(bad_credential)?;
    let secret = Secret::from_presented(&secret);
    let found = match TurnId::parse(&id) {
        Some(id) => store.turn(&id).await?,
        None => None,
    };
    let Some(turn) = found else {
        // The same work as a wrong secret, so timing does not say which ids exist.
        let _ = SecretHash::of(b"egressgate: no such turn").matches(&secret);
        return Err(bad_credential());
    };
    if !turn.secret_hash.matches(&secret) || turn.expires_at.has_passed(Timestamp::now()) {
        return Err(bad_credential());
    }
    Ok(turn)
}

impl FromRequestParts<AppState> for PolicyTurn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let basic = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .filter(|v| v.len() > 6 && v[..6].eq_ignore_ascii_case(b"basic "))
            .map(<[u8]>::to_vec);
        let Some(header) = basic else {
            return PathTurn::from_request_parts(parts, state)
                .await
                .map(|PathTurn(t)| Self(t));
        };
        let turn = credential_turn(&state.store, &header).await?;
        let Path(turn_id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found())?;
        if turn_id != turn.id.as_str() {
            return Err(not_found());
        }
        Ok(Self(turn))
    }
}
