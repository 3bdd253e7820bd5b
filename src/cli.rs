//! The command line: subcommands and the settings every server subcommand shares. Each
//! setting is a long flag with an `EGRESSGATE_*` environment twin (clap merges the two, flags
//! first); the config file fills what neither set (see `config`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgAction, Args, CommandFactory as _, Parser, Subcommand};
use serde::{Deserialize, Serialize};

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

/// Every setting, unset unless given. The same struct is read from flags and environment
/// (clap) and from the TOML file (serde), then merged: flags > environment > file > defaults.
#[derive(Args, Debug, Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RawConfig {
    /// Where each setting came from, so an error names what the user wrote (filled by `main`
    /// and `config::merge`, never parsed).
    #[arg(skip)]
    #[serde(skip)]
    pub sources: crate::config::Sources,
    /// TOML configuration file.
    #[arg(long, env = "EGRESSGATE_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Directory for the embedded database, blobs and generated tokens. [default: ./egressgate-data]
    #[arg(long, env = "EGRESSGATE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// `postgres://…` for the shared store (also `DATABASE_URL`), or `sqlite://…`. [default: embedded SQLite in the data directory]
    #[arg(long, env = "EGRESSGATE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Proxy listener address. [default: 127.0.0.1:3128]
    #[arg(long, env = "EGRESSGATE_PROXY_LISTEN")]
    pub proxy_listen: Option<String>,
    /// Control-plane listener address. [default: 127.0.0.1:8080]
    #[arg(long, env = "EGRESSGATE_CONTROL_LISTEN")]
    pub control_listen: Option<String>,
    /// `host:port` put into turns' proxy_url. [default: the proxy listener]
    #[arg(long, env = "EGRESSGATE_PROXY_PUBLIC_URL")]
    pub proxy_public_url: Option<String>,
    /// Static DNS entries `HOST=IP` (repeatable; env comma-separated).
    #[arg(long, env = "EGRESSGATE_RESOLVE", value_delimiter = ',')]
    #[serde(default)]
    pub resolve: Vec<String>,
    /// Upstream DNS servers `IP` or `IP:PORT` (repeatable). [default: /etc/resolv.conf]
    #[arg(long, env = "EGRESSGATE_DNS_SERVER", value_delimiter = ',')]
    #[serde(default)]
    pub dns_server: Vec<String>,
    /// The control plane's addresses `HOST:PORT`, never dialled by the proxy even inside
    /// `--allow-cidr` (repeatable; for a proxy-only process).
    #[arg(long, env = "EGRESSGATE_CONTROL_ADDR", value_delimiter = ',')]
    #[serde(default)]
    pub control_addr: Vec<String>,
    /// Reachable private ranges `CIDR` or `CIDR=PATTERN` (repeatable).
    #[arg(long, env = "EGRESSGATE_ALLOW_CIDR", value_delimiter = ',')]
    #[serde(default)]
    pub allow_cidr: Vec<String>,
    /// Ports a request may target (repeatable; replaces the default). [default: 80,443]
    #[arg(long, env = "EGRESSGATE_ALLOW_PORT", value_delimiter = ',')]
    #[serde(default)]
    pub allow_port: Vec<u16>,
    /// Extra internal-looking suffixes (repeatable).
    #[arg(long, env = "EGRESSGATE_INTERNAL_SUFFIX", value_delimiter = ',')]
    #[serde(default)]
    pub internal_suffix: Vec<String>,
    /// Package registries judged package by package: `pypi`, `npm` (repeatable). Their hosts
    /// need no site approval; each request needs its package approved.
    #[arg(long, env = "EGRESSGATE_REGISTRY", value_delimiter = ',')]
    #[serde(default)]
    pub registry: Vec<String>,
    /// A private mirror `ECOSYSTEM=HOST[,HOST…]`, judged like that registry (repeatable; in
    /// the environment, mirrors are separated by `;`).
    #[arg(long, env = "EGRESSGATE_REGISTRY_MIRROR", value_delimiter = ';')]
    #[serde(default)]
    pub registry_mirror: Vec<String>,
    /// PEM certificate chain for a TLS proxy listener.
    #[arg(long, env = "EGRESSGATE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for a TLS proxy listener.
    #[arg(long, env = "EGRESSGATE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Hosts whose TLS the proxy inspects, deployment-wide: `host` or `*.suffix` (repeatable).
    /// Their clients must trust the deployment CA (`egressgate ca print`, `GET /v1/ca.pem`).
    #[arg(long, env = "EGRESSGATE_INSPECT", value_delimiter = ',')]
    #[serde(default)]
    pub inspect: Vec<String>,
    /// PEM CA certificates an inspected host's origin may chain to, besides the system roots.
    #[arg(long, env = "EGRESSGATE_UPSTREAM_CA")]
    pub upstream_ca: Option<PathBuf>,
    /// How long a deployment CA is valid (e.g. `365d`); the proxy mints its successor before
    /// it ends. [default: 365d]
    #[arg(long, env = "EGRESSGATE_CA_LIFETIME")]
    pub ca_lifetime: Option<String>,
    /// A CA with less than this left is replaced by a successor, and a replaced CA stays
    /// trusted at most this long. [default: 30d]
    #[arg(long, env = "EGRESSGATE_CA_OVERLAP")]
    pub ca_overlap: Option<String>,
    /// Whether the deployment CA permits only the inspected names (X.509 name constraints; a
    /// name inspected later is a rotation). [default: false]
    #[arg(long, env = "EGRESSGATE_CA_NAME_CONSTRAINTS", action = ArgAction::Set)]
    pub ca_name_constraints: Option<bool>,
    /// File holding the key that seals the CA's key in PostgreSQL (32 random bytes, base64);
    /// or the key itself in EGRESSGATE_CA_SEAL_KEY.
    #[arg(long, env = "EGRESSGATE_CA_SEAL_KEY_FILE")]
    pub ca_seal_key_file: Option<PathBuf>,
    /// Address for `/metrics`, `/healthz`, `/readyz` of a proxy-only process. [default: none]
    #[arg(long, env = "EGRESSGATE_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Default turn lifetime (e.g. `1h`). [default: 1h]
    #[arg(long, env = "EGRESSGATE_TURN_TTL")]
    pub turn_ttl: Option<String>,
    /// Interrupt lifetime. [default: 1h]
    #[arg(long, env = "EGRESSGATE_INTERRUPT_TTL")]
    pub interrupt_ttl: Option<String>,
    /// How long expired interrupts are kept. [default: 7d]
    #[arg(long, env = "EGRESSGATE_INTERRUPT_RETENTION")]
    pub interrupt_retention: Option<String>,
    /// How long snapshots are kept. [default: 14d]
    #[arg(long, env = "EGRESSGATE_SNAPSHOT_RETENTION")]
    pub snapshot_retention: Option<String>,
    /// Largest snapshot (e.g. `8 MiB`). [default: 8 MiB]
    #[arg(long, env = "EGRESSGATE_SNAPSHOT_MAX_BYTES")]
    pub snapshot_max_bytes: Option<String>,
    /// Largest pointer record (e.g. `400 KB`). [default: 400 KB]
    #[arg(long, env = "EGRESSGATE_ITEM_MAX_BYTES")]
    pub item_max_bytes: Option<String>,
    /// Claim lease. [default: 30s]
    #[arg(long, env = "EGRESSGATE_LEASE")]
    pub lease: Option<String>,
    /// Resume hard deadline. [default: 15m]
    #[arg(long, env = "EGRESSGATE_RESUME_DEADLINE")]
    pub resume_deadline: Option<String>,
    /// Claims per card before it is denied. [default: 3]
    #[arg(long, env = "EGRESSGATE_CLAIM_CAP")]
    pub claim_cap: Option<u32>,
    /// Approval lifetime. [default: 24h]
    #[arg(long, env = "EGRESSGATE_APPROVAL_TTL")]
    pub approval_ttl: Option<String>,
    /// Concurrent resumes per user. [default: 2]
    #[arg(long, env = "EGRESSGATE_RESUME_SLOTS_PER_USER")]
    pub resume_slots_per_user: Option<u32>,
    /// Whether users without a row may approve. [default: true]
    #[arg(long, env = "EGRESSGATE_DEFAULT_CAN_APPROVE", action = ArgAction::Set)]
    pub default_can_approve: Option<bool>,
    /// `enforce` refusals, or `shadow`: record and log policy refusals with `"shadow": true`
    /// and let the request through (a user's own mode wins). [default: enforce]
    #[arg(long, env = "EGRESSGATE_MODE")]
    pub mode: Option<String>,
    /// Which allowed requests get a `proxy decision` line: `all`, `none` or `1/N` (refusals
    /// and failures always do, one identical line a second at most). [default: all]
    #[arg(long, env = "EGRESSGATE_LOG_ALLOWED")]
    pub log_allowed: Option<String>,
    /// Refuse TLS without SNI on port 443. [default: true]
    #[arg(long, env = "EGRESSGATE_REQUIRE_SNI", action = ArgAction::Set)]
    pub require_sni: Option<bool>,
    /// Distinct refused hosts kept per turn. [default: 256]
    #[arg(long, env = "EGRESSGATE_MAX_REFUSALS_PER_TURN")]
    pub max_refusals_per_turn: Option<i64>,
    /// Card cap: sites. [default: 20]
    #[arg(long, env = "EGRESSGATE_CARD_MAX_SITES")]
    pub card_max_sites: Option<usize>,
    /// Card cap: URLs. [default: 20]
    #[arg(long, env = "EGRESSGATE_CARD_MAX_URLS")]
    pub card_max_urls: Option<usize>,
    /// Card cap: packages. [default: 50]
    #[arg(long, env = "EGRESSGATE_CARD_MAX_PACKAGES")]
    pub card_max_packages: Option<usize>,
    /// Failed resume attempts per client address per `resume-failure-window`. [default: 30]
    #[arg(long, env = "EGRESSGATE_RESUME_FAILURES_PER_CLIENT")]
    pub resume_failures_per_client: Option<u32>,
    /// Failed resume attempts per card per `resume-failure-window`. [default: 10]
    #[arg(long, env = "EGRESSGATE_RESUME_FAILURES_PER_CARD")]
    pub resume_failures_per_card: Option<u32>,
    /// Window over which the resume failure limits refill. [default: 1m]
    #[arg(long, env = "EGRESSGATE_RESUME_FAILURE_WINDOW")]
    pub resume_failure_window: Option<String>,
    /// Time allowed for a request head. [default: 10s]
    #[arg(long, env = "EGRESSGATE_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Option<String>,
    /// Time allowed to resolve and connect upstream. [default: 10s]
    #[arg(long, env = "EGRESSGATE_CONNECT_TIMEOUT")]
    pub connect_timeout: Option<String>,
    /// Time allowed for a tunnel's TLS ClientHello. [default: 10s]
    #[arg(long, env = "EGRESSGATE_CLIENT_HELLO_TIMEOUT")]
    pub client_hello_timeout: Option<String>,
    /// Tunnel idle timeout. [default: 5m]
    #[arg(long, env = "EGRESSGATE_IDLE_TIMEOUT")]
    pub idle_timeout: Option<String>,
    /// Graceful-shutdown drain deadline. [default: 30s]
    #[arg(long, env = "EGRESSGATE_DRAIN_TIMEOUT")]
    pub drain_timeout: Option<String>,
    /// Largest request head in bytes. [default: 64 KiB]
    #[arg(long, env = "EGRESSGATE_MAX_HEADER_BYTES")]
    pub max_header_bytes: Option<String>,
    /// Concurrent client connections in total. [default: 10000]
    #[arg(long, env = "EGRESSGATE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Concurrent connections per turn. [default: 256]
    #[arg(long, env = "EGRESSGATE_MAX_CONNECTIONS_PER_TURN")]
    pub max_connections_per_turn: Option<usize>,
    /// Database pool size. [default: 16]
    #[arg(long, env = "EGRESSGATE_DB_MAX_CONNECTIONS")]
    pub db_max_connections: Option<u32>,
    /// Statement timeout. [default: 5s]
    #[arg(long, env = "EGRESSGATE_DB_STATEMENT_TIMEOUT")]
    pub db_statement_timeout: Option<String>,
    /// A browser origin (`https://app.example.com`) allowed to call the control API; repeat
    /// for more. Off by default: no CORS headers at all.
    #[arg(long, env = "EGRESSGATE_CORS_ORIGIN", value_delimiter = ',')]
    #[serde(default)]
    pub cors_origin: Vec<String>,
    /// Where people reach the control plane (card page links). [default: the control listener]
    #[arg(long, env = "EGRESSGATE_CONTROL_PUBLIC_URL")]
    pub control_public_url: Option<String>,
    /// The MCP requestState key (at least 32 bytes, hex or text). [default: generated on
    /// first start and kept in the database, so every control process shares it]
    #[arg(long, env = "EGRESSGATE_MCP_STATE_KEY", hide_env_values = true)]
    #[serde(skip_serializing)]
    pub mcp_state_key: Option<String>,
    /// Log line format on stderr: `text`, or `json` (one object a line, for log shippers).
    /// [default: text]
    #[arg(long, env = "EGRESSGATE_LOG_FORMAT")]
    pub log_format: Option<String>,
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
    "ca_lifetime",
    "ca_overlap",
    "ca_name_constraints",
    "ca_seal_key_file",
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
