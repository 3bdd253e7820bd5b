//! `GET /v1/admin/audit?since=&kind=&limit=`: the audit log for administrators, oldest first.
//! The query is parsed by hand so every bad parameter is a clear `422 INVALID_INPUT`.

use axum::Json;
use axum::extract::{RawQuery, State};
use egressgate_store::Timestamp;
use egressgate_store::db::audit::AuditKind;
use serde_json::{Value, json};

use super::openapi::schemas;
use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::state::AppState;
use crate::validate::quote;

schemas::string_enum!(
    /// The `kind` filter's values: the store's audit kinds, in its spelling.
    AuditKindParam,
    "The `kind` filter's values, for the document.",
    AuditKind::ALL.map(|k| k.as_str())
);

/// Rows returned when `limit` is not given.
const DEFAULT_LIMIT: i64 = 100;
/// Most rows one request may ask for.
const MAX_LIMIT: i64 = 1000;

/// The parsed query.
#[derive(Debug, PartialEq, Eq)]
struct AuditQuery {
    since: Timestamp,
    kind: Option<AuditKind>,
    limit: i64,
}

fn parse_query(raw: Option<&str>) -> Result<AuditQuery, ApiError> {
    let mut q = AuditQuery {
        since: Timestamp::from_millis(0),
        kind: None,
        limit: DEFAULT_LIMIT,
    };
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if seen.iter().any(|k| *k == key) {
            return Err(ApiError::invalid_input(format!(
                "{} given twice",
                quote(&key)
            )));
        }
        seen.push(key.to_string());
        match key.as_ref() {
            "since" => {
                q.since = Timestamp::parse_rfc3339(&value).ok_or_else(|| {
                    ApiError::invalid_input(format!(
                        "since ({}): not an RFC 3339 time such as 2026-01-01T00:00:00Z",
                        quote(&value)
                    ))
                })?;
            }
            "kind" => {
                q.kind = Some(AuditKind::parse(&value).ok_or_else(|| {
                    let kinds: Vec<&str> = AuditKind::ALL.iter().map(|k| k.as_str()).collect();
                    ApiError::invalid_input(format!(
                        "kind ({}): not one of {}",
                        quote(&value),
                        kinds.join(", ")
                    ))
                })?);
            }
            "limit" => {
                q.limit = value
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid_input(format!(
                            "limit ({}): must be an integer from 1 to {MAX_LIMIT}",
                            quote(&value)
                        ))
                    })?;
            }
            other => {
                return Err(ApiError::invalid_input(format!(
                    "unknown query parameter {} (use since, kind, limit)",
                    quote(other)
                )));
            }
        }
    }
    Ok(q)
}

#[utoipa::path(get, path = "/v1/admin/audit", tag = "admin", security(("admin" = [])),
    params(("since" = Option<String>, Query, format = DateTime, description = "RFC 3339 time; rows at or after it."),
        ("kind" = Option<AuditKindParam>, Query, description = "One audit kind."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 1000, description = "Most rows (default 100).")),
    responses((status = 200, description = "Audit rows, oldest first.", body = schemas::Audit),
        (status = 422, description = "`INVALID_INPUT`: a bad or unknown query parameter.", body = schemas::ErrorBody)))]
/// `GET /v1/admin/audit` → `{"audit": [{"id", "at", "kind", "actor", "chat_id"?, "interrupt_id"?, "detail"}]}`.
pub(crate) async fn list(
    _auth: AdminAuth,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let q = parse_query(raw.as_deref())?;
    let rows = state.store.list_audit(q.since, q.kind, q.limit).await?;
    Ok(Json(json!({"audit": rows})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_kinds_are_the_stored_kinds() {
        let doc = crate::routes::openapi::document();
        let listed: Vec<&str> = doc["components"]["schemas"]["AuditKindParam"]["enum"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let stored: Vec<&str> = AuditKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(listed, stored);
    }

    #[test]
    fn defaults_and_bounds() {
        let q = parse_query(None).ok();
        assert_eq!(
            q,
            Some(AuditQuery {
                since: Timestamp::from_millis(0),
                kind: None,
                limit: 100
            })
        );
        let q = parse_query(Some(
            "kind=admin_change&limit=1000&since=2023-11-14T22:13:20.123Z",
        ))
        .ok();
        assert_eq!(
            q,
            Some(AuditQuery {
                since: Timestamp::from_millis(1_700_000_000_123),
                kind: Some(AuditKind::AdminChange),
                limit: 1000
            })
        );
        for bad in [
            "limit=0",
            "limit=1001",
            "limit=x",
            "kind=nope",
            "since=yesterday",
            "foo=1",
            "limit=1&limit=2",
        ] {
            assert!(parse_query(Some(bad)).is_err(), "{bad}");
        }
    }
}
