//! The command line: subcommands and the settings every server subcommand shares. Each
//! setting is a long flag with an `EGRESSGATE_*` environment twin (clap merges the two, flags
//! first); the config file fills what neither set (see `config`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};
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
    /// Keep the pre-approved site and package lists.
    Admin {
        /// Which list and what to do.
        #[command(subcommand)]
        list: AdminListCmd,
    },
    /// The MCP server over stdio for one turn: the tools `egress_refusals` and
    /// `request_egress_approval`, calling the control API (runtime token from
    /// EGRESSGATE_RUNTIME_TOKEN). Only JSON-RPC is written to stdout.
    Mcp(McpArgs),
    /// Run a command whose only way out is the proxy.
    Sandbox {
        /// The sandbox action.
        #[command(subcommand)]
        action: SandboxCmd,
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
        /// The turn's proxy URL (`http://TURN_ID:SECRET@host:port`).
        #[arg(long)]
        proxy_url: String,
        /// Only set the proxy variables (no network namespace).
        #[arg(long)]
        no_isolate: bool,
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
    /// TOML configuration file.
    #[arg(long, env = "EGRESSGATE_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Directory for the embedded database, blobs and generated tokens.
    #[arg(long, env = "EGRESSGATE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// `postgres://…` for the shared store (also `DATABASE_URL`), or `sqlite://…`.
    #[arg(long, env = "EGRESSGATE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Proxy listener address.
    #[arg(long, env = "EGRESSGATE_PROXY_LISTEN")]
    pub proxy_listen: Option<String>,
    /// Control-plane listener address.
    #[arg(long, env = "EGRESSGATE_CONTROL_LISTEN")]
    pub control_listen: Option<String>,
    /// `host:port` put into turns' proxy_url.
    #[arg(long, env = "EGRESSGATE_PROXY_PUBLIC_URL")]
    pub proxy_public_url: Option<String>,
    /// Static DNS entries `HOST=IP` (repeatable; env comma-separated).
    #[arg(long, env = "EGRESSGATE_RESOLVE", value_delimiter = ',')]
    #[serde(default)]
    pub resolve: Vec<String>,
    /// Upstream DNS servers `IP` or `IP:PORT` (repeatable; default: /etc/resolv.conf).
    #[arg(long, env = "EGRESSGATE_DNS_SERVER", value_delimiter = ',')]
    #[serde(default)]
    pub dns_server: Vec<String>,
    /// Reachable private ranges `CIDR` or `CIDR=PATTERN` (repeatable).
    #[arg(long, env = "EGRESSGATE_ALLOW_CIDR", value_delimiter = ',')]
    #[serde(default)]
    pub allow_cidr: Vec<String>,
    /// Ports a request may target (replaces the default 80 and 443).
    #[arg(long, env = "EGRESSGATE_ALLOW_PORT", value_delimiter = ',')]
    #[serde(default)]
    pub allow_port: Vec<u16>,
    /// Extra internal-looking suffixes (repeatable).
    #[arg(long, env = "EGRESSGATE_INTERNAL_SUFFIX", value_delimiter = ',')]
    #[serde(default)]
    pub internal_suffix: Vec<String>,
    /// PEM certificate chain for a TLS proxy listener.
    #[arg(long, env = "EGRESSGATE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for a TLS proxy listener.
    #[arg(long, env = "EGRESSGATE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Address for `/metrics`, `/healthz`, `/readyz` of a proxy-only process.
    #[arg(long, env = "EGRESSGATE_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Default turn lifetime (e.g. `1h`).
    #[arg(long, env = "EGRESSGATE_TURN_TTL")]
    pub turn_ttl: Option<String>,
    /// Interrupt lifetime.
    #[arg(long, env = "EGRESSGATE_INTERRUPT_TTL")]
    pub interrupt_ttl: Option<String>,
    /// How long expired interrupts are kept.
    #[arg(long, env = "EGRESSGATE_INTERRUPT_RETENTION")]
    pub interrupt_retention: Option<String>,
    /// How long snapshots are kept.
    #[arg(long, env = "EGRESSGATE_SNAPSHOT_RETENTION")]
    pub snapshot_retention: Option<String>,
    /// Largest snapshot (e.g. `8 MiB`).
    #[arg(long, env = "EGRESSGATE_SNAPSHOT_MAX_BYTES")]
    pub snapshot_max_bytes: Option<String>,
    /// Largest pointer record (e.g. `400 KB`).
    #[arg(long, env = "EGRESSGATE_ITEM_MAX_BYTES")]
    pub item_max_bytes: Option<String>,
    /// Claim lease.
    #[arg(long, env = "EGRESSGATE_LEASE")]
    pub lease: Option<String>,
    /// Resume hard deadline.
    #[arg(long, env = "EGRESSGATE_RESUME_DEADLINE")]
    pub resume_deadline: Option<String>,
    /// Claims per card before it is denied.
    #[arg(long, env = "EGRESSGATE_CLAIM_CAP")]
    pub claim_cap: Option<u32>,
    /// Approval lifetime.
    #[arg(long, env = "EGRESSGATE_APPROVAL_TTL")]
    pub approval_ttl: Option<String>,
    /// Concurrent resumes per user.
    #[arg(long, env = "EGRESSGATE_RESUME_SLOTS_PER_USER")]
    pub resume_slots_per_user: Option<u32>,
    /// Whether users without a row may approve.
    #[arg(long, env = "EGRESSGATE_DEFAULT_CAN_APPROVE", action = ArgAction::Set)]
    pub default_can_approve: Option<bool>,
    /// Refuse TLS without SNI on port 443.
    #[arg(long, env = "EGRESSGATE_REQUIRE_SNI", action = ArgAction::Set)]
    pub require_sni: Option<bool>,
    /// Distinct refused hosts kept per turn.
    #[arg(long, env = "EGRESSGATE_MAX_REFUSALS_PER_TURN")]
    pub max_refusals_per_turn: Option<i64>,
    /// Card cap: sites.
    #[arg(long, env = "EGRESSGATE_CARD_MAX_SITES")]
    pub card_max_sites: Option<usize>,
    /// Card cap: URLs.
    #[arg(long, env = "EGRESSGATE_CARD_MAX_URLS")]
    pub card_max_urls: Option<usize>,
    /// Card cap: packages.
    #[arg(long, env = "EGRESSGATE_CARD_MAX_PACKAGES")]
    pub card_max_packages: Option<usize>,
    /// Time allowed for a request head.
    #[arg(long, env = "EGRESSGATE_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Option<String>,
    /// Time allowed to resolve and connect upstream.
    #[arg(long, env = "EGRESSGATE_CONNECT_TIMEOUT")]
    pub connect_timeout: Option<String>,
    /// Time allowed for a tunnel's TLS ClientHello.
    #[arg(long, env = "EGRESSGATE_CLIENT_HELLO_TIMEOUT")]
    pub client_hello_timeout: Option<String>,
    /// Tunnel idle timeout.
    #[arg(long, env = "EGRESSGATE_IDLE_TIMEOUT")]
    pub idle_timeout: Option<String>,
    /// Graceful-shutdown drain deadline.
    #[arg(long, env = "EGRESSGATE_DRAIN_TIMEOUT")]
    pub drain_timeout: Option<String>,
    /// Largest request head in bytes.
    #[arg(long, env = "EGRESSGATE_MAX_HEADER_BYTES")]
    pub max_header_bytes: Option<String>,
    /// Concurrent client connections in total.
    #[arg(long, env = "EGRESSGATE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Concurrent connections per turn.
    #[arg(long, env = "EGRESSGATE_MAX_CONNECTIONS_PER_TURN")]
    pub max_connections_per_turn: Option<usize>,
    /// Database pool size.
    #[arg(long, env = "EGRESSGATE_DB_MAX_CONNECTIONS")]
    pub db_max_connections: Option<u32>,
    /// Statement timeout.
    #[arg(long, env = "EGRESSGATE_DB_STATEMENT_TIMEOUT")]
    pub db_statement_timeout: Option<String>,
    /// A browser origin (`https://app.example.com`) allowed to call the control API; repeat
    /// for more. Off by default: no CORS headers at all.
    #[arg(long, env = "EGRESSGATE_CORS_ORIGIN", value_delimiter = ',')]
    #[serde(default)]
    pub cors_origin: Vec<String>,
    /// Where people reach the control plane (card page links); default: the control listener.
    #[arg(long, env = "EGRESSGATE_CONTROL_PUBLIC_URL")]
    pub control_public_url: Option<String>,
    /// The MCP requestState key (at least 32 bytes, hex or text); default: generated on first
    /// start and kept in the database, so every control process of a deployment shares it.
    #[arg(long, env = "EGRESSGATE_MCP_STATE_KEY", hide_env_values = true)]
    #[serde(skip_serializing)]
    pub mcp_state_key: Option<String>,
}
