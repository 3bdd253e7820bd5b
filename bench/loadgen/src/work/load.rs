//! What a measurement is made of: where requests go ([`Target`]), what they ask for
//! ([`Kind`]), the common parameters ([`Load`]), and the table of request workloads.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// One request may take this long (connect, CONNECT, request, answer) before it is an error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where requests go.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    /// `None`: straight to the origin (the physical limit).
    pub proxy: Option<SocketAddr>,
    pub pid: Option<u32>,
    /// `Proxy-Authorization` value (egressgate only).
    pub auth: Option<String>,
    /// The host this target's requests name instead of the load's (the peers get the
    /// origin's IP address, so they resolve nothing).
    pub host: Option<String>,
}

/// What the requests ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Absolute-form GET through the proxy, one connection per request.
    FwdClose,
    /// Absolute-form GETs, many per client connection.
    FwdKeep,
    /// CONNECT, one GET inside, close.
    TunClose,
    /// CONNECT once, many GETs inside.
    TunKeep,
    /// CONNECT to the TLS origin, a TLS 1.3 handshake inside (the certificate verified), one
    /// GET, close. Direct: TCP connect + the same handshake and GET.
    TunTlsClose,
}

impl Kind {
    /// The requests go inside a CONNECT tunnel.
    pub fn tunnel(self) -> bool {
        matches!(self, Kind::TunClose | Kind::TunKeep | Kind::TunTlsClose)
    }
    /// Many requests per client connection.
    pub fn keep(self) -> bool {
        matches!(self, Kind::FwdKeep | Kind::TunKeep)
    }
}

/// The request workloads, in report order.
pub const REQUEST_WORKLOADS: [(u8, Kind, &str); 5] = [
    (
        1,
        Kind::FwdClose,
        "1. forwarded GET, new connection per request (req/s)",
    ),
    (2, Kind::FwdKeep, "2. forwarded GETs, keep-alive (req/s)"),
    (
        3,
        Kind::TunClose,
        "3. CONNECT + one GET + close (tunnels/s)",
    ),
    (
        4,
        Kind::TunKeep,
        "4. keep-alive GETs inside tunnels (req/s)",
    ),
    (
        9,
        Kind::TunTlsClose,
        "9. CONNECT + TLS 1.3 + GET + close (tunnels/s)",
    ),
];

/// Common parameters of one measurement.
#[derive(Clone, Debug)]
pub struct Load {
    pub origin: SocketAddr,
    /// Host name the requests name (the proxies resolve it to the origin).
    pub host: String,
    pub path: String,
    pub conns: usize,
    pub duration: Duration,
    pub max_requests: u64,
    pub expect_status: u16,
    /// The origin's TLS listener, for [`Kind::TunTlsClose`].
    pub tls: Option<TlsLoad>,
}

/// The TLS origin and the client config that trusts its certificate.
#[derive(Clone, Debug)]
pub struct TlsLoad {
    pub origin: SocketAddr,
    pub config: Arc<rustls::ClientConfig>,
}

impl TlsLoad {
    /// A TLS 1.3-only client config that trusts exactly the origin's certificate (DER).
    pub fn new(origin: SocketAddr, cert_der: Vec<u8>) -> io::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(cert_der))
            .map_err(io::Error::other)?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Self {
            origin,
            config: Arc::new(config),
        })
    }
}
