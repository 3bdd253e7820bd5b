//! Administration: the pre-approved site and package lists (a user's settings are in
//! [`super::users`]). Values are validated and stored canonically, so `Example.COM.` and
//! `example.com` are one entry and a pattern that would open a whole public suffix never
//! reaches the proxy.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use egressgate_store::db::admin::{AdminEntry, AdminList, SiteRules};
use egressgate_store::{Access, PackageSpec, SitePattern, Timestamp};
use serde::Deserialize;
use serde_json::{Value, json};

use super::listing;
use super::openapi::schemas;
use super::openapi::shared::errors;
use crate::auth::AdminAuth;
use crate::body::StrictJson;
use crate::error::{ApiError, found};
use crate::state::AppState;
use crate::validate;

/// Who the audit log names for changes made with the admin token.
pub(crate) const ACTOR: &str = "admin";

/// `POST /v1/admin/sites` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SiteBody {
    pattern: String,
    #[serde(default)]
    note: Option<String>,
    /// The proxy terminates TLS for matching hosts and sees each request (default `false`).
    #[serde(default)]
    inspect: bool,
    /// `full` (default) or `read` (downloads only; needs inspection).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    access: Option<String>,
}

/// `POST /v1/admin/packages` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PackageBody {
    name: String,
    #[serde(default)]
    note: Option<String>,
}

/// The JSON key naming an entry's value in each list.
fn key_name(list: AdminList) -> &'static str {
    match list {
        AdminList::Sites => "pattern",
        AdminList::Packages => "name",
    }
}

fn entry_json(list: AdminList, e: &AdminEntry) -> Value {
    let mut v = json!({key_name(list): e.value, "note": e.note, "created_at": e.created_at});
    if list == AdminList::Sites {
        v["inspect"] = e.rules.inspect.into();
        v["access"] = e.rules.access.as_str().into();
    }
    v
}

/// A site entry's rules, checked: `read` is only enforceable where the proxy sees each
/// request, so it needs the entry itself to be inspected or a deployment-wide `--inspect`
/// pattern that covers every host the entry matches.
fn site_rules(
    state: &AppState,
    pattern: &SitePattern,
    inspect: bool,
    access: Option<&str>,
) -> Result<SiteRules, ApiError> {
    let access = match access {
        None => Access::Full,
        Some(a) => Access::parse(a).ok_or_else(|| {
            ApiError::invalid_input(format!(
                "access: expected \"full\" or \"read\", got {}",
                validate::quote(a)
            ))
        })?,
    };
    let inspected = inspect || state.settings.inspect.iter().any(|i| i.covers(pattern));
    if access == Access::Read && !inspected {
        return Err(ApiError::invalid_input(format!(
            "access: \"read\" cannot be enforced for {}: the proxy only sees the requests of \
             inspected hosts; add \"inspect\": true (or start the proxy with --inspect for it)",
            validate::quote(&pattern.to_key())
        )));
    }
    Ok(SiteRules { inspect, access })
}

errors!(
    /// What [`add`] answers when the entry vanished between its two statements.
    RemovedConcurrently: "409" => "`CONFLICT`: removed concurrently.",
);

errors!(
    /// What [`remove`] answers for a value that is not on the list.
    NotOnList: "404" => "`NOT_FOUND`: not on the list.",
);

async fn list(state: &AppState, list: AdminList, plural: &str) -> Result<Json<Value>, ApiError> {
    let entries = state.store.admin_list(list).await?;
    Ok(listing(plural, &entries, |e| entry_json(list, e)))
}

/// Adds `value`; `201` with the new entry, or `200` with the entry already there (its
/// original note and time: adding again changes nothing).
async fn add(
    state: &AppState,
    list: AdminList,
    value: &str,
    note: Option<String>,
    rules: SiteRules,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let note = validate::note(note)?;
    let added = state
        .store
        .admin_add(list, value, note.as_deref(), rules, ACTOR, Timestamp::now())
        .await?;
    let entries = state.store.admin_list(list).await?;
    let entry = entries.iter().find(|e| e.value == value).ok_or_else(|| {
        // Removed concurrently between the two statements: report it as the conflict it is.
        ApiError::conflict("CONFLICT", "the entry was removed concurrently")
    })?;
    let status = if added {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(entry_json(list, entry))))
}

