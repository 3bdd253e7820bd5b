//! The origin side of an inspected host: rustls verifying the origin's certificate against the
//! system roots plus `--upstream-ca`. A failed verification is an error, never a downgrade.

use std::path::Path;
use std::sync::Arc;

use egressgate_store::Host;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::InspectError;

/// Where the system's trust bundle is kept, first found wins (Debian/Ubuntu/Alpine, Fedora/RHEL,
/// openSUSE, macOS/BSD). `SSL_CERT_FILE` is read before these.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The roots origins are verified against: the system bundle (if any; an unparseable entry of
/// it is skipped) plus every certificate in `extra` (`--upstream-ca`; any error there is fatal).
pub fn roots(extra: Option<&Path>) -> Result<RootCertStore, InspectError> {
    let mut store = RootCertStore::empty();
    let env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    let system = env
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(Into::into))
        .find(|p| p.is_file());
    if let Some(path) = system
        && let Ok(text) = std::fs::read(&path)
    {
        let mut reader = text.as_slice();
        let certs: Vec<_> = rustls_pemfile::certs(&mut reader)
            .filter_map(Result::ok)
            .collect();
        store.add_parsable_certificates(certs);
    }
    if let Some(path) = extra {
        let text = std::fs::read(path).map_err(|e| InspectError::UpstreamCa {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        let bad = |why: String| InspectError::UpstreamCa {
            path: path.display().to_string(),
            why,
        };
        let certs = rustls_pemfile::certs(&mut text.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no PEM certificate in it".into()));
        }
        for c in certs {
            store.add(c).map_err(|e| bad(e.to_string()))?;
        }
    }
    Ok(store)
}

/// Connects TLS to origins with verification on.
pub(crate) struct Upstream {
    connector: TlsConnector,
}

impl Upstream {
    /// A connector trusting `roots` (ALPN `http/1.1`).
    pub(crate) fn new(roots: Arc<RootCertStore>) -> Result<Self, InspectError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// The TLS handshake with `host`'s origin over `tcp`; no request byte is written before
    /// the origin's certificate verified.
    pub(crate) async fn connect(
        &self,
        host: &Host,
        tcp: TcpStream,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let name = ServerName::try_from(host.as_str().to_owned())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        self.connector.connect(name, tcp).await
    }
}
