//! Configuration in two steps: merge the raw layers (flags > environment > file > defaults),
//! then validate into typed settings for each plane. Any bad value is one clear error line.
//! The raw settings ([`RawConfig`]) are their own module, which the command line embeds and
//! the two steps read, so the command line and the configuration do not import each other.

use std::net::SocketAddr;
use std::path::PathBuf;

use egressgate_store::PoolOptions;

/// A setting read through one of the value parsers by its field name alone: the label an
/// error gives it (`--turn-ttl`, `EGRESSGATE_TURN_TTL` or the file's key), the raw value and
/// the default (the same field of `$default`, or `default = EXPR`) all follow from the name,
/// so they cannot drift apart. `each PARSE` reads every value of a repeatable setting through
/// the parser; a setting with no parser takes `raw.FIELD` or, unset, the default's `FIELD`.
macro_rules! setting {
    (each $parse:ident, $raw:ident . $field:ident) => {
        $raw.$field
            .iter()
            .map(|v| {
                $parse(
                    &$raw.sources.label(&stringify!($field).replace('_', "-")),
                    v,
                )
            })
            .collect::<anyhow::Result<_>>()?
    };
    ($raw:ident . $field:ident, $default:ident) => {
        $raw.$field.unwrap_or($default.$field)
    };
    ($parse:ident, $raw:ident . $field:ident, $default:ident) => {
        setting!($parse, $raw.$field, default = $default.$field)
    };
    ($parse:ident, $raw:ident . $field:ident, default = $default:expr) => {
        $parse(
            &$raw.sources.label(&stringify!($field).replace('_', "-")),
            &$raw.$field,
            $default,
        )?
    };
}

mod ca;
mod control;
mod email;
mod merge;
mod proxy;
mod raw;
mod slack;
mod sources;
mod validate;
mod values;

pub use merge::merge;
pub use raw::RawConfig;
pub use validate::validate;
pub use values::{duration, mcp_state_key, redact};

/// Where the data lives.
#[derive(Debug, Clone)]
pub enum Database {
    /// Embedded SQLite in the data directory.
    Sqlite,
    /// A database URL (PostgreSQL for scale-out).
    Url(String),
}

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (ANSI colours only on a terminal).
    Text,
    /// One JSON object per line with the event's fields flattened, for log shippers.
    Json,
}

/// The validated configuration.
pub struct Config {
    /// Log line format.
    pub log_format: LogFormat,
    /// Data directory (SQLite, blobs, generated tokens).
    pub data_dir: PathBuf,
    /// The store.
    pub database: Database,
    /// Pool sizing.
    pub pool: PoolOptions,
    /// Apply missing migrations at start (`--auto-migrate`) instead of refusing.
    pub auto_migrate: bool,
    /// The listeners' addresses.
    pub listen: Listen,
    /// The control plane's addresses (`--control-addr`), never dialled by the proxy.
    pub control_addrs: Vec<SocketAddr>,
    /// Whether `--proxy-public-url` was given (required for `control`).
    pub proxy_public_url_given: bool,
    /// Whether `--control-public-url` was set (else the bound control listener is used).
    pub control_public_url_given: bool,
    /// Data-plane settings.
    pub proxy: egressgate_proxy::Settings,
    /// Control-plane settings.
    pub control: egressgate_control::Settings,
    /// The deployment CA's lifetime, names and seal key.
    pub ca: ca::CaSettings,
}

/// Where this process's listeners bind (`--proxy-listen`, `--control-listen`,
/// `--metrics-listen`): read and checked as one step of the configuration and bound as one
/// step of the start, each by the planes that run.
#[derive(Debug, Clone, Copy)]
pub struct Listen {
    /// The proxy's listener.
    pub proxy: SocketAddr,
    /// The control plane's listener.
    pub control: SocketAddr,
    /// `/metrics`, `/healthz` and `/readyz` of a proxy-only process (none unless set).
    pub metrics: Option<SocketAddr>,
}
