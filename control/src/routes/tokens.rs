//! `GET|POST /v1/admin/tokens`, `DELETE /v1/admin/tokens/{name}`: named API tokens with
//! scopes and an optional expiry. The secret is returned once, by the `POST` that creates it;
//! only its SHA-256 is stored, and listings never show it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use egressgate_store::db::tokens::{
    NAME_MAX, NewToken, Scope, Scopes, TTL_MAX, TokenInfo, valid_name,
};
use egressgate_store::{Secret, Timestamp};
use serde::Deserialize;
use serde_json::{Value, json};

use super::listing;
use super::openapi::schemas;
use crate::auth::AdminAuth;
use crate::body::StrictJson;
use crate::error::{ApiError, found};
use crate::state::AppState;
use crate::validate;

/// Who the audit log names for changes made with an admin token.
const ACTOR: &str = "admin";

/// Longest lifetime a token may be given, in seconds.
const TTL_MAX_SECONDS: u64 = TTL_MAX.as_secs();

/// `POST /v1/admin/tokens` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenBody {
    name: String,
    scopes: Vec<String>,
    #[serde(default)]
    ttl_seconds: Option<u64>,
}

fn token_json(t: &TokenInfo) -> Value {
    let scopes: Vec<&str> = t.scopes.iter().map(Scope::as_str).collect();
    json!({"name": t.name, "scopes": scopes, "created_at": t.created_at, "expires_at": t.expires_at})
}

/// The scopes a body names: at least one, each known.
fn scopes(names: &[String]) -> Result<Scopes, ApiError> {
    let mut set = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let s = Scope::parse(n).ok_or_else(|| {
            let known: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::invalid_input(format!(
                "scopes[{i}] ({}): unknown scope; known: {}",
                validate::quote(n),
                known.join(", ")
            ))
        })?;
        set.push(s);
    }
    let set = Scopes::of(set);
    if set.is_empty() {
        return Err(ApiError::invalid_input(
            "scopes must name at least one scope",
        ));
    }
    Ok(set)
}

/// `GET /v1/admin/tokens` → `{"tokens": [{"name", "scopes", "created_at", "expires_at"}]}`.
#[utoipa::path(get, path = "/v1/admin/tokens", tag = "admin", security(("admin" = [])),
    responses((status = 200, description = "The named API tokens (never their secrets): `{\"tokens\": [{\"name\", \"scopes\", \"created_at\", \"expires_at\"}]}`.", body = schemas::AdminTokens)))]
pub(crate) async fn list(
    _auth: AdminAuth,
    State(state): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    let tokens = state.store.list_tokens().await?;
    Ok(listing("tokens", &tokens, token_json))
}

/// `POST /v1/admin/tokens` → `201` with the token's fields and `"token"` (the secret, shown
/// this once); `409 TOKEN_EXISTS` when the name is taken.
#[utoipa::path(post, path = "/v1/admin/tokens", tag = "admin", security(("admin" = [])), request_body = TokenBody,
    responses((status = 201, description = "The token, with its secret in `token` (shown this once).", body = schemas::AdminTokenCreated),
        (status = 409, description = "`TOKEN_EXISTS`: a token of that name exists.", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: a bad name, an unknown or missing scope, or a ttl out of range.", body = schemas::ErrorBody)))]
pub(crate) async fn add(
    _auth: AdminAuth,
    State(state): State<AppState>,
    StrictJson(body): StrictJson<TokenBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if !valid_name(&body.name) {
        return Err(ApiError::invalid_input(format!(
            "name must be 1 to {NAME_MAX} letters, digits, '.', '_' or '-'"
        )));
    }
    let scopes = scopes(&body.scopes)?;
    let now = Timestamp::now();
    let expires_at = match body.ttl_seconds {
        None => None,
        Some(s) if (1..=TTL_MAX_SECONDS).contains(&s) => {
            Some(now.plus(std::time::Duration::from_secs(s)))
        }
        Some(_) => {
            return Err(ApiError::invalid_input(format!(
                "ttl_seconds must be between 1 and {TTL_MAX_SECONDS}"
            )));
        }
    };
    let secret = Secret::generate();
    let hash = secret.hash();
    let new = NewToken {
        name: &body.name,
        hash: &hash,
        scopes,
        expires_at,
    };
    if !state.store.add_token(&new, ACTOR, now).await? {
        return Err(ApiError::conflict(
            "TOKEN_EXISTS",
            format!(
                "a token named {} exists; remove it first",
                validate::quote(&body.name)
            ),
        ));
    }
    let mut out = token_json(&TokenInfo {
        name: body.name,
        scopes,
        created_at: now,
        expires_at,
    });
    out["token"] = json!(secret.expose());
    Ok((StatusCode::CREATED, Json(out)))
}

/// `DELETE /v1/admin/tokens/{name}` → `204`; `404 TOKEN_NOT_FOUND`. The token stops working
/// on the next request.
#[utoipa::path(delete, path = "/v1/admin/tokens/{name}", tag = "admin", security(("admin" = [])), params(("name" = String, Path, description = "The token's name.")),
    responses((status = 204, description = "Removed; it stops working on the next request."),
        (status = 404, description = "`TOKEN_NOT_FOUND`: no token of that name.", body = schemas::ErrorBody)))]
pub(crate) async fn remove(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let removed = state
        .store
        .remove_token(&name, ACTOR, Timestamp::now())
        .await?;
    found(removed, || {
        ApiError::not_found(
            "TOKEN_NOT_FOUND",
            format!("no token named {}", validate::quote(&name)),
        )
    })?;
    Ok(StatusCode::NO_CONTENT)
}
