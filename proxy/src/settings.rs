//! The data plane's typed settings, built by the binary from flags, environment and file.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use egressgate_store::{Host, SitePattern};
use ipnet::IpNet;

/// A private range that is reachable anyway, for every host or only for hosts matching an
/// administrator pattern.
#[derive(Clone, Debug)]
pub struct AllowedRange {
    /// The range.
    pub net: IpNet,
    /// `None`: any host; `Some(p)`: only hosts matching `p`.
    pub only_for: Option<SitePattern>,
}

/// Everything the proxy needs to decide and dial.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Ports a request may target.
    pub allow_ports: Vec<u16>,
    /// Non-public ranges that may be dialled anyway.
    pub allow_cidrs: Vec<AllowedRange>,
    /// Static DNS answers, consulted before the resolver (`--resolve HOST=IP`).
    pub resolve: HashMap<Host, Vec<IpAddr>>,
    /// Upstream DNS servers (empty: the system's resolver configuration).
    pub dns_servers: Vec<SocketAddr>,
    /// Operator-configured internal suffixes.
    pub internal_suffixes: Vec<Host>,
    /// Refuse TLS without SNI on port 443.
    pub require_sni: bool,
    /// The deployment's mode: enforce refusals, or only record and log policy refusals (a
    /// user's own mode, set by an administrator, wins).
    pub mode: egressgate_store::Mode,
    /// Which allowed decision lines are logged (refusals and failures always are).
    pub log_allowed: crate::decision_log::Sampling,
    /// Distinct refused hosts kept per turn.
    pub max_refusals_per_turn: i64,
    /// The gate's own listeners and the database: never dialled, even inside allowed ranges.
    pub forbidden_addrs: Vec<SocketAddr>,
    /// Time allowed to send the request head.
    pub header_read_timeout: Duration,
    /// Time allowed to resolve and connect upstream.
    pub connect_timeout: Duration,
    /// A tunnel or forwarded stream with no bytes either way for this long is closed.
    pub idle_timeout: Duration,
    /// Time allowed for the client's TLS ClientHello after `200` on CONNECT.
    pub client_hello_timeout: Duration,
    /// Largest request head.
    pub max_header_bytes: usize,
    /// Concurrent connections per turn.
    pub max_connections_per_turn: usize,
    /// Concurrent client connections in total.
    pub max_connections: usize,
    /// How long graceful shutdown waits for open tunnels.
    pub drain_timeout: Duration,
    /// How often the cache epoch is read when no change was pushed: changes are pushed as
    /// they commit, so this only bounds how long a lost push goes unnoticed.
    pub epoch_poll: Duration,
    /// How long an in-memory allow decision may be reused (bounded also by the turn).
    pub allow_cache_ttl: Duration,
    /// TLS for the proxy listener itself (clients speak TLS to the proxy).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Hosts inspected deployment-wide (`--inspect PATTERN`).
    pub inspect: Vec<SitePattern>,
    /// The deployment CA that signs inspected hosts' leaves (`None`: nothing is inspected).
    pub ca: Option<Arc<egressgate_store::ca::DeploymentCa>>,
    /// Where the CA is kept, polled every `ca_poll` so a rotation reaches a running proxy.
    pub ca_home: Option<egressgate_store::ca::CaHome>,
    /// How often the CA is re-read.
    pub ca_poll: Duration,
    /// What inspected hosts' origins are verified against (system roots + `--upstream-ca`).
    pub upstream_roots: Arc<rustls::RootCertStore>,
    /// Hosts of the enabled package registries (built-in and mirrors): judged per request by
    /// the package it names, never by site grants.
    pub registries: crate::registry::Registries,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            allow_ports: vec![80, 443],
            allow_cidrs: Vec::new(),
            resolve: HashMap::new(),
            dns_servers: Vec::new(),
            internal_suffixes: Vec::new(),
            require_sni: true,
            mode: egressgate_store::Mode::Enforce,
            log_allowed: crate::decision_log::Sampling::All,
            max_refusals_per_turn: 256,
            forbidden_addrs: Vec::new(),
            header_read_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            client_hello_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            max_connections_per_turn: 256,
            max_connections: 10_000,
            drain_timeout: Duration::from_secs(30),
            epoch_poll: Duration::from_secs(1),
            allow_cache_ttl: Duration::from_secs(3600),
            tls: None,
            inspect: Vec::new(),
            ca: None,
            ca_home: None,
            ca_poll: Duration::from_secs(5),
            upstream_roots: Arc::new(rustls::RootCertStore::empty()),
            registries: crate::registry::Registries::default(),
        }
    }
}
