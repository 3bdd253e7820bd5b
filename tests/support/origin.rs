//! Loopback origins (plain HTTP and TLS) that answer every request and record what they saw,
//! and the TLS material (a test CA and leaves) they and the clients use.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::{Resp, read_response};

/// A loopback origin that answers every request with 200 and records what it saw.
pub struct Origin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<String>>>,
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl Origin {
    /// Requests seen (request heads, lower-cased header names kept as sent).
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
    pub fn connection_count(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Starts a plain HTTP origin on 127.0.0.1:0 that answers `origin says hi` to every request.
pub async fn origin() -> Origin {
    origin_at("127.0.0.1:0").await
}

async fn serve_origin<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, seen: Arc<Mutex<Vec<String>>>) {
    loop {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(1) => buf.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let len = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if s.read_exact(&mut body).await.is_err() {
            return;
        }
        seen.lock().unwrap().push(head);
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 14\r\ncontent-type: text/plain\r\n\r\norigin says hi";
        if s.write_all(reply).await.is_err() {
            return;
        }
    }
}

/// TLS material: a CA and a leaf for the given names.
pub struct Pki {
    pub ca_der: rustls::pki_types::CertificateDer<'static>,
    pub server: Arc<rustls::ServerConfig>,
    /// The server's certificate and key as PEM, for servers outside this process (the SMTP
    /// receiver of tests/email.rs).
    pub leaf_pem: String,
    pub key_pem: String,
}

pub fn pki(names: &[&str]) -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "egressgate test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    Pki {
        ca_der: ca.der().clone(),
        server: Arc::new(server),
        leaf_pem: leaf.pem(),
        key_pem: leaf_key.serialize_pem(),
    }
}

/// PEM text of a DER certificate (for `--upstream-ca`, `--cert` and CA bundle files).
pub fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

impl Pki {
    /// This CA's certificate as PEM.
    pub fn ca_pem(&self) -> String {
        pem_of(&self.ca_der)
    }

    /// A client config trusting this CA.
    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    /// Writes the leaf cert and key as PEM files (for the proxy's own TLS listener).
    pub fn write_pem(
        names: &[&str],
        dir: &std::path::Path,
    ) -> (
        std::path::PathBuf,
        std::path::PathBuf,
        rustls::pki_types::CertificateDer<'static>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .self_signed(&key)
                .unwrap();
        let c = dir.join("proxy.crt");
        let k = dir.join("proxy.key");
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k, cert.der().clone())
    }
}

/// Starts a TLS origin; it answers like [`origin`] inside TLS.
pub async fn tls_origin(pki: &Pki) -> Origin {
    tls_origin_at(pki, "127.0.0.1:0").await
}

/// TLS handshake through an open tunnel with the given SNI, then `GET /`.
pub async fn tls_get(
    stream: TcpStream,
    client: Arc<rustls::ClientConfig>,
    sni: &str,
) -> std::io::Result<Resp> {
    let connector = tokio_rustls::TlsConnector::from(client);
    let name =
        rustls::pki_types::ServerName::try_from(sni.to_owned()).map_err(std::io::Error::other)?;
    let mut tls = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, stream))
        .await
        .map_err(std::io::Error::other)??;
    tls.write_all(format!("GET / HTTP/1.1\r\nhost: {sni}\r\n\r\n").as_bytes())
        .await?;
    read_response(&mut tls).await
}

/// Starts a plain HTTP origin like [`origin`] on a given address (e.g. `127.0.0.1:443`).
pub async fn origin_at(addr: &str) -> Origin {
    serve_on(addr, "origin", serve_origin).await
}

/// Starts a TLS origin like [`tls_origin`] on a given address (e.g. `127.0.0.1:443`).
pub async fn tls_origin_at(pki: &Pki, addr: &str) -> Origin {
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    serve_on(addr, "TLS origin", move |s, seen| {
        let acceptor = acceptor.clone();
        async move {
            if let Ok(tls) = acceptor.accept(s).await {
                serve_origin(tls, seen).await;
            }
        }
    })
    .await
}

/// Listens on `addr` and serves every connection with `serve`, counting connections.
async fn serve_on<F, Fut>(addr: &str, what: &str, serve: F) -> Origin
where
    F: Fn(TcpStream, Arc<Mutex<Vec<String>>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("bind {what} {addr}: {e}"));
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (seen2, conns2) = (seen.clone(), connections.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            conns2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(serve(s, seen2.clone()));
        }
    });
    Origin {
        addr,
        seen,
        connections,
    }
}
