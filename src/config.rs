//! Configuration in two steps: merge the raw layers (flags > environment > file > defaults),
//! then validate into typed settings for each plane. Any bad value is one clear error line.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_proxy::AllowedRange;
use egressgate_proxy::registry::{Ecosystem, Registries};
use egressgate_store::{Host, PoolOptions, SitePattern};
use ipnet::IpNet;

use crate::cli::RawConfig;

/// Keys whose TOML value may be a number although the raw field is text.
const TEXT_KEYS: &[&str] = &[
    "turn-ttl",
    "interrupt-ttl",
    "interrupt-retention",
    "snapshot-retention",
    "snapshot-max-bytes",
    "item-max-bytes",
    "lease",
    "resume-deadline",
    "approval-ttl",
    "header-read-timeout",
    "connect-timeout",
    "idle-timeout",
    "drain-timeout",
    "max-header-bytes",
    "db-statement-timeout",
    "ca-lifetime",
    "ca-overlap",
];

/// Where each setting came from: an error must name the flag, the environment variable or the
/// file key the user wrote, never a `--flag` they did not pass.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    labels: HashMap<String, String>,
}

impl Sources {
    /// Records that `key` (kebab-case) was set by a flag (`env == false`) or its environment
    /// variable.
    pub fn set_cli(&mut self, key: &str, env: bool) {
        let label = if env {
            format!("EGRESSGATE_{}", key.replace('-', "_").to_ascii_uppercase())
        } else {
            format!("--{key}")
        };
        self.labels.insert(key.to_owned(), label);
    }

    /// How an error names `key`: `--key`, `EGRESSGATE_KEY`, `DATABASE_URL` or `key (in FILE)`.
    pub fn label(&self, key: &str) -> String {
        self.labels
            .get(key)
            .cloned()
            .unwrap_or_else(|| format!("--{key}"))
    }
}

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
    /// Proxy listener.
    pub proxy_listen: SocketAddr,
    /// Control listener.
    pub control_listen: SocketAddr,
    /// Metrics listener for a proxy-only process.
    pub metrics_listen: Option<SocketAddr>,
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
    pub ca: crate::ca::CaSettings,
}

/// Merges the file (if any) under the flags/environment layer. `DATABASE_URL` is an alias of
/// `EGRESSGATE_DATABASE_URL`, below it in precedence. The MCP state key is never serialised
/// (so it can never be printed with the settings), so the flag or environment value is
/// carried across the merge by hand.
pub fn merge(cli: RawConfig) -> Result<RawConfig> {
    let key = cli.mcp_state_key.clone();
    let mut merged = merge_layers(cli)?;
    if key.is_some() {
        merged.mcp_state_key = key;
    }
    Ok(merged)
}

fn merge_layers(cli: RawConfig) -> Result<RawConfig> {
    let mut sources = cli.sources.clone();
    let mut top = serde_json::to_value(&cli).context("internal: config serialisation")?;
    if let Some(obj) = top.as_object_mut()
        && obj
            .get("database-url")
            .is_none_or(serde_json::Value::is_null)
        && let Ok(url) = std::env::var("DATABASE_URL")
    {
        obj.insert("database-url".into(), url.into());
        sources
            .labels
            .insert("database-url".into(), "DATABASE_URL".into());
    }
    let Some(path) = &cli.config else {
        return cli_with(top, cli.config.clone(), sources);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let file: toml::Table =
        toml::from_str(&text).with_context(|| format!("invalid TOML in {}", path.display()))?;
    let mut base = serde_json::to_value(file).context("config file")?;
    if let Some(obj) = base.as_object() {
        for key in obj.keys() {
            sources
                .labels
                .insert(key.clone(), format!("{key} (in {})", path.display()));
        }
    }
    if let Some(obj) = base.as_object_mut() {
        for key in TEXT_KEYS {
            if let Some(v) = obj.get_mut(*key)
                && v.is_number()
            {
                *v = serde_json::Value::String(v.to_string());
            }
        }
        if let Some(serde_json::Value::Object(top)) = Some(&top) {
            for (k, v) in top {
                let unset = v.is_null() || v.as_array().is_some_and(Vec::is_empty);
                if !unset {
                    obj.insert(k.clone(), v.clone());
                    if let Some(l) = cli.sources.labels.get(k) {
                        sources.labels.insert(k.clone(), l.clone());
                    }
                }
            }
        }
    }
    // Validate the file's keys through the same struct (unknown keys are errors).
    let merged: RawConfig = serde_json::from_value(base)
        .with_context(|| format!("invalid setting in {}", path.display()))?;
    Ok(RawConfig {
        config: cli.config,
        sources,
        ..merged
    })
}

fn cli_with(v: serde_json::Value, config: Option<PathBuf>, sources: Sources) -> Result<RawConfig> {
    let raw: RawConfig = serde_json::from_value(v).context("internal: config")?;
    Ok(RawConfig {
        config,
        sources,
        ..raw
    })
}

/// A duration setting: plain seconds or humantime (`30s`, `15m`, `1h`, `7d`).
pub(crate) fn duration(name: &str, v: &Option<String>, default: Duration) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some(s) => {
            let s = s.trim();
            if let Ok(secs) = s.parse::<u64>() {
                return Ok(Duration::from_secs(secs));
            }
            humantime::parse_duration(s)
                .map_err(|e| anyhow!("{name} {s:?}: {e} (use e.g. 30s, 15m, 1h, 7d)"))
        }
    }
}

