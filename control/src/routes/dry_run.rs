//! `GET /v1/admin/dry-run?pattern=…|package=…&days=…`: before an administrator saves a
//! pre-approved site or package, what would it have allowed in the last N days? A pattern is
//! validated exactly as saving it would be and matched against recent refusals with the
//! proxy's own pattern code (never SQL `LIKE`); a package is canonicalised like the list does
//! and matched against the proxy's refusals of it and the cards that asked for it, whatever
//! version or pin (the approval tool drops pre-approved packages, so those requests would
//! not have needed a person for it).

use axum::Json;
use axum::extract::{Query, State};
use egressgate_store::db::audit::{AuditKind, AuditRecord};
use egressgate_store::db::refusals::RecentRefusal;
use egressgate_store::{Host, PackageSpec, RefusalReason, Timestamp};

use super::openapi::schemas;
use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::state::AppState;
use crate::validate;

/// Most rows one dry run reads.
const SCAN_LIMIT: i64 = 10_000;
/// Longest look-back, in days.
const MAX_DAYS: u32 = 90;

/// The query: exactly one of `pattern` and `package`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DryRunQuery {
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    days: Option<u32>,
}

/// A card that asked for the package.
#[derive(serde::Serialize)]
pub(crate) struct AskedCard {
    interrupt_id: Option<String>,
    user_id: Option<String>,
    chat_id: Option<String>,
    at: Timestamp,
}

/// The answer, newest first; nothing is saved.
#[derive(serde::Serialize)]
pub(crate) struct DryRun {
    /// The pattern as it would be stored (pattern runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<String>,
    /// The package as it would be stored (package runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    /// Look-back used.
    days: u32,
    /// Approvable refusals the pattern matches, or the package's `package_not_approved`
    /// refusals (any version).
    would_allow: Vec<RecentRefusal>,
    /// Distinct hosts among them.
    hosts: Vec<String>,
    /// Cards that asked for the package.
    cards: Vec<AskedCard>,
    /// Whether the scan hit its row limit (older matches may exist).
    truncated: bool,
}

fn bad_query(e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_input(format!("bad query: {e}"))
}

/// `GET /v1/admin/dry-run`.
#[utoipa::path(get, path = "/v1/admin/dry-run", tag = "admin", security(("admin" = [])),
    params(("pattern" = Option<String>, Query, description = "A site pattern to try (exactly one of pattern and package)."),
        ("package" = Option<String>, Query, description = "A package to try."),
        ("days" = Option<u32>, Query, description = "Look-back in days (1 to 90, default 7).")),
    responses((status = 200, description = "What the entry would have allowed in the look-back: `would_allow` refusals and their `hosts` (patterns), `cards` that asked (packages), `truncated`. Nothing is saved.", body = schemas::DryRun),
        (status = 422, description = "`INVALID_INPUT`: neither or both of pattern and package, a pattern or package that could not be stored, or days out of range.", body = schemas::ErrorBody)))]
pub(crate) async fn dry_run(
    _: AdminAuth,
    State(state): State<AppState>,
    query: Result<Query<DryRunQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DryRun>, ApiError> {
    let Query(q) = query.map_err(bad_query)?;
    let days = q.days.unwrap_or(7);
    if days == 0 || days > MAX_DAYS {
        return Err(ApiError::invalid_input(format!(
            "days must be 1 to {MAX_DAYS}"
        )));
    }
    let now = Timestamp::now();
    let since = Timestamp::from_millis(now.millis() - i64::from(days) * 86_400_000);
    match (q.pattern, q.package) {
        (Some(p), None) => by_pattern(&state, &p, days, since).await,
        (None, Some(p)) => by_package(&state, &p, days, since).await,
        _ => Err(ApiError::invalid_input(
            "name exactly one of pattern and package",
        )),
    }
}

async fn by_pattern(
    state: &AppState,
    raw: &str,
    days: u32,
    since: Timestamp,
) -> Result<Json<DryRun>, ApiError> {
    let pattern = validate::site_pattern("pattern", raw, &state.settings)?;
    let rows = state.store.recent_refusals(since, SCAN_LIMIT).await?;
    let truncated = rows.len() as i64 >= SCAN_LIMIT;
    let would_allow: Vec<RecentRefusal> = rows
        .into_iter()
        .filter(|r| r.row.reason.approvable())
        .filter(|r| Host::parse(&r.row.host).is_ok_and(|h| pattern.matches(&h)))
        .collect();
    let mut hosts: Vec<String> = would_allow.iter().map(|r| r.row.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    Ok(Json(DryRun {
        pattern: Some(pattern.to_key()),
        package: None,
        days,
        would_allow,
        hosts,
        cards: Vec::new(),
        truncated,
    }))
}

/// Whether a registered card listed the package, pinned or not.
fn asked_for(record: &AuditRecord, package: &str) -> bool {
    record.detail["packages"].as_array().is_some_and(|ps| {
        ps.iter()
            .filter_map(|p| p.as_str())
            .any(|p| PackageSpec::parse(p).is_ok_and(|spec| spec.package().as_str() == package))
    })
}

async fn by_package(
    state: &AppState,
    raw: &str,
    days: u32,
    since: Timestamp,
) -> Result<Json<DryRun>, ApiError> {
    let package = validate::package("package", raw)?;
    // Registered cards are audited with their packages, and audit rows outlive the cards.
    let rows = state
        .store
        .list_audit(since, Some(AuditKind::ApprovalRequested), SCAN_LIMIT)
        .await?;
    let truncated = rows.len() as i64 >= SCAN_LIMIT;
    let mut cards: Vec<AskedCard> = rows
        .iter()
        .filter(|r| asked_for(r, package.as_str()))
        .map(|r| AskedCard {
            interrupt_id: r.interrupt_id.clone(),
            user_id: r.user_id.clone(),
            chat_id: r.chat_id.clone(),
            at: r.at,
        })
        .collect();
    cards.reverse();
    let refusals = state.store.recent_refusals(since, SCAN_LIMIT).await?;
    let truncated = truncated || refusals.len() as i64 >= SCAN_LIMIT;
    let would_allow: Vec<RecentRefusal> = refusals
        .into_iter()
        .filter(|r| {
            r.row.reason == RefusalReason::PackageNotApproved
                && r.row.package.as_deref() == Some(package.as_str())
        })
        .collect();
    let mut hosts: Vec<String> = would_allow.iter().map(|r| r.row.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    Ok(Json(DryRun {
        pattern: None,
        package: Some(package.as_str().to_owned()),
        days,
        would_allow,
        hosts,
        cards,
        truncated,
    }))
}
