//! Helpers for the inspection tests (tests/inspection*.rs): an inspecting gate in front of a
//! TLS origin it trusts through `--upstream-ca`, clients that trust only given CAs, and one
//! request over a tunnel's TLS.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::*;

pub const HOST: &str = "files.example.com";

/// A client trusting exactly the certificates in `pem` (offering `alpn`).
pub fn client_trusting(pem: &str, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Arc::new(cfg)
}

/// An inspecting gate in front of a TLS origin for [`HOST`] whose CA it trusts through
/// `--upstream-ca`; the origin's own CA PEM is written into the gate's temp dir.
pub struct Setup {
    pub gate: Gate,
    pub origin: Origin,
    pub origin_pki: Pki,
    pub ca_pem: String,
    _upstream: tempfile::TempDir,
}

/// The TLS origin an inspecting gate reaches, with its CA's PEM in a file the gate is told
/// about through `--upstream-ca`.
pub struct Upstream {
    pub pki: Pki,
    pub origin: Origin,
    ca_file: String,
    _dir: tempfile::TempDir,
}

impl Upstream {
    pub async fn start() -> Self {
        let pki = pki(&[HOST]);
        let origin = tls_origin(&pki).await;
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("upstream-ca.pem");
        std::fs::write(&ca_file, pem_of(&pki.ca_der)).unwrap();
        let ca_file = ca_file.to_str().unwrap().to_owned();
        Self {
            pki,
            origin,
            ca_file,
            _dir: dir,
        }
    }

    /// A gate that may reach the origin as [`HOST`] and trusts its CA.
    pub fn gate(&self) -> GateBuilder {
        gate()
            .reach(&self.origin)
            .names(&[HOST])
            .args(&["--upstream-ca", &self.ca_file])
    }
}

pub async fn setup(extra: &[&str]) -> Setup {
    let upstream = Upstream::start().await;
    let gate = upstream.gate().args(extra).start();
    let r = gate.api().open_get("/v1/ca.pem").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/x-pem-file"));
    let ca_pem = r.text();
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    let Upstream {
        pki, origin, _dir, ..
    } = upstream;
    Setup {
        gate,
        origin,
        origin_pki: pki,
        ca_pem,
        _upstream: _dir,
    }
}

pub async fn add_site(api: &Api, body: serde_json::Value) -> Resp {
    api.post("/v1/admin/sites", ADMIN, body).await
}

impl Setup {
    /// [`HOST`] listed as inspected with `access` (201 asserted), and a turn of (`u`, `c`).
    pub async fn inspected_turn(&self, access: &str) -> Turn {
        let site = serde_json::json!({"pattern": HOST, "inspect": true, "access": access});
        self.listed_turn(site).await
    }

    /// `site` added to the administrator's list (201 asserted), and a turn of (`u`, `c`).
    pub async fn listed_turn(&self, site: serde_json::Value) -> Turn {
        let r = add_site(&self.gate.api(), site).await;
        assert_eq!(r.status, 201, "{}", r.text());
        self.gate.turn("u", "c").await
    }

    /// One request (`method path`, with `body`) over an inspected tunnel to [`HOST`].
    pub async fn request(
        &self,
        turn: &Turn,
        client: Arc<rustls::ClientConfig>,
        (method, path, body): (&str, &str, &str),
    ) -> Resp {
        let req = request(method, path, body);
        over_tls(self, turn, client, HOST, &req).await.unwrap()
    }
}

/// `CONNECT`, TLS with `sni` trusting `client`, then one raw HTTP/1.1 request; the response.
pub async fn over_tls(
    s: &Setup,
    turn: &Turn,
    client: Arc<rustls::ClientConfig>,
    sni: &str,
    request: &str,
) -> std::io::Result<Resp> {
    let authority = format!("{HOST}:{}", s.origin.port());
    let (r, stream) = connect(s.gate.proxy(), turn, &authority).await;
    assert_eq!(r.status, 200, "CONNECT: {}", r.text());
    let mut tls = handshake(stream, client, sni).await?;
    tls.write_all(request.as_bytes()).await?;
    read_response(&mut tls).await
}

pub async fn handshake(
    stream: TcpStream,
    client: Arc<rustls::ClientConfig>,
    sni: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).unwrap();
    let connector = tokio_rustls::TlsConnector::from(client);
    tokio::time::timeout(Duration::from_secs(10), connector.connect(name, stream))
        .await
        .map_err(std::io::Error::other)?
}

pub fn request(method: &str, path: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: {HOST}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// An HTTP/2 client over a tunnel's TLS that negotiated `h2` (asserted): its request sender,
/// with the connection driven on its own task.
pub async fn h2_sender<B>(
    tls: tokio_rustls::client::TlsStream<TcpStream>,
) -> hyper::client::conn::http2::SendRequest<B>
where
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "h2 by ALPN"
    );
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    send
}
