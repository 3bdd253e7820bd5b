//! Dialling safely: resolve once (static `--resolve` answers first, then DNS), vet every
//! answer, and connect only to the vetted addresses. Never resolve twice, never reverse-resolve.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use egressgate_store::Host;
use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use tokio::net::TcpStream;

use crate::addr::{is_public_unicast, net_contains};
use crate::settings::AllowedRange;

/// Why a destination cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The name did not resolve (502, not a refusal).
    #[error("{host} did not resolve")]
    NoAnswer {
        /// The name.
        host: Host,
    },
    /// An answer pointed somewhere the gate must not go (a refusal: `private_address`).
    #[error("{host} resolves to {addr}, which is not a public address")]
    Private {
        /// The name.
        host: Host,
        /// The offending address.
        addr: IpAddr,
    },
    /// DNS or connect took too long (504).
    #[error("timed out reaching {host}")]
    Timeout {
        /// The name.
        host: Host,
    },
    /// Every vetted address refused the connection (502).
    #[error("could not connect to {host}: {source}")]
    Connect {
        /// The name.
        host: Host,
        /// The last connect error.
        source: std::io::Error,
    },
}

/// Resolution and address policy, shared by every connection.
pub struct Dialer {
    resolver: Option<TokioResolver>,
    statics: HashMap<Host, Vec<IpAddr>>,
    allowed: Vec<AllowedRange>,
    forbidden: Vec<SocketAddr>,
    timeout: Duration,
}

impl Dialer {
    /// Builds a dialer over the configured upstream DNS servers, or the system's
    /// (`/etc/resolv.conf`) when none are configured. When neither is available only static
    /// answers work (failing closed rather than falling back to a public DNS server).
    pub fn new(
        statics: HashMap<Host, Vec<IpAddr>>,
        allowed: Vec<AllowedRange>,
        forbidden: Vec<SocketAddr>,
        dns_servers: &[SocketAddr],
        timeout: Duration,
    ) -> Self {
        let builder = if dns_servers.is_empty() {
            TokioResolver::builder_tokio()
        } else {
            let servers = dns_servers
                .iter()
                .map(|s| {
                    let mut ns = NameServerConfig::udp_and_tcp(s.ip());
                    for c in &mut ns.connections {
                        c.port = s.port();
                    }
                    ns
                })
                .collect();
            Ok(TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            ))
        };
        let resolver = match builder {
            Ok(mut b) => {
                let opts = b.options_mut();
                opts.timeout = timeout.min(Duration::from_secs(5));
                opts.attempts = 2;
                opts.use_hosts_file = hickory_resolver::config::ResolveHosts::Never;
                b.build().ok()
            }
            Err(e) => {
                tracing::warn!(error = %e, "no system DNS configuration; only --resolve entries will resolve");
                None
            }
        };
        Self {
            resolver,
            statics,
            allowed,
            forbidden,
            timeout,
        }
    }

    /// Resolves `host` and vets every answer: all must be public unicast or inside an allowed
    /// range (a `CIDR=PATTERN` range only for hosts matching its pattern), and none may be one
    /// of the gate's own endpoints. One bad answer refuses the whole name, so a rebinding
    /// answer set cannot smuggle an inside address past the check.
    pub async fn resolve_vetted(
        &self,
        host: &Host,
        port: u16,
    ) -> Result<Vec<SocketAddr>, DialError> {
        let ips = match self.statics.get(host) {
            Some(ips) => ips.clone(),
            None => self.lookup(host).await?,
        };
        if ips.is_empty() {
            return Err(DialError::NoAnswer { host: host.clone() });
        }
        for &ip in &ips {
            if !self.address_allowed(host, ip, port) {
                return Err(DialError::Private {
                    host: host.clone(),
                    addr: ip,
                });
            }
        }
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }

    async fn lookup(&self, host: &Host) -> Result<Vec<IpAddr>, DialError> {
        let Some(resolver) = &self.resolver else {
            return Err(DialError::NoAnswer { host: host.clone() });
        };
        // Fully qualified, so resolv.conf search domains can never turn a public name into
        // an internal one.
        let fqdn = format!("{host}.");
        match tokio::time::timeout(self.timeout, resolver.lookup_ip(fqdn.as_str())).await {
            Err(_) => Err(DialError::Timeout { host: host.clone() }),
            Ok(Err(_)) => Err(DialError::NoAnswer { host: host.clone() }),
            Ok(Ok(answer)) => Ok(answer.iter().collect()),
        }
    }

    fn address_allowed(&self, host: &Host, ip: IpAddr, port: u16) -> bool {
        let canonical = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        if self.is_forbidden(SocketAddr::new(canonical, port)) {
            return false;
        }
        is_public_unicast(ip)
            || self.allowed.iter().any(|r| {
                net_contains(&r.net, ip) && r.only_for.as_ref().is_none_or(|p| p.matches(host))
            })
    }

    fn is_forbidden(&self, target: SocketAddr) -> bool {
        self.forbidden.iter().any(|f| {
            f.port() == target.port() && (f.ip() == target.ip() || f.ip().is_unspecified())
        })
    }

    /// Connects to the first vetted address that answers, within the connect timeout.
    pub async fn connect(&self, host: &Host, addrs: &[SocketAddr]) -> Result<TcpStream, DialError> {
        let attempt = async {
            let mut last = None;
            for addr in addrs {
                match TcpStream::connect(addr).await {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        return Ok(s);
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(DialError::Connect {
                host: host.clone(),
                source: last.unwrap_or_else(|| std::io::Error::other("no address")),
            })
        };
        tokio::time::timeout(self.timeout, attempt)
            .await
            .unwrap_or_else(|_| Err(DialError::Timeout { host: host.clone() }))
    }
}
