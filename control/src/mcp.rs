//! The agent's side over MCP: the tools `egress_refusals` and `request_egress_approval`,
//! served over stdio by `egressgate mcp` (one turn, fixed at start) and over streamable HTTP
//! at `/mcp` on the control listener (runtime token, turn in `X-Egressgate-Turn`). The tools
//! call the REST handlers, in process or over HTTP, so there is one approval logic.

pub mod backend;
mod flow;
mod server;
pub mod state;

use std::sync::Arc;

use axum::extract::{FromRequestParts as _, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};

pub use server::{APPROVAL_TOOL, Binding, EgressTools, REFUSALS_TOOL, tools};
pub use state::StateKeys;

use crate::auth::{ApprovalsAuth, TurnsAuth};
use crate::error::ApiError;
use crate::state::AppState;

/// The header naming the turn on `/mcp`.
pub const TURN_HEADER: &str = "x-egressgate-turn";

/// Runs the server over stdin/stdout until the client closes it. Nothing but JSON-RPC is
/// written to stdout; logs go to stderr.
pub async fn serve_stdio(
    backend: backend::Backend,
    turn: String,
    keys: StateKeys,
    public_url: String,
) -> Result<(), String> {
    let tools = EgressTools::new(Binding::Fixed { backend, turn }, Arc::new(keys), public_url);
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("MCP stdio: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("MCP stdio: {e}"))
}

/// `Host` values `/mcp` accepts: the public URL's host and loopback names (rmcp refuses
/// every other host, against DNS rebinding).
fn allowed_hosts(public_url: &str) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .iter()
        .map(|h| (*h).to_owned())
        .collect();
    if let Some(h) = url::Url::parse(public_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
    {
        hosts.push(h);
    }
    hosts
}

/// `/mcp` for the API router `api` (which it calls in process), behind the runtime token
/// and the turn header.
pub(crate) fn router(state: AppState, api: axum::Router) -> axum::Router {
    let keys = Arc::new(match &state.settings.mcp_state_key {
        Some(k) => StateKeys::new(k.0.clone()).unwrap_or_else(|e| {
            tracing::error!(error = %e, "unusable MCP state key; using a per-process key");
            StateKeys::random()
        }),
        None => StateKeys::random(),
    });
    let public = state.settings.control_public_url.clone();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(&public))
        .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
    let service = StreamableHttpService::new(
        move || {
            Ok(EgressTools::new(
                Binding::per_session(api.clone()),
                keys.clone(),
                public.clone(),
            ))
        },
        LocalSessionManager::default().into(),
        config,
    );
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(state, guard))
}

/// A token holding both scopes the tools need (`turns` for the refusals, `approvals` for the
/// approval tool), and a well-formed turn header, before anything reaches rmcp.
async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    if let Err(e) = TurnsAuth::from_request_parts(&mut parts, &state).await {
        return e.into_response();
    }
    if let Err(e) = ApprovalsAuth::from_request_parts(&mut parts, &state).await {
        return e.into_response();
    }
    let turn_ok = parts
        .headers
        .get(TURN_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(egressgate_store::TurnId::parse)
        .is_some();
    if !turn_ok {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "MISSING_TURN",
            "/mcp needs the X-Egressgate-Turn header naming the turn",
        )
        .into_response();
    }
    next.run(Request::from_parts(parts, body)).await
}
