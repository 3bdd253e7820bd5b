//! The command line: subcommands and the settings every server subcommand shares. Each
//! setting is a long flag with an `EGRESSGATE_*` environment twin (clap merges the two, flags
//! first); the config file fills what neither set (see `config`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory as _, Parser, Subcommand};

pub use crate::config::RawConfig;

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
    /// Apply database migrations and exit.
    Migrate(RawConfig),
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

/// `admin sites|packages`.
#[derive(Subcommand, Debug)]
pub enum AdminListCmd {
    /// Pre-approved site patterns (`host` or `*.suffix`).
    Sites {
        /// Operation.
        #[command(subcommand)]
        op: AdminOp,
    },
    /// Pre-approved packages (`name`, `pip:name`, `npm:name`).
    Packages {
        /// Operation.
        #[command(subcommand)]
        op: AdminOp,
    },
    /// Named API tokens with scopes (`turns`, `approvals`, `cards:read`, `chats`, `admin`).
    Tokens {
        /// Operation.
        #[command(subcommand)]
        op: TokenOp,
    },
}

/// `admin tokens add|list|remove`.
#[derive(Subcommand, Debug)]
pub enum TokenOp {
    /// Add a token; its secret is printed once on stdout (only its SHA-256 is kept).
    Add {
        /// The token's name.
        name: String,
        /// A scope it holds (repeatable).
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        /// Lifetime (`30d`, `12h`); without it the token does not expire.
        #[arg(long)]
        ttl: Option<String>,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// List tokens (names, scopes, expiry; never secrets).
    List {
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// Remove a token; it stops working on the next request.
    Remove {
        /// The token's name.
        name: String,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
}

/// `add|list|remove`.
#[derive(Subcommand, Debug)]
pub enum AdminOp {
    /// Add an entry.
    Add {
        /// The pattern or package name.
        value: String,
        /// Why it is pre-approved.
        #[arg(long)]
        note: Option<String>,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// List entries.
    List {
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// Remove an entry.
    Remove {
        /// The pattern or package name.
        value: String,
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

/// `sandbox run`.
#[derive(Subcommand, Debug)]
pub enum SandboxCmd {
    /// Run CMD with the proxy as its only route out.
    Run {
        /// The turn's proxy URL (`http://TURN_ID:SECRET@host:port`). Every local user can
        /// read a command line: prefer --proxy-url-file or EGRESSGATE_PROXY_URL. Given here,
        /// the launcher re-executes itself at once with the URL moved into its environment.
        #[arg(long, conflicts_with = "proxy_url_file")]
        proxy_url: Option<String>,
        /// A file whose first line is the turn's proxy URL.
        #[arg(long)]
        proxy_url_file: Option<PathBuf>,
        /// Capture connections that ignore the proxy settings: on (default), off, or auto
        /// (off, with one line on stderr, where this machine cannot capture).
        #[arg(long, default_value = "on")]
        capture: egressgate_sandbox::Capture,
        /// Only set the proxy variables (no network namespace).
        #[arg(long)]
        no_isolate: bool,
        /// The deployment CA (PEM) the command should trust, for inspected hosts: it gets a
        /// bundle of the system roots plus this CA.
        #[arg(long, conflicts_with = "control_url")]
        ca_file: Option<PathBuf>,
        /// The control plane (`http://HOST:PORT`) to fetch the deployment CA from
        /// (`GET /v1/ca.pem`), instead of --ca-file.
        #[arg(long, env = "EGRESSGATE_CONTROL_URL")]
        control_url: Option<String>,
        /// Run the command as this user (a name or a uid). A root launcher defaults to
        /// `nobody`, so the command is never host root unless `--as-user root` says so; an
        /// unprivileged launcher runs it as itself.
        #[arg(long, value_name = "USER|UID")]
        as_user: Option<String>,
        /// The gate's data directory: the launcher refuses to start when the command's user
        /// could reach it (also checked: EGRESSGATE_DATA_DIR and ./egressgate-data).
        #[arg(long, value_name = "DIR")]
        gate_data_dir: Vec<PathBuf>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
}

/// Settings only a database needs: what `migrate` and `admin` show in `--help`.
const DB_KEYS: &[&str] = &[
    "config",
    "data_dir",
    "database_url",
    "db_max_connections",
    "db_statement_timeout",
    "internal_suffix",
];

/// Settings only the control plane reads: hidden from `proxy --help`.
const CONTROL_ONLY: &[&str] = &[
    "control_listen",
    "proxy_public_url",
    "turn_ttl",
    "interrupt_ttl",
    "interrupt_retention",
    "snapshot_retention",
    "snapshot_max_bytes",
    "item_max_bytes",
    "lease",
    "resume_deadline",
    "claim_cap",
    "approval_ttl",
    "resume_slots_per_user",
    "default_can_approve",
    "card_max_sites",
    "card_max_urls",
    "card_max_packages",
    "resume_failures_per_client",
    "resume_failures_per_card",
    "resume_failure_window",
    "cors_origin",
    "control_public_url",
    "mcp_state_key",
];

/// Settings only the proxy reads: hidden from `control --help`.
const PROXY_ONLY: &[&str] = &[
    "proxy_listen",
    "control_addr",
    "resolve",
    "registry",
    "registry_mirror",
    "dns_server",
    "allow_cidr",
    "allow_port",
    "tls_cert",
    "tls_key",
    "upstream_ca",
    "metrics_listen",
    "mode",
    "log_allowed",
    "require_sni",
    "max_refusals_per_turn",
    "header_read_timeout",
    "connect_timeout",
    "client_hello_timeout",
    "idle_timeout",
    "max_header_bytes",
    "max_connections",
    "max_connections_per_turn",
];

/// The command line with each subcommand's `--help` showing only the settings that
/// subcommand reads (all are still accepted, so one config file serves every process).
pub fn command() -> clap::Command {
    fn hide(cmd: clap::Command, keep: &dyn Fn(&str) -> bool) -> clap::Command {
        let cmd = cmd.mut_args(|a| {
            let id = a.get_id().as_str().to_owned();
            if keep(&id) { a } else { a.hide(true) }
        });
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        names
            .iter()
            .fold(cmd, |c, n| c.mut_subcommand(n, |sub| hide(sub, keep)))
    }
    let settings: Vec<String> = RawConfig::augment_args(clap::Command::new("settings"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_owned())
        .collect();
    let db_only = move |id: &str| !settings.iter().any(|s| s == id) || DB_KEYS.contains(&id);
    let not = |list: &'static [&'static str]| move |id: &str| !list.contains(&id);
    Cli::command()
        .mut_subcommand("migrate", |c| hide(c, &db_only))
        .mut_subcommand("admin", |c| hide(c, &db_only))
        .mut_subcommand("proxy", |c| hide(c, &not(CONTROL_ONLY)))
        .mut_subcommand("control", |c| hide(c, &not(PROXY_ONLY)))
}

/// Parses the command line, recording where each setting came from (flag or environment) so
/// errors name what the user wrote. A value clap rejects that came from the environment is
/// reported under its variable's name, not under a flag the user never passed.
pub fn parse() -> Cli {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => env_error(e).exit(),
    };
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let mut leaf = &matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    if let Some(raw) = cli.command.raw_config_mut() {
        for id in leaf.ids() {
            let id = id.as_str();
            let env = match leaf.value_source(id) {
                Some(ValueSource::CommandLine) => false,
                Some(ValueSource::EnvVariable) => true,
                _ => continue,
            };
            raw.sources.set_cli(&id.replace('_', "-"), env);
        }
    }
    cli
}

/// Rewords clap's "invalid value for '--flag'" when the value came from `EGRESSGATE_*`.
fn env_error(e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let flag = arg.split_whitespace().next().unwrap_or_default();
    let Some(key) = flag.strip_prefix("--") else {
        return e;
    };
    let on_argv = std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    let var = format!("EGRESSGATE_{}", key.replace('-', "_").to_ascii_uppercase());
    match std::env::var(&var) {
        Ok(value) if !on_argv => {
            let why = e
                .source_text()
                .map(|t| format!(": {t}"))
                .unwrap_or_default();
            clap::Error::raw(
                ErrorKind::InvalidValue,
                format!("{var}: invalid value {value:?}{why}\n"),
            )
        }
        _ => e,
    }
}

/// The source of a clap error, as text (clap keeps it behind `std::error::Error`).
trait SourceText {
    fn source_text(&self) -> Option<String>;
}

impl SourceText for clap::Error {
    fn source_text(&self) -> Option<String> {
        std::error::Error::source(self).map(ToString::to_string)
    }
}

impl Command {
    /// The settings of a server or database subcommand, if it has them.
    fn raw_config_mut(&mut self) -> Option<&mut RawConfig> {
        match self {
            Command::Serve(r) | Command::Proxy(r) | Command::Control(r) | Command::Migrate(r) => {
                Some(r)
            }
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
