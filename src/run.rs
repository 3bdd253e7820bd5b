//! Running the subcommands (all but `sandbox run`, which `main` starts before any runtime
//! exists), one module each: the servers, the CA, the admin lists, the stdio MCP server.

mod admin;
mod ca;
mod database;
mod endpoints;
mod janitor;
mod mcp;
mod migrate;
mod serve;
mod shutdown;
mod webhook_egress;

use anyhow::{Result, bail};

use crate::cli::{CaCmd, Command};
use crate::config::{self, Config, RawConfig};

/// Runs a non-sandbox subcommand to completion.
pub async fn run(command: Command) -> Result<()> {
    match command {
        Command::Serve(raw) => serve::run(raw, true, true).await,
        Command::Proxy(raw) => serve::run(raw, true, false).await,
        Command::Control(raw) => serve::run(raw, false, true).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Admin { list } => admin::run(list).await,
        Command::Ca {
            action: CaCmd::Print(raw),
        } => ca::print(raw).await,
        Command::Ca {
            action: CaCmd::Rotate { overlap, db },
        } => ca::rotate(db, &overlap).await,
        Command::Mcp(args) => mcp::run(args).await,
        Command::Sandbox { .. } => bail!("internal: sandbox is dispatched before the runtime"),
    }
}

/// The validated configuration of a subcommand's raw settings.
fn load(raw: RawConfig) -> Result<Config> {
    config::validate(&config::merge(raw)?)
}

/// Installs the log subscriber, writing through [`crate::logwriter`] (a worker's lines are
/// written together when it goes idle).
fn init_logging(format: config::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EGRESSGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,hyper=warn"));
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::logwriter::Stderr);
    let _ = match format {
        config::LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        config::LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}