async fn remove(state: &AppState, list: AdminList, value: &str) -> Result<StatusCode, ApiError> {
    let removed = state
        .store
        .admin_remove(list, value, ACTOR, Timestamp::now())
        .await?;
    found(removed, || {
        ApiError::not_found(
            "NOT_FOUND",
            format!("{} is not on the list", validate::quote(value)),
        )
    })?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/admin/sites` → `{"sites": [{"pattern", "note", "created_at"}]}`.
#[utoipa::path(get, path = "/v1/admin/sites", tag = "admin", security(("admin" = [])), responses((status = 200, description = "The pre-approved sites.", body = schemas::AdminSites)))]
pub(crate) async fn list_sites(
    _auth: AdminAuth,
    State(state): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    list(&state, AdminList::Sites, "sites").await
}

/// `POST /v1/admin/sites`.
#[utoipa::path(post, path = "/v1/admin/sites", tag = "admin", security(("admin" = [])), request_body = SiteBody,
    responses((status = 201, description = "Added.", body = schemas::AdminSite), (status = 200, description = "Already there (unchanged).", body = schemas::AdminSite),
        RemovedConcurrently, (status = 422, description = "`INVALID_INPUT`: the value is malformed, an IP literal, internal-looking, a whole public suffix or a path-style multi-tenant host not opted in (`--allow-whole-host`); the note is too long; an unknown access level; or `access: \"read\"` for a site that is not inspected.", body = schemas::ErrorBody)))]
pub(crate) async fn add_site(
    _auth: AdminAuth,
    State(state): State<AppState>,
    StrictJson(body): StrictJson<SiteBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let pattern = validate::site_pattern("pattern", &body.pattern, &state.settings)?;
    let rules = site_rules(&state, &pattern, body.inspect, body.access.as_deref())?;
    add(
        &state,
        AdminList::Sites,
        &pattern.to_key(),
        body.note,
        rules,
    )
    .await
}

#[utoipa::path(delete, path = "/v1/admin/sites/{pattern}", tag = "admin", security(("admin" = [])), params(("pattern" = String, Path, description = "Any spelling of a stored pattern.")),
    responses((status = 204, description = "Removed."), NotOnList))]
/// `DELETE /v1/admin/sites/{pattern}`: the pattern is normalised like on add, so any spelling
/// of a stored entry removes it.
pub(crate) async fn remove_site(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(pattern): Path<String>,
) -> Result<StatusCode, ApiError> {
    let key = SitePattern::parse(&pattern, &state.settings.internal_suffixes)
        .map(|p| p.to_key())
        .unwrap_or(pattern);
    remove(&state, AdminList::Sites, &key).await
}

#[utoipa::path(get, path = "/v1/admin/packages", tag = "admin", security(("admin" = [])), responses((status = 200, description = "The pre-approved packages.", body = schemas::AdminPackages)))]
/// `GET /v1/admin/packages` → `{"packages": [{"name", "note", "created_at"}]}`.
pub(crate) async fn list_packages(
    _auth: AdminAuth,
    State(state): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    list(&state, AdminList::Packages, "packages").await
}

/// `POST /v1/admin/packages`.
#[utoipa::path(post, path = "/v1/admin/packages", tag = "admin", security(("admin" = [])), request_body = PackageBody,
    responses((status = 201, description = "Added.", body = schemas::AdminPackage), (status = 200, description = "Already there (unchanged).", body = schemas::AdminPackage),
        RemovedConcurrently, (status = 422, description = "`INVALID_INPUT`: the value is malformed, an IP literal, internal-looking, a whole public suffix or a path-style multi-tenant host not opted in (`--allow-whole-host`); or the note is too long.", body = schemas::ErrorBody)))]
pub(crate) async fn add_package(
    _auth: AdminAuth,
    State(state): State<AppState>,
    StrictJson(body): StrictJson<PackageBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let package = validate::package_spec("name", &body.name)?;
    add(
        &state,
        AdminList::Packages,
        package.as_str(),
        body.note,
        SiteRules::default(),
    )
    .await
}

/// `DELETE /v1/admin/packages/{name}`, normalised like on add.
#[utoipa::path(delete, path = "/v1/admin/packages/{name}", tag = "admin", security(("admin" = [])), params(("name" = String, Path, description = "Any spelling of a stored name.")),
    responses((status = 204, description = "Removed."), NotOnList))]
pub(crate) async fn remove_package(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let key = PackageSpec::parse(&name)
        .map(|p| p.as_str().to_owned())
        .unwrap_or(name);
    remove(&state, AdminList::Packages, &key).await
}
