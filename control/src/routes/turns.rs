//! Turns: opening one per user message (the proxy credential, launch-time grants) and reading
//! back what its sandbox did — refusals, allowed traffic — and what it may reach (policy).

use std::collections::BTreeSet;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use egressgate_store::db::turns::{Launch, NewTurn, OpenTurnError};
use egressgate_store::{Access, PackageSpec, Secret, SitePattern, Timestamp, TurnId};
use serde::Deserialize;

use super::openapi::schemas;
use super::openapi::shared::{TurnExpired, TurnNotFound, TurnParams};
use crate::auth::{TurnsAuth, USER_HEADER};
use crate::body::StrictJson;
use crate::error::ApiError;
use crate::grants::Grants;
use crate::state::AppState;
use crate::turn_access::{PathTurn, PolicyTurn};
use crate::validate;

/// Longest credential lifetime a caller may ask for: a turn is one agent run, not a session.
const MAX_TTL_SECONDS: i64 = 7 * 24 * 3600;
/// Most entries in one launch list; launch grants are for a handful of known sources.
const MAX_LAUNCH_ENTRIES: usize = 200;

/// `POST /v1/turns` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenTurnBody {
    /// The person (1 to 200 bytes, no control characters).
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    user_id: String,
    /// The chat (1 to 200 bytes, no control characters).
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    chat_id: String,
    can_ask_human: bool,
    /// Patterns (`full`), or `{"pattern", "access"}` objects (`access` `full` or `read`; `read`
    /// only for inspected hosts).
    #[serde(default)]
    sites: Option<Vec<LaunchSite>>,
    #[serde(default)]
    packages: Option<Vec<String>>,
    /// Credential lifetime; default `turn-ttl`.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 604800)]
    ttl_seconds: Option<i64>,
}

/// One launch-time site: a bare pattern, or a pattern with its access level.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum LaunchSite {
    /// `"files.example.com"`: `full`.
    Pattern(String),
    /// `{"pattern": "git.example.com", "access": "read"}`.
    Rule(LaunchRule),
}

/// The object form of [`LaunchSite`].
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LaunchRule {
    pattern: String,
    #[serde(default)]
    access: Option<String>,
}

/// Splits validated launch sites into `full` and `read` ones; `read` needs the proxy to
/// inspect every host the pattern matches (the same rule as for admin sites).
async fn launch_sites(
    state: &AppState,
    raw: &[LaunchSite],
) -> Result<(Vec<SitePattern>, Vec<SitePattern>), ApiError> {
    let (mut full, mut read) = (Vec::new(), Vec::new());
    let inspected = crate::grants::inspected_patterns(state).await?;
    for (i, entry) in raw.iter().enumerate() {
        let field = format!("sites[{i}]");
        let (text, access) = match entry {
            LaunchSite::Pattern(p) => (p, None),
            LaunchSite::Rule(r) => (&r.pattern, r.access.as_deref()),
        };
        let pattern = validate::site_pattern(&field, text, &state.settings)?;
        match access.map(|a| (a, Access::parse(a))) {
            None | Some((_, Some(Access::Full))) => full.push(pattern),
            Some((_, Some(Access::Read))) => {
                if !inspected.iter().any(|p| p.covers(&pattern)) {
                    return Err(ApiError::invalid_input(format!(
                        "{field}: access \"read\" cannot be enforced for {}: the proxy does \
                         not inspect it (an admin site with \"inspect\": true or --inspect)",
                        validate::quote(&pattern.to_key())
                    )));
                }
                read.push(pattern);
            }
            Some((a, None)) => {
                return Err(ApiError::invalid_input(format!(
                    "{field}.access: expected \"full\" or \"read\", got {}",
                    validate::quote(a)
                )));
            }
        }
    }
    for list in [&mut full, &mut read] {
        // Sorted by canonical text, as every list the API shows is.
        list.sort_by_key(SitePattern::to_key);
        list.dedup();
    }
    // A pattern given both ways opens the host fully.
    read.retain(|p| !full.contains(p));
    Ok((full, read))
}

/// Validates the body into a [`NewTurn`]; nothing is written when any entry is refused.
async fn new_turn(state: &AppState, body: OpenTurnBody) -> Result<NewTurn, ApiError> {
    let user = validate::user_id("user_id", &body.user_id)?;
    let chat = validate::chat_id("chat_id", &body.chat_id)?;
    let raw_sites = body.sites.unwrap_or_default();
    let raw_packages = body.packages.unwrap_or_default();
    if raw_sites.len() > MAX_LAUNCH_ENTRIES || raw_packages.len() > MAX_LAUNCH_ENTRIES {
        return Err(ApiError::invalid_input(format!(
            "launch lists hold at most {MAX_LAUNCH_ENTRIES} entries each"
        )));
    }
    let (sites, read_sites) = launch_sites(state, &raw_sites).await?;
    let packages: BTreeSet<PackageSpec> = raw_packages
        .iter()
        .enumerate()
        .map(|(i, p)| validate::package_spec(&format!("packages[{i}]"), p))
        .collect::<Result<_, _>>()?;
    let ttl = match body.ttl_seconds {
        None => state.settings.turn_ttl,
        Some(s) if (1..=MAX_TTL_SECONDS).contains(&s) => Duration::from_secs(s.unsigned_abs()),
        Some(_) => {
            return Err(ApiError::invalid_input(format!(
                "ttl_seconds must be between 1 and {MAX_TTL_SECONDS}"
            )));
        }
    };
    Ok(NewTurn {
        user,
        chat,
        launch: Launch {
            can_ask_human: body.can_ask_human,
            sites,
            read_sites,
            packages: packages.into_iter().collect(),
        },
        ttl,
    })
}

