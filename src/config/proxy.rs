//! The proxy's settings from the merged raw configuration: where it may connect (static
//! names, DNS servers, private ranges, ports), what it inspects and trusts upstream, which
//! package registries it judges, and its limits and timeouts.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use egressgate_proxy::AllowedRange;
use egressgate_proxy::registry::{Ecosystem, Registries};
use egressgate_store::{Host, SitePattern};
use ipnet::IpNet;

use super::raw::RawConfig;
use super::values::{duration, header_bytes, host, positive};

/// The data plane's settings; `internal_suffixes` are the validated `--internal-suffix`es.
pub(super) fn settings(
    raw: &RawConfig,
    internal_suffixes: &[Host],
) -> Result<egressgate_proxy::Settings> {
    let l = |key: &str| raw.sources.label(key);
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
                SitePattern::parse(p, internal_suffixes)
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
            SitePattern::parse(p, internal_suffixes)
                .map_err(|e| anyhow!("{} {p:?}: {e}", l("inspect")))
        })
        .collect::<Result<Vec<_>>>()?;
    let upstream_roots =
        egressgate_proxy::inspect::roots(raw.upstream_ca.as_deref()).map_err(|e| anyhow!("{e}"))?;
    let registries = registries(raw, &l)?;
    let d = egressgate_proxy::Settings::default();
    Ok(egressgate_proxy::Settings {
        registries,
        inspect,
        ca: None,
        ca_home: None,
        ca_poll: d.ca_poll,
        upstream_roots: Arc::new(upstream_roots),
        allow_ports,
        allow_cidrs,
        resolve,
        dns_servers,
        internal_suffixes: internal_suffixes.to_vec(),
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
        header_read_timeout: setting!(duration, raw.header_read_timeout, d),
        connect_timeout: setting!(duration, raw.connect_timeout, d),
        idle_timeout: setting!(duration, raw.idle_timeout, d),
        client_hello_timeout: setting!(duration, raw.client_hello_timeout, d),
        max_header_bytes: setting!(header_bytes, raw.max_header_bytes, d),
        max_connections_per_turn: raw
            .max_connections_per_turn
            .unwrap_or(d.max_connections_per_turn),
        max_connections: raw.max_connections.unwrap_or(d.max_connections),
        drain_timeout: setting!(duration, raw.drain_timeout, d),
        epoch_poll: epoch_poll(raw, d.epoch_poll)?,
        allow_cache_ttl: d.allow_cache_ttl,
        tls: tls.map(Arc::new),
    })
}

/// `--epoch-poll`: at least 10 ms, so a typo cannot make every proxy read the database in a
/// loop.
fn epoch_poll(raw: &RawConfig, default: std::time::Duration) -> Result<std::time::Duration> {
    let poll = setting!(duration, raw.epoch_poll, default = default);
    if poll < std::time::Duration::from_millis(10) {
        bail!(
            "{} {poll:?}: at least 10ms",
            raw.sources.label("epoch-poll")
        );
    }
    Ok(poll)
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
