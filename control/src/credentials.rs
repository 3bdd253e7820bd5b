//! What a presented API token is worth: the scopes it holds and when it expires, from the two
//! env tokens' hashes or the named tokens in the database. The bearer extractors (`auth`) and
//! the admin console's sessions (`ui::session`) both ask here, so neither has to import the
//! other for it. Every lookup that would read the database passes the failure limit first
//! ([`guard`]).

pub(crate) mod guard;

use axum::http::StatusCode;
use egressgate_store::db::tokens::{Scope, Scopes};
use egressgate_store::{SecretHash, Timestamp};

use crate::error::ApiError;
use crate::state::AppState;
use guard::Gate;

/// `401 UNAUTHORIZED` with the reason.
pub(crate) fn unauthorized(why: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", why)
}

/// The scopes a token holds, by its hash, and when it expires (`None`: never): the env tokens
/// first (both hashes always compared, so timing does not say which one a guess was close
/// to), then the named tokens: those only if `gate` admits the client, and an unknown or
/// expired one is charged to it.
pub(crate) async fn grant_of(
    state: &AppState,
    hash: &SecretHash,
    gate: &Gate,
) -> Result<(Scopes, Option<Timestamp>), ApiError> {
    let admin = state.tokens.admin.matches_hash(hash);
    let runtime = state.tokens.runtime.matches_hash(hash);
    if admin || runtime {
        let mut scopes = Vec::new();
        if admin {
            scopes.extend(Scopes::ADMIN.iter());
        }
        if runtime {
            scopes.extend(Scopes::RUNTIME.iter());
        }
        return Ok((Scopes::of(scopes), None));
    }
    gate.admit()?;
    let Some(named) = state.store.token_by_hash(hash).await? else {
        gate.failed();
        return Err(unauthorized("unknown bearer token"));
    };
    if named
        .expires_at
        .is_some_and(|at| at.has_passed(Timestamp::now()))
    {
        gate.failed();
        return Err(unauthorized("this bearer token has expired"));
    }
    Ok((named.scopes, named.expires_at))
}

/// If the token with this hash holds the `admin` scope right now, when it expires (`None`:
/// never). The console signs in with it and re-checks it on every request, so removing or
/// expiring the token ends its sessions at once. An error is the gate's `429`.
pub(crate) async fn admin_token_expiry(
    state: &AppState,
    hash: &SecretHash,
    gate: &Gate,
) -> Result<Option<Option<Timestamp>>, ApiError> {
    match grant_of(state, hash, gate).await {
        Ok((scopes, expires)) if scopes.contains(Scope::Admin) => Ok(Some(expires)),
        Err(e) if e.status == StatusCode::TOO_MANY_REQUESTS => Err(e),
        _ => Ok(None),
    }
}
