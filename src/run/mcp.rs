//! `egressgate mcp`: the stdio MCP server for one turn, calling the control API with the
//! runtime token.

use anyhow::{Result, anyhow, bail};

use super::init_logging;
use crate::cli::McpArgs;
use crate::config::{self, LogFormat};

/// `egressgate mcp`: the stdio MCP server for one turn.
pub(super) async fn run(args: McpArgs) -> Result<()> {
    init_logging(LogFormat::Text);
    let token = std::env::var("EGRESSGATE_RUNTIME_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            anyhow!("egressgate mcp needs EGRESSGATE_RUNTIME_TOKEN (the runtime API token)")
        })?;
    if egressgate_store::TurnId::parse(&args.turn).is_none() {
        bail!("--turn {:?}: not a turn id", args.turn);
    }
    let backend = egressgate_control::mcp::backend::Backend::http(&args.control_url, &token)
        .map_err(|e| anyhow!(e))?;
    let keys = match &args.mcp_state_key {
        Some(k) => {
            egressgate_control::mcp::StateKeys::new(config::mcp_state_key("--mcp-state-key", k)?.0)
                .map_err(|e| anyhow!("--mcp-state-key: {e}"))?
        }
        None => egressgate_control::mcp::StateKeys::random(),
    };
    let public = args
        .control_public_url
        .clone()
        .unwrap_or_else(|| args.control_url.clone());
    egressgate_control::mcp::serve_stdio(backend, args.turn, keys, public)
        .await
        .map_err(|e| anyhow!(e))
}
