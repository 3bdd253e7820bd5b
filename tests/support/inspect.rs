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
}

pub async fn setup(extra: &[&str]) -> Setup {
    let origin_pki = pki(&[HOST]);
    let origin = tls_origin(&origin_pki).await;
    let dir = tempfile::tempdir().unwrap();
    let upstream_ca = dir.path().join("upstream-ca.pem");
    std::fs::write(&upstream_ca, pem_of(&origin_pki.ca_der)).unwrap();
    let port = origin.port().to_string();
    let gate = gate()
        .data_dir(dir)
        .resolve(HOST, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &port])
        .args(&["--upstream-ca", upstream_ca.to_str().unwrap()])
        .args(extra)
        .start();
    let r = gate.api().open_get("/v1/ca.pem").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/x-pem-file"));
    let ca_pem = r.text();
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    Setup {
        gate,
        origin,
        origin_pki,
        ca_pem,
    }
}

pub async fn add_site(api: &Api, body: serde_json::Value) -> Resp {
    api.post("/v1/admin/sites", ADMIN, body).await
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
