//! The loopback origin: HTTP/1.1 keep-alive server with a small answer (`/small`) and a bulk
//! endpoint (`/bulk?mib=N`) that streams N MiB of zeros with a content-length; the same over
//! TLS 1.3 on a second listener, with a fresh rcgen certificate for the benchmark host.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The small answer's body (the same bytes for every target).
pub const SMALL_BODY: &[u8] = b"hello from the bench origin\n";

/// Largest bulk body the origin serves (bounds a mistaken request).
const MAX_BULK_MIB: u64 = 4096;

const CHUNK: usize = 256 * 1024;

/// A body of `left` zero bytes, sent in 256 KiB frames sharing one buffer.
struct Bulk {
    left: u64,
    chunk: Bytes,
}

impl Body for Bulk {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = usize::try_from(self.left.min(CHUNK as u64)).unwrap_or(CHUNK);
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

type OriginBody = BoxBody<Bytes, Infallible>;

fn answer(req: &Request<Incoming>, chunk: &Bytes) -> Response<OriginBody> {
    let path = req.uri().path();
    if path == "/small" {
        let mut r = Response::new(Full::new(Bytes::from_static(SMALL_BODY)).boxed());
        r.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("text/plain"),
        );
        return r;
    }
    if path == "/bulk" {
        let mib = req
            .uri()
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("mib=")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1)
            .min(MAX_BULK_MIB);
        let mut r = Response::new(
            Bulk {
                left: mib << 20,
                chunk: chunk.clone(),
            }
            .boxed(),
        );
        r.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("application/octet-stream"),
        );
        return r;
    }
    let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")).boxed());
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

/// Where the origin also serves TLS.
pub struct TlsOrigin {
    pub listen: SocketAddr,
    /// The certificate's names (what clients verify; `*.suffix` for every name below it).
    pub names: Vec<String>,
    /// The self-signed certificate (DER) is written here for the clients to trust.
    pub cert_out: std::path::PathBuf,
    /// The same certificate in PEM, for egressgate's `--upstream-ca` (inspected hosts).
    pub pem_out: Option<std::path::PathBuf>,
}

/// A TLS 1.3-only server config with a fresh self-signed certificate for `tls.names`, whose
/// DER is written to `tls.cert_out` (and PEM to `tls.pem_out`).
fn tls_config(tls: &TlsOrigin) -> std::io::Result<rustls::ServerConfig> {
    let key =
        rcgen::generate_simple_self_signed(tls.names.clone()).map_err(std::io::Error::other)?;
    let der = key.cert.der().clone();
    std::fs::write(&tls.cert_out, der.as_ref())?;
    if let Some(pem) = &tls.pem_out {
        std::fs::write(pem, pem_certificate(der.as_ref()))?;
    }
    let pkcs8 = rustls::pki_types::PrivatePkcs8KeyDer::from(key.signing_key.serialize_der());
    rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .map_err(std::io::Error::other)?
    .with_no_client_auth()
    .with_single_cert(vec![der], pkcs8.into())
    .map_err(std::io::Error::other)
}

/// A DER certificate as one PEM block (64 base64 characters a line).
fn pem_certificate(der: &[u8]) -> String {
    let b64 = crate::control::base64(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Serves forever on `listen` (and on `tls.listen` over TLS; loopback only); prints
/// `origin listening addr=…` (and `origin tls listening addr=…`) on stderr.
pub async fn serve(listen: SocketAddr, tls: Option<TlsOrigin>) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    eprintln!("origin listening addr={}", listener.local_addr()?);
    let chunk = Bytes::from(vec![0u8; CHUNK]);
    if let Some(tls) = tls {
        let cfg = tls_config(&tls)?;
        let tls_listener = TcpListener::bind(tls.listen).await?;
        eprintln!("origin tls listening addr={}", tls_listener.local_addr()?);
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(cfg));
        tokio::spawn(accept_loop(tls_listener, Some(acceptor), chunk.clone()));
    }
    accept_loop(listener, None, chunk).await;
    Ok(())
}

async fn accept_loop(listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>, chunk: Bytes) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                eprintln!("origin accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let chunk = chunk.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let r = answer(&req, &chunk);
                async move { Ok::<_, Infallible>(r) }
            });
            let http = http1::Builder::new();
            let _ = match tls {
                None => http.serve_connection(TokioIo::new(stream), svc).await,
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(s) => http.serve_connection(TokioIo::new(s), svc).await,
                    Err(_) => Ok(()),
                },
            };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// The origin's certificate verifies for its names (a wildcard's too), and only for them:
    /// the TLS workloads' client really checks what it talks to.
    #[tokio::test]
    async fn the_client_verifies_the_origin_certificate() {
        let dir = std::env::temp_dir().join(format!("loadgen-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = dir.join("origin.der");
        let pem = dir.join("origin.pem");
        let server = tls_config(&TlsOrigin {
            listen: "127.0.0.1:0".parse().unwrap(),
            names: vec![
                "bench.example.com".into(),
                "*.inspect.bench.example.com".into(),
            ],
            cert_out: cert.clone(),
            pem_out: Some(pem.clone()),
        })
        .unwrap();
        assert!(
            std::fs::read_to_string(&pem)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                if let Ok(mut tls) = acceptor.accept(s).await {
                    let _ = tls.write_all(b"hi").await;
                    let _ = tls.shutdown().await;
                }
            }
        });
        let load = crate::work::TlsLoad::new(addr, std::fs::read(&cert).unwrap()).unwrap();
        let connect = |name: &'static str| {
            let cfg = load.config.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                let name =
                    rustls::pki_types::ServerName::try_from(name).map_err(std::io::Error::other)?;
                let mut tls = tokio_rustls::TlsConnector::from(cfg)
                    .connect(name, tcp)
                    .await?;
                let mut got = Vec::new();
                tls.read_to_end(&mut got).await?;
                Ok::<_, std::io::Error>(got)
            }
        };
        assert_eq!(connect("bench.example.com").await.unwrap(), b"hi");
        assert_eq!(
            connect("m1.inspect.bench.example.com").await.unwrap(),
            b"hi"
        );
        for wrong in ["other.example.com", "a.b.inspect.bench.example.com"] {
            assert!(
                connect(wrong).await.is_err(),
                "a certificate for another name must be refused: {wrong}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_that_is_no_certificate_is_a_clear_error() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let err = crate::work::TlsLoad::new(addr, b"not a certificate".to_vec()).unwrap_err();
        assert!(!err.to_string().is_empty());
    }
}
