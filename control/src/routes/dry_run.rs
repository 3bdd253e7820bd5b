//! `GET /v1/admin/dry-run?pattern=…&days=…`: before an administrator saves a pre-approved
//! site, which refusals of the last N days would it have allowed? The pattern is validated
//! exactly as saving it would be, and matched with the proxy's own pattern code.

use axum::Json;
use axum::extract::{Query, State};
use egressgate_store::Host;
use egressgate_store::Timestamp;
use egressgate_store::db::refusals::RecentRefusal;

use crate::AppState;
use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::validate;

/// Most refusal rows one dry run reads.
const SCAN_LIMIT: i64 = 10_000;
/// Longest look-back, in days.
const MAX_DAYS: u32 = 90;

/// The query.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DryRunQuery {
    pattern: String,
    #[serde(default)]
    days: Option<u32>,
}

/// The answer: the refusals the pattern would have allowed, newest first.
#[derive(serde::Serialize)]
pub(crate) struct DryRun {
    /// The pattern as it would be stored.
    pattern: String,
    /// Look-back used.
    days: u32,
    /// Approvable refusals it matches.
    would_allow: Vec<RecentRefusal>,
    /// Distinct hosts among them.
    hosts: Vec<String>,
    /// Whether the scan hit its row limit (older matches may exist).
    truncated: bool,
}

/// `GET /v1/admin/dry-run`.
pub(crate) async fn dry_run(
    _: AdminAuth,
    State(state): State<AppState>,
    query: Result<Query<DryRunQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DryRun>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid_input(format!("bad query: {e}")))?;
    let days = q.days.unwrap_or(7);
    if days == 0 || days > MAX_DAYS {
        return Err(ApiError::invalid_input(format!(
            "days must be 1 to {MAX_DAYS}"
        )));
    }
    let pattern = validate::site_pattern("pattern", &q.pattern, &state.settings.internal_suffixes)?;
    let now = Timestamp::now();
    let since = Timestamp::from_millis(now.millis() - i64::from(days) * 86_400_000);
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
        pattern: pattern.to_key(),
        days,
        would_allow,
        hosts,
        truncated,
    }))
}
