//! The command line: subcommands and the settings every server subcommand shares. Each
//! setting is a long flag with an `EGRESSGATE_*` environment twin (clap merges the two, flags
//! first); the config file fills what neither set (see `config`, whose raw settings each
//! server subcommand embeds).

mod admin;
mod help;
mod parse;
mod sandbox;

use clap::{Args, Parser, Subcommand};

pub use admin::{AdminListCmd, AdminOp, TokenOp};
pub use parse::parse;
pub use sandbox::SandboxCmd;

use crate::config::RawConfig;

/// egressgate: an egress proxy that lets AI agents' scripts download only what a person approved.
#[derive(Parser, Debug)]
#[command(name = "egressgate", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Proxy and control plane in one process on one database (embedded SQLite by default).
    Serve(RawConfig),
    /// The proxy only (shares a PostgreSQL with control processes).
    Proxy(RawConfig),
    /// The control plane only (shares a PostgreSQL with proxy processes).
    Control(RawConfig),
    /// Apply the missing database migrations, say which, and exit.
    Migrate(MigrateArgs),
    /// Copy the embedded SQLite database to PATH while it serves (a consistent snapshot that
    /// opens on its own); for PostgreSQL, says to use `pg_dump`.
    Backup(BackupArgs),
    /// Keep the pre-approved site and package lists and the named API tokens.
    Admin {
        /// Which list and what to do.
        #[command(subcommand)]
        list: AdminListCmd,
    },
    /// The MCP server over stdio for one turn: the tools `egress_refusals` and
    /// `request_egress_approval`, calling the control API (runtime token from
    /// EGRESSGATE_RUNTIME_TOKEN). Only JSON-RPC is written to stdout.
    Mcp(McpArgs),
    /// The deployment CA that signs the leaves of inspected hosts.
    Ca {
        /// What to do with it.
        #[command(subcommand)]
        action: CaCmd,
    },
    /// Run a command whose only way out is the proxy.
    Sandbox {
        /// The sandbox action.
        #[command(subcommand)]
        action: SandboxCmd,
    },
}

/// `ca print|rotate`.
#[derive(Subcommand, Debug)]
pub enum CaCmd {
    /// Write the CA certificates clients should trust (PEM) to stdout: the signing CA, then
    /// any rotated-out one still within its overlap. Makes the CA first if there is none.
    Print(RawConfig),
    /// Start a new CA. Proxies mint under it within seconds; the old one stays in
    /// `GET /v1/ca.pem` and `ca print` until the overlap ends (said on stderr).
    Rotate {
        /// How long the old CA stays trusted (its leaves live 24h; clients need time to
        /// fetch the new bundle).
        #[arg(long, default_value = "48h")]
        overlap: String,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
}

/// `egressgate mcp` options.
#[derive(Args, Debug)]
pub struct McpArgs {
    /// The control API, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "EGRESSGATE_CONTROL_URL")]
    pub control_url: String,
    /// The turn this server acts for (fixed for its lifetime; never a tool argument).
    #[arg(long)]
    pub turn: String,
    /// Base URL of the card page links (default: --control-url).
    #[arg(long, env = "EGRESSGATE_CONTROL_PUBLIC_URL")]
    pub control_public_url: Option<String>,
    /// The requestState key (default: a random key for this process, which is enough
    /// since a stdio server answers only its own requests).
    #[arg(long, env = "EGRESSGATE_MCP_STATE_KEY", hide_env_values = true)]
    pub mcp_state_key: Option<String>,
}

impl Command {
    /// The settings of a server or database subcommand, if it has them.
    pub(super) fn raw_config_mut(&mut self) -> Option<&mut RawConfig> {
        match self {
            Command::Serve(r) | Command::Proxy(r) | Command::Control(r) => Some(r),
            Command::Migrate(m) => Some(&mut m.db),
            Command::Backup(b) => Some(&mut b.db),
            Command::Admin { list } => match list {
                AdminListCmd::Sites { op } | AdminListCmd::Packages { op } => match op {
                    AdminOp::Add { db, .. } | AdminOp::List { db } | AdminOp::Remove { db, .. } => {
                        Some(db)
                    }
                },
                AdminListCmd::Tokens { op } => match op {
                    TokenOp::Add { db, .. } | TokenOp::List { db } | TokenOp::Remove { db, .. } => {
                        Some(db)
                    }
                },
            },
            Command::Ca {
                action: CaCmd::Print(r) | CaCmd::Rotate { db: r, .. },
            } => Some(r),
            Command::Mcp(_) | Command::Sandbox { .. } => None,
        }
    }
}

/// `egressgate migrate`: what to do with the schema.
#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// List every version this binary knows, applied or pending, and apply nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub status: bool,
    /// Say what would be applied, and apply nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Database settings.
    #[command(flatten)]
    pub db: RawConfig,
}

/// `egressgate backup PATH`: where the copy goes.
#[derive(Args, Debug)]
pub struct BackupArgs {
    /// The new file (refused if it exists: a backup never replaces another).
    pub path: std::path::PathBuf,
    /// Database settings.
    #[command(flatten)]
    pub db: RawConfig,
}
