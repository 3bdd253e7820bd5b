//! Admin console sessions: the admin token is presented once and exchanged for a random
//! session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` behind TLS, with an expiry); only
//! SHA-256 hashes of the cookie and of its CSRF token are stored. A cookie-authenticated
//! request that changes state must also carry the CSRF token (`X-Egressgate-CSRF`).

use std::time::Duration;

use axum::extract::State;
use axum::http::header::{self, HeaderMap};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use egressgate_store::{Secret, SecretHash, Timestamp};
use subtle::ConstantTimeEq as _;

use crate::body::StrictJson;
use crate::credentials::guard::Gate;
use crate::credentials::{admin_token_expiry, unauthorized};
use crate::error::ApiError;
use crate::state::AppState;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "egressgate_admin";
/// The header that carries the CSRF token.
pub(crate) const CSRF_HEADER: &str = "x-egressgate-csrf";
/// How long a console session lasts.
const LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// A live session, as the console page needs it.
pub(crate) struct Session {
    /// The CSRF token (derived from the cookie, so it is never stored in clear).
    pub(crate) csrf: String,
    hash: SecretHash,
}

/// The CSRF token of a session: a hash of the cookie under a label, so the server can
/// render it into the page without storing it, and it reveals nothing of the cookie.
fn csrf_of(cookie: &Secret) -> String {
    SecretHash::of(format!("egressgate csrf:{}", cookie.expose()).as_bytes())
        .as_str()
        .to_owned()
}

fn cookie_value(headers: &HeaderMap) -> Option<Secret> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| Secret::from_presented(v))
}

/// The request's live session, if its cookie names one.
pub(crate) async fn current(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<Session>, ApiError> {
    let Some(cookie) = cookie_value(headers) else {
        return Ok(None);
    };
    let hash = cookie.hash();
    let Some((csrf_hash, token)) = state.store.ui_session(&hash, Timestamp::now()).await? else {
        return Ok(None);
    };
    // The token the session was signed in with must still hold the admin scope.
    // The token came from the database, not from a client: nothing to limit.
    if admin_token_expiry(state, &token, &Gate::open())
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let csrf = csrf_of(&cookie);
    // The stored CSRF hash binds the token to this row (a row from an older scheme fails).
    if !csrf_hash.matches(&Secret::from_presented(&csrf)) {
        return Ok(None);
    }
    Ok(Some(Session { csrf, hash }))
}

/// Admin access through the console's cookie: a live session, and for anything but a read
/// the session's CSRF token in [`CSRF_HEADER`]. `None` when there is no cookie at all.
pub(crate) async fn admin_by_cookie(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
) -> Option<Result<(), ApiError>> {
    cookie_value(headers)?;
    Some(match current(state, headers).await {
        Err(e) => Err(e),
        Ok(None) => Err(unauthorized("the console session expired; sign in again")),
        Ok(Some(s)) => {
            if matches!(*method, Method::GET | Method::HEAD) {
                Ok(())
            } else {
                csrf_check(&s, headers)
            }
        }
    })
}

/// The session's CSRF token must be in [`CSRF_HEADER`] (compared in constant time).
fn csrf_check(s: &Session, headers: &HeaderMap) -> Result<(), ApiError> {
    let sent = headers
        .get(CSRF_HEADER)
        .is_some_and(|v| bool::from(v.as_bytes().ct_eq(s.csrf.as_bytes())));
    if sent {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "CSRF",
            "missing or wrong CSRF token",
        ))
    }
}

/// The sign-in body.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignIn {
    token: String,
}

/// Whether the browser reached us over TLS (directly or through a terminating proxy).
fn over_tls(headers: &HeaderMap) -> bool {
    let says = |name: &str, want: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with(want))
    };
    says("x-forwarded-proto", "https") || says("origin", "https://")
}

fn set_cookie(value: &str, max_age: u64, secure: bool) -> String {
    format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    )
}

/// `POST /ui/admin/session {"token"}`: the admin token, once, for a session cookie.
pub(crate) async fn sign_in(
    State(state): State<AppState>,
    gate: Gate,
    headers: HeaderMap,
    StrictJson(body): StrictJson<SignIn>,
) -> Result<Response, ApiError> {
    let token = Secret::from_presented(body.token.trim()).hash();
    let Some(token_expires) = admin_token_expiry(&state, &token, &gate).await? else {
        return Err(unauthorized("that is not the admin token"));
    };
    let cookie = Secret::generate();
    let now = Timestamp::now();
    // Never longer than the token it was signed in with.
    let expires = token_expires.map_or(now.plus(LIFETIME), |t| t.min(now.plus(LIFETIME)));
    let max_age = u64::try_from((expires.millis() - now.millis()) / 1000).unwrap_or(0);
    let csrf = Secret::from_presented(&csrf_of(&cookie));
    state
        .store
        .create_ui_session(&cookie.hash(), &csrf.hash(), &token, expires, now)
        .await?;
    let cookie = set_cookie(cookie.expose(), max_age, over_tls(&headers));
    Ok((
        StatusCode::NO_CONTENT,
        [
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".into()),
        ],
    )
        .into_response())
}

/// `POST /ui/admin/signout` (CSRF token required): ends the session and clears the cookie.
pub(crate) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(s) = current(&state, &headers).await? else {
        return Err(unauthorized("not signed in"));
    };
    csrf_check(&s, &headers)?;
    state.store.delete_ui_session(&s.hash).await?;
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, set_cookie("", 0, over_tls(&headers)))],
    )
        .into_response())
}
