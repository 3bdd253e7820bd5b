//! `POST /v1/batches/decide`: the batch rule ([`crate::batch`]) over HTTP, for runtimes that
//! enforce it in a hook before a batch of tool calls runs.

use axum::Json;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::ApprovalsAuth;
use crate::batch::{self, ToolUse};
use crate::body::StrictJson;
use crate::error::ApiError;
use crate::validate::quote;

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    tool_uses: Vec<ToolUse>,
    approval_tool: String,
}

/// → `200 {"cancel": {toolUseId: text}}`.
pub(crate) async fn decide(
    _auth: ApprovalsAuth,
    StrictJson(body): StrictJson<DecideBody>,
) -> Result<Json<Value>, ApiError> {
    if body.approval_tool.is_empty() {
        return Err(ApiError::invalid_input(
            "approval_tool must name the approval tool",
        ));
    }
    let cancel = batch::decide(&body.tool_uses, &body.approval_tool).map_err(|id| {
        ApiError::invalid_input(format!("toolUseId {} appears more than once", quote(&id)))
    })?;
    Ok(Json(json!({"cancel": cancel})))
}
