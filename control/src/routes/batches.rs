//! `POST /v1/batches/decide`: the batch rule ([`crate::batch`]) over HTTP, for runtimes that
//! enforce it in a hook before a batch of tool calls runs.

use axum::Json;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::schemas;
use crate::auth::ApprovalsAuth;
use crate::batch::{self, ToolUse};
use crate::body::StrictJson;
use crate::error::ApiError;
use crate::validate::quote;

/// The request body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    tool_uses: Vec<ToolUse>,
    /// The approval tool's name.
    #[schema(min_length = 1)]
    approval_tool: String,
}

/// → `200 {"cancel": {toolUseId: text}}`.
#[utoipa::path(post, path = "/v1/batches/decide", tag = "approval", security(("runtime" = [])), request_body = DecideBody,
    responses(
        (status = 200, description = "The tool uses to cancel (all approval-tool calls but the first), with their result text.", body = schemas::BatchAnswer),
        (status = 422, description = "`INVALID_INPUT`: an empty `approval_tool` or a repeated `toolUseId`.", body = schemas::ErrorBody),
    ))]
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