fn size(name: &str, v: &Option<String>, default: u64) -> Result<u64> {
    let Some(s) = v else { return Ok(default) };
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("{name} {s:?}: expected a size like 400 KB or 8 MiB"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1000,
        "kib" => 1024,
        "mb" | "m" => 1_000_000,
        "mib" => 1024 * 1024,
        "gb" | "g" => 1_000_000_000,
        "gib" => 1024 * 1024 * 1024,
        other => bail!("{name} {s:?}: unknown unit {other:?}"),
    };
    n.checked_mul(mult)
        .ok_or_else(|| anyhow!("{name} {s:?}: too large"))
}

fn socket(name: &str, v: &Option<String>, default: &str) -> Result<SocketAddr> {
    let s = v.as_deref().unwrap_or(default);
    s.parse()
        .map_err(|_| anyhow!("{name} {s:?}: expected IP:PORT (e.g. 127.0.0.1:3128)"))
}

fn host(what: &str, s: &str) -> Result<Host> {
    Host::parse(s).map_err(|e| anyhow!("{what} {s:?}: {e}"))
}

/// Validates the merged raw configuration.
pub fn validate(raw: &RawConfig) -> Result<Config> {
    let l = |key: &str| raw.sources.label(key);
    let log_format = match raw.log_format.as_deref() {
        None | Some("text") => LogFormat::Text,
        Some("json") => LogFormat::Json,
        Some(other) => bail!("{} {other:?}: expected text or json", l("log-format")),
    };
    let data_dir = raw
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("egressgate-data"));
    let database = match raw.database_url.as_deref() {
        None | Some("") => Database::Sqlite,
        Some(u)
            if u.starts_with("postgres://")
                || u.starts_with("postgresql://")
                || u.starts_with("sqlite:") =>
        {
            Database::Url(u.to_owned())
        }
        Some(u) => bail!(
            "{}: unsupported URL scheme in {:?} (use postgres:// or sqlite://)",
            l("database-url"),
            redact(u)
        ),
    };
    let proxy_listen = socket(&l("proxy-listen"), &raw.proxy_listen, "127.0.0.1:3128")?;
    let control_listen = socket(&l("control-listen"), &raw.control_listen, "127.0.0.1:8080")?;
    let metrics_listen = raw
        .metrics_listen
        .as_ref()
        .map(|_| socket(&l("metrics-listen"), &raw.metrics_listen, ""))
        .transpose()?;
    let proxy_public_url = match &raw.proxy_public_url {
        Some(u) => public_url(&l("proxy-public-url"), u)?,
        None => proxy_listen.to_string(),
    };
    let internal_suffixes = raw
        .internal_suffix
        .iter()
        .map(|s| host(&l("internal-suffix"), s.trim_start_matches('.')))
        .collect::<Result<Vec<_>>>()?;
    let mut resolve: HashMap<Host, Vec<IpAddr>> = HashMap::new();
    for entry in &raw.resolve {
        let (h, ip) = entry
            .split_once('=')
            .ok_or_else(|| anyhow!("{} {entry:?}: expected HOST=IP", l("resolve")))?;
        let ip: IpAddr = ip
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| anyhow!("{} {entry:?}: {ip:?} is not an IP address", l("resolve")))?;
        resolve.entry(host(&l("resolve"), h)?).or_default().push(ip);
    }
    let dns_servers = raw
        .dns_server
        .iter()
        .map(|s| {
            s.parse::<SocketAddr>()
                .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                .map_err(|_| anyhow!("{} {s:?}: expected IP or IP:PORT", l("dns-server")))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut allow_cidrs = Vec::new();
    for entry in &raw.allow_cidr {
        let (net, pattern) = match entry.split_once('=') {
            Some((n, p)) => (n, Some(p)),
            None => (entry.as_str(), None),
        };
        let net: IpNet = net
            .parse()
            .map_err(|_| anyhow!("{} {entry:?}: {net:?} is not a CIDR range", l("allow-cidr")))?;
        let only_for = pattern
            .map(|p| {
                SitePattern::parse(p, &internal_suffixes)
                    .map_err(|e| anyhow!("{} {entry:?}: {e}", l("allow-cidr")))
            })
            .transpose()?;
        allow_cidrs.push(AllowedRange { net, only_for });
    }
    let allow_ports = if raw.allow_port.is_empty() {
        vec![80, 443]
    } else {
        raw.allow_port.clone()
    };
    if allow_ports.contains(&0) {
        bail!("{}: 0 is not a port", l("allow-port"));
    }
    let tls = match (&raw.tls_cert, &raw.tls_key) {
        (None, None) => None,
        (Some(c), Some(k)) => Some(crate::tls::server_config(c, k)?),
        _ => bail!("{} and {} go together", l("tls-cert"), l("tls-key")),
    };
    let inspect = raw
        .inspect
        .iter()
        .map(|p| {
            SitePattern::parse(p, &internal_suffixes)
                .map_err(|e| anyhow!("{} {p:?}: {e}", l("inspect")))
        })
        .collect::<Result<Vec<_>>>()?;
    let upstream_roots =
        egressgate_proxy::inspect::roots(raw.upstream_ca.as_deref()).map_err(|e| anyhow!("{e}"))?;
    let registries = registries(raw, &l)?;
    let ca = crate::ca::settings(raw, &inspect, &l)?;
    let d = egressgate_proxy::Settings::default();
    let proxy = egressgate_proxy::Settings {
        registries,
        inspect: inspect.clone(),
        ca: None,
        ca_home: None,
        ca_poll: d.ca_poll,
        upstream_roots: Arc::new(upstream_roots),
        allow_ports,
        allow_cidrs,
        resolve,
        dns_servers,
        internal_suffixes: internal_suffixes.clone(),
        require_sni: raw.require_sni.unwrap_or(true),
        log_allowed: match raw.log_allowed.as_deref() {
            None => egressgate_proxy::decision_log::Sampling::All,
            Some(v) => v
                .parse()
                .map_err(|e: String| anyhow!("{} {v:?}: {e}", l("log-allowed")))?,
        },
        mode: match raw.mode.as_deref() {
            None => egressgate_store::Mode::Enforce,
            Some(m) => m
                .parse()
                .map_err(|e: String| anyhow!("{} {m:?}: {e}", l("mode")))?,
        },
        max_refusals_per_turn: positive(
            &l("max-refusals-per-turn"),
            raw.max_refusals_per_turn,
            256,
        )?,
        forbidden_addrs: Vec::new(),
        header_read_timeout: duration(
            &l("header-read-timeout"),
            &raw.header_read_timeout,
            d.header_read_timeout,
        )?,
        connect_timeout: duration(
            &l("connect-timeout"),
            &raw.connect_timeout,
            d.connect_timeout,
        )?,
        idle_timeout: duration(&l("idle-timeout"), &raw.idle_timeout, d.idle_timeout)?,
        client_hello_timeout: duration(
            &l("client-hello-timeout"),
            &raw.client_hello_timeout,
            d.client_hello_timeout,
        )?,
        max_header_bytes: header_bytes(
            &l("max-header-bytes"),
            &raw.max_header_bytes,
            d.max_header_bytes,
        )?,
        max_connections_per_turn: raw
            .max_connections_per_turn
            .unwrap_or(d.max_connections_per_turn),
        max_connections: raw.max_connections.unwrap_or(d.max_connections),
        drain_timeout: duration(&l("drain-timeout"), &raw.drain_timeout, d.drain_timeout)?,
        allow_cache_ttl: d.allow_cache_ttl,
        tls: tls.map(Arc::new),
    };
    let c = egressgate_control::Settings::default();
    let control = egressgate_control::Settings {
        inspect,
        ca: None,
        proxy_public_url,
        turn_ttl: duration(&l("turn-ttl"), &raw.turn_ttl, c.turn_ttl)?,
        interrupt_ttl: duration(&l("interrupt-ttl"), &raw.interrupt_ttl, c.interrupt_ttl)?,
        interrupt_retention: duration(
            &l("interrupt-retention"),
            &raw.interrupt_retention,
            c.interrupt_retention,
        )?,
        snapshot_retention: duration(
            &l("snapshot-retention"),
            &raw.snapshot_retention,
            c.snapshot_retention,
        )?,
        snapshot_max_bytes: size(
            &l("snapshot-max-bytes"),
            &raw.snapshot_max_bytes,
            c.snapshot_max_bytes,
        )?,
        item_max_bytes: size(&l("item-max-bytes"), &raw.item_max_bytes, c.item_max_bytes)?,
        lease: duration(&l("lease"), &raw.lease, c.lease)?,
        resume_deadline: duration(
            &l("resume-deadline"),
            &raw.resume_deadline,
            c.resume_deadline,
        )?,
        claim_cap: raw.claim_cap.unwrap_or(c.claim_cap),
        approval_ttl: duration(&l("approval-ttl"), &raw.approval_ttl, c.approval_ttl)?,
        resume_slots_per_user: raw.resume_slots_per_user.unwrap_or(c.resume_slots_per_user),
        default_can_approve: raw.default_can_approve.unwrap_or(c.default_can_approve),
        card_max_sites: raw.card_max_sites.unwrap_or(c.card_max_sites),
        card_max_urls: raw.card_max_urls.unwrap_or(c.card_max_urls),
        card_max_packages: raw.card_max_packages.unwrap_or(c.card_max_packages),
        internal_suffixes,
        resume_failures_per_client: raw
            .resume_failures_per_client
            .unwrap_or(c.resume_failures_per_client),
        resume_failures_per_card: raw
            .resume_failures_per_card
            .unwrap_or(c.resume_failures_per_card),
        resume_failure_window: duration(
            &l("resume-failure-window"),
            &raw.resume_failure_window,
            c.resume_failure_window,
        )?,
        cors_origins: raw
            .cors_origin
            .iter()
            .map(|o| cors_origin(&l("cors-origin"), o))
            .collect::<Result<_>>()?,
        control_public_url: match &raw.control_public_url {
            Some(u) => control_public_url(&l("control-public-url"), u)?,
            None => format!("http://{control_listen}"),
        },
        mcp_state_key: raw
            .mcp_state_key
            .as_deref()
            .map(|k| mcp_state_key(&l("mcp-state-key"), k))
            .transpose()?,
        ..c
    };
    let p = PoolOptions::default();
    let pool = PoolOptions {
        max_connections: raw.db_max_connections.unwrap_or(p.max_connections).max(1),
        statement_timeout: duration(
            &l("db-statement-timeout"),
            &raw.db_statement_timeout,
            p.statement_timeout,
        )?,
        ..p
    };
    Ok(Config {
        log_format,
        data_dir,
        database,
        pool,
        proxy_listen,
        control_listen,
        metrics_listen,
        control_addrs: crate::selfaddr::control_addrs(&l("control-addr"), &raw.control_addr)?,
        proxy_public_url_given: raw.proxy_public_url.is_some(),
        control_public_url_given: raw.control_public_url.is_some(),
        proxy,
        control,
        ca,
    })
}

/// hyper cannot buffer less than 8 KiB, so a smaller limit is an error rather than silently
/// raised.
fn header_bytes(name: &str, v: &Option<String>, default: usize) -> Result<usize> {
    let n = usize::try_from(size(name, v, default as u64)?)?;
    if n < 8192 {
        bail!("{name} must be at least 8192 (8 KiB)");
    }
    Ok(n)
}

fn positive(name: &str, v: Option<i64>, default: i64) -> Result<i64> {
    match v {
        Some(n) if n < 1 => bail!("{name} must be at least 1"),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// `host:port` (a scheme or path is tolerated and dropped).
fn public_url(name: &str, u: &str) -> Result<String> {
    let rest = u.strip_prefix("http://").unwrap_or(u).trim_end_matches('/');
    let (h, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("{name} {u:?}: expected host:port"))?;
    if h.is_empty() || h.contains(['/', '@']) || port.parse::<u16>().map_or(true, |p| p == 0) {
        bail!("{name} {u:?}: expected host:port");
    }
    Ok(rest.to_owned())
}

/// A database URL with its password blanked, for error messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}

/// `--cors-origin`: exactly `scheme://host[:port]`, as a browser sends it in `Origin`.
fn cors_origin(name: &str, o: &str) -> Result<String> {
    let u = url::Url::parse(o).map_err(|e| anyhow!("{name} {o:?}: {e}"))?;
    let origin = u.origin().ascii_serialization();
    if !matches!(u.scheme(), "http" | "https") || origin != o.trim_end_matches('/') {
        bail!(
            "{name} {o:?}: expected an origin such as https://app.example.com (scheme, host and port only)"
        );
    }
    Ok(origin)
}

/// `--control-public-url`: an http(s) URL without query or fragment; kept without a
/// trailing slash so paths can be appended.
fn control_public_url(name: &str, u: &str) -> Result<String> {
    let parsed = url::Url::parse(u).map_err(|e| anyhow!("{name} {u:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https")
        || parsed.query().is_some()
        || parsed.fragment().is_some()
        || parsed.host_str().is_none()
    {
        bail!("{name} {u:?}: expected http(s)://host[:port][/path]");
    }
    Ok(u.trim_end_matches('/').to_owned())
}

/// `--mcp-state-key`: at least 32 bytes of key (hex is decoded, anything else taken as text).
pub fn mcp_state_key(name: &str, k: &str) -> Result<egressgate_control::settings::StateKey> {
    let bytes = hex::decode(k).unwrap_or_else(|_| k.as_bytes().to_vec());
    if bytes.len() < 32 {
        bail!("{name}: too short; give at least 32 bytes (64 hex digits)");
    }
    Ok(egressgate_control::settings::StateKey(bytes))
}

/// `--registry pypi|npm` and `--registry-mirror ECOSYSTEM=HOST[,HOST…]`.
fn registries(raw: &RawConfig, l: &dyn Fn(&str) -> String) -> Result<Registries> {
    let mut out = Registries::default();
    let eco = |flag: &str, v: &str| {
        Ecosystem::parse(v).ok_or_else(|| anyhow!("{} {v:?}: expected pypi or npm", l(flag)))
    };
    for r in &raw.registry {
        out.enable(eco("registry", r)?);
    }
    for entry in &raw.registry_mirror {
        let (e, hosts) = entry.split_once('=').ok_or_else(|| {
            anyhow!(
                "{} {entry:?}: expected ECOSYSTEM=HOST[,HOST...]",
                l("registry-mirror")
            )
        })?;
        let e = eco("registry-mirror", e)?;
        let hosts = hosts
            .split(',')
            .map(|h| host(&l("registry-mirror"), h.trim()))
            .collect::<Result<Vec<_>>>()?;
        if hosts.is_empty() {
            bail!("{} {entry:?}: no host", l("registry-mirror"));
        }
        out.add_mirror(e, hosts);
    }
    Ok(out)
}

#[cfg(test)]
mod agent_side_tests {
    use super::*;

    #[test]
    fn a_state_key_given_by_flag_or_environment_survives_the_merge() {
        let raw = RawConfig {
            mcp_state_key: Some("k".repeat(40)),
            ..RawConfig::default()
        };
        let merged = merge(raw).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            merged.mcp_state_key.as_deref(),
            Some("k".repeat(40).as_str())
        );
        let cfg = validate(&merged).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(cfg.control.mcp_state_key.map(|k| k.0.len()), Some(40));
        let short = RawConfig {
            mcp_state_key: Some("short".into()),
            ..RawConfig::default()
        };
        assert!(validate(&merge(short).unwrap_or_else(|e| unreachable!("{e}"))).is_err());
    }

    #[test]
    fn cors_origins_are_bare_origins() {
        let n = "--cors-origin";
        assert_eq!(
            cors_origin(n, "https://app.example.com").ok().as_deref(),
            Some("https://app.example.com")
        );
        assert_eq!(
            cors_origin(n, "http://localhost:5173").ok().as_deref(),
            Some("http://localhost:5173")
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/path",
            "ftp://x.example",
            "*",
            "https://a.example.com?x",
        ] {
            assert!(cors_origin(n, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn public_url_and_state_key() {
        let n = "--x";
        assert_eq!(
            control_public_url(n, "https://gate.example.com/")
                .ok()
                .as_deref(),
            Some("https://gate.example.com")
        );
        assert!(control_public_url(n, "gate.example.com").is_err());
        assert!(control_public_url(n, "https://gate.example.com/?a").is_err());
        assert!(mcp_state_key(n, "short").is_err());
        assert_eq!(
            mcp_state_key(n, &"ab".repeat(32)).map(|k| k.0.len()).ok(),
            Some(32)
        );
    }
}
