//! Every setting as the user wrote it, before validation: one struct that clap fills from
//! flags and environment variables and serde from the TOML file, so a key is spelled the same
//! in all three. The command line embeds it in each server subcommand; the config steps merge
//! and validate it.

use std::path::PathBuf;

use clap::{ArgAction, Args};
use serde::{Deserialize, Serialize};

use super::sources::Sources;

/// Every setting, unset unless given. The same struct is read from flags and environment
/// (clap) and from the TOML file (serde), then merged: flags > environment > file > defaults.
/// A key the file leaves out is unset (`default`), as a flag not given is.
#[derive(Args, Debug, Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct RawConfig {
    /// Where each setting came from, so an error names what the user wrote (filled by `main`
    /// and `config::merge`, never parsed).
    #[arg(skip)]
    #[serde(skip)]
    pub sources: Sources,
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
    /// Apply missing database migrations at start instead of refusing an older schema (one
    /// process; with several sharing PostgreSQL, run `egressgate migrate`). [default: false]
    #[arg(long, env = "EGRESSGATE_AUTO_MIGRATE", action = ArgAction::Set)]
    pub auto_migrate: Option<bool>,
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
    pub resolve: Vec<String>,
    /// Upstream DNS servers `IP` or `IP:PORT` (repeatable). [default: /etc/resolv.conf]
    #[arg(long, env = "EGRESSGATE_DNS_SERVER", value_delimiter = ',')]
    pub dns_server: Vec<String>,
    /// The control plane's addresses `HOST:PORT`, never dialled by the proxy even inside
    /// `--allow-cidr` (repeatable; for a proxy-only process).
    #[arg(long, env = "EGRESSGATE_CONTROL_ADDR", value_delimiter = ',')]
    pub control_addr: Vec<String>,
    /// Reachable private ranges `CIDR` or `CIDR=PATTERN` (repeatable).
    #[arg(long, env = "EGRESSGATE_ALLOW_CIDR", value_delimiter = ',')]
    pub allow_cidr: Vec<String>,
    /// Ports a request may target (repeatable; replaces the default). [default: 80,443]
    #[arg(long, env = "EGRESSGATE_ALLOW_PORT", value_delimiter = ',')]
    pub allow_port: Vec<u16>,
    /// Path-style multi-tenant hosts (`storage.googleapis.com`, ...) that may be granted as a
    /// whole all the same (repeatable).
    #[arg(long, env = "EGRESSGATE_ALLOW_WHOLE_HOST", value_delimiter = ',')]
    pub allow_whole_host: Vec<String>,
    /// Extra internal-looking suffixes (repeatable).
    #[arg(long, env = "EGRESSGATE_INTERNAL_SUFFIX", value_delimiter = ',')]
    pub internal_suffix: Vec<String>,
    /// Package registries judged package by package: `pypi`, `npm` (repeatable). Their hosts
    /// need no site approval; each request needs its package approved.
    #[arg(long, env = "EGRESSGATE_REGISTRY", value_delimiter = ',')]
    pub registry: Vec<String>,
    /// A private mirror `ECOSYSTEM=HOST[,HOST…]`, judged like that registry (repeatable; in
    /// the environment, mirrors are separated by `;`).
    #[arg(long, env = "EGRESSGATE_REGISTRY_MIRROR", value_delimiter = ';')]
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
    /// One webhook attempt's limit: connect, send, the answer's head. [default: 10s]
    #[arg(long, env = "EGRESSGATE_WEBHOOK_TIMEOUT")]
    pub webhook_timeout: Option<String>,
    /// Wait before a webhook's second attempt, doubled for each further one (at most 1h),
    /// with jitter. [default: 10s]
    #[arg(long, env = "EGRESSGATE_WEBHOOK_BACKOFF")]
    pub webhook_backoff: Option<String>,
    /// Attempts before a webhook delivery is given up (`failed`). [default: 10]
    #[arg(long, env = "EGRESSGATE_WEBHOOK_MAX_ATTEMPTS", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub webhook_max_attempts: Option<u32>,
    /// The SMTP relay that e-mails pending cards to their person: `smtps://HOST[:PORT]`
    /// (implicit TLS), `smtp://HOST[:PORT]` (STARTTLS required) or
    /// `smtp://HOST[:PORT]?tls=none`. Its login comes only from EGRESSGATE_SMTP_USERNAME and
    /// EGRESSGATE_SMTP_PASSWORD. [default: none, no e-mail]
    #[arg(long, env = "EGRESSGATE_SMTP_URL")]
    pub smtp_url: Option<String>,
    /// The sender of those messages, `gate@example.org` or `egressgate <gate@example.org>`.
    #[arg(long, env = "EGRESSGATE_SMTP_FROM")]
    pub smtp_from: Option<String>,
    /// PEM CA certificates the relay's certificate may chain to, besides the system roots.
    #[arg(long, env = "EGRESSGATE_SMTP_CA")]
    pub smtp_ca: Option<PathBuf>,
    /// The Slack app's signing secret: verifies `POST /v1/slack/interactions` (without it,
    /// Slack clicks are refused). Never printed.
    #[arg(long, env = "EGRESSGATE_SLACK_SIGNING_SECRET", hide_env_values = true)]
    #[serde(skip_serializing)]
    pub slack_signing_secret: Option<String>,
    /// A Slack incoming webhook URL: each pending card is posted to its channel. Never printed.
    #[arg(long, env = "EGRESSGATE_SLACK_WEBHOOK_URL", hide_env_values = true)]
    #[serde(skip_serializing)]
    pub slack_webhook_url: Option<String>,
    /// A Slack bot token (`xoxb-…`, scope `chat:write`): each pending card is sent as a DM to
    /// its user's `slack_user_id`. Never printed.
    #[arg(long, env = "EGRESSGATE_SLACK_BOT_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing)]
    pub slack_bot_token: Option<String>,
    /// Slack's Web API base URL. [default: https://slack.com/api]
    #[arg(long, env = "EGRESSGATE_SLACK_API_URL")]
    pub slack_api_url: Option<String>,
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
    /// Let a person grant a site or package to every chat of theirs (`"scope": "user"`); bare
    /// `--allow-user-scope` turns it on. [default: false]
    #[arg(long, env = "EGRESSGATE_ALLOW_USER_SCOPE", action = ArgAction::Set, num_args = 0..=1,
        default_missing_value = "true")]
    pub allow_user_scope: Option<bool>,
    /// Lifetime cap of a user-scope approval (below `approval-ttl` when shorter). [default: 8h]
    #[arg(long, env = "EGRESSGATE_USER_GRANT_TTL")]
    pub user_grant_ttl: Option<String>,
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
    /// Requests without a valid credential per client address per `auth-failure-window`.
    /// [default: 300]
    #[arg(long, env = "EGRESSGATE_AUTH_FAILURES_PER_CLIENT")]
    pub auth_failures_per_client: Option<u32>,
    /// Window over which the credential failure limit refills. [default: 1m]
    #[arg(long, env = "EGRESSGATE_AUTH_FAILURE_WINDOW")]
    pub auth_failure_window: Option<String>,
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
    /// How often a proxy reads the cache epoch when no change was pushed to it (revocations
    /// are pushed as they commit; this only bounds how long a lost push goes unnoticed).
    /// [default: 1s]
    #[arg(long, env = "EGRESSGATE_EPOCH_POLL")]
    pub epoch_poll: Option<String>,
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
    pub cors_origin: Vec<String>,
    /// Where people reach the control plane (card page links). [default: the control listener]
    #[arg(long, env = "EGRESSGATE_CONTROL_PUBLIC_URL")]
    pub control_public_url: Option<String>,
    /// How long an inbox link (`POST /v1/users/{user_id}/inbox-link`) opens the person's
    /// inbox. [default: 15m]
    #[arg(long, env = "EGRESSGATE_INBOX_LINK_TTL")]
    pub inbox_link_ttl: Option<String>,
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