/// `http://TURN_ID:SECRET@host:port`. The configured public address is `host:port`; a scheme
/// given with it (`https://` for a TLS listener) is kept.
fn proxy_url(public: &str, turn: &TurnId, secret: &Secret) -> String {
    let (scheme, rest) = public.split_once("://").unwrap_or(("http", public));
    let rest = rest.trim_end_matches('/');
    format!("{scheme}://{turn}:{}@{rest}", secret.expose())
}

/// `POST /v1/turns` → `201 {"turn_id", "proxy_url", "expires_at"}`.
#[utoipa::path(post, path = "/v1/turns", tag = "turns", security(("runtime" = [])), request_body = OpenTurnBody,
    params(("X-Egressgate-User" = Option<String>, Header, description = "When sent, must name `user_id`.")),
    responses(
        (status = 201, description = "The turn, with the sandbox's proxy credential in `proxy_url`.", body = schemas::TurnOpened),
        (status = 410, description = "`CHAT_HIDDEN`: the chat was hidden; it takes no new turns.", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: a bad id, launch-time site (a path-style multi-tenant host not opted in included) or package, or ttl.", body = schemas::ErrorBody),
    ))]
pub(crate) async fn open(
    _auth: TurnsAuth,
    State(state): State<AppState>,
    headers: HeaderMap,
    StrictJson(body): StrictJson<OpenTurnBody>,
) -> Result<(StatusCode, Json<schemas::TurnOpened>), ApiError> {
    let new = new_turn(&state, body).await?;
    if let Some(named) = headers.get(USER_HEADER)
        && named.to_str().ok() != Some(new.user.as_str())
    {
        return Err(ApiError::invalid_input(
            "X-Egressgate-User names another user than user_id",
        ));
    }
    let secret = Secret::generate();
    let turn = state
        .store
        .open_turn(&new, &secret.hash(), Timestamp::now())
        .await
        .map_err(|e| match e {
            OpenTurnError::ChatHidden => {
                ApiError::gone("CHAT_HIDDEN", "this chat was hidden; it takes no new turns")
            }
            OpenTurnError::Store(e) => e.into(),
        })?;
    let body = schemas::TurnOpened {
        proxy_url: proxy_url(&state.settings.proxy_public_url, &turn.id, &secret),
        turn_id: turn.id,
        expires_at: turn.expires_at,
    };
    Ok((StatusCode::CREATED, Json(body)))
}

/// `GET /v1/turns/{turn_id}/refusals`.
#[utoipa::path(get, path = "/v1/turns/{turn_id}/refusals", tag = "turns", security(("runtime" = [])), params(TurnParams),
    responses((status = 200, description = "What the proxy refused this turn, recorded before each `403`.", body = schemas::Refusals), TurnNotFound, TurnExpired))]
pub(crate) async fn refusals(
    State(state): State<AppState>,
    PathTurn(turn): PathTurn,
) -> Result<Json<schemas::Refusals>, ApiError> {
    let (refusals, overflow) = state.store.list_refusals(&turn.id).await?;
    Ok(Json(schemas::Refusals {
        turn_id: turn.id,
        refusals,
        overflow,
    }))
}

/// `GET /v1/turns/{turn_id}/egress`: allowed traffic per host.
#[utoipa::path(get, path = "/v1/turns/{turn_id}/egress", tag = "turns", security(("runtime" = [])), params(TurnParams),
    responses((status = 200, description = "Allowed traffic per host.", body = schemas::Egress), TurnNotFound, TurnExpired))]
pub(crate) async fn egress(
    State(state): State<AppState>,
    PathTurn(turn): PathTurn,
) -> Result<Json<schemas::Egress>, ApiError> {
    let egress = state.store.list_egress(&turn.id).await?;
    Ok(Json(schemas::Egress {
        turn_id: turn.id,
        egress,
    }))
}

#[utoipa::path(get, path = "/v1/turns/{turn_id}/policy", tag = "turns", security(("runtime" = []), ("turn_credential" = [])), params(TurnParams),
    responses((status = 200, description = "The effective allowed sites and packages.", body = schemas::Policy), TurnNotFound, TurnExpired))]
/// `GET /v1/turns/{turn_id}/policy`: the effective allowed sites and packages a package
/// installer in the sandbox enforces.
pub(crate) async fn policy(
    State(state): State<AppState>,
    PolicyTurn(turn): PolicyTurn,
) -> Result<Json<schemas::Policy>, ApiError> {
    let grants = Grants::load(&state.store, &turn, Timestamp::now()).await?;
    Ok(Json(schemas::Policy {
        sites: grants.site_keys(),
        packages: grants.package_names(),
        turn_id: turn.id,
        expires_at: turn.expires_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_url_carries_the_credential() {
        let t = TurnId::generate();
        let s = Secret::from_presented("sec");
        assert_eq!(
            proxy_url("127.0.0.1:3128", &t, &s),
            format!("http://{t}:sec@127.0.0.1:3128")
        );
        assert_eq!(
            proxy_url("https://gate.example.com:3129/", &t, &s),
            format!("https://{t}:sec@gate.example.com:3129")
        );
    }
}
