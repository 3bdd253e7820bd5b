//! TLS inspection for chosen hosts: the proxy ends the client's TLS with a leaf minted under
//! the deployment CA (`authority`), serves each decrypted request through the same forwarding
//! path as plain HTTP (so per-request rules apply to both), and reaches the origin over TLS
//! verified against the system roots plus `--upstream-ca` (`upstream`). Every other host stays
//! an opaque tunnel.

mod authority;
mod upstream;

use std::sync::{Arc, RwLock};

use egressgate_store::ca::{CaError, DeploymentCa};
use egressgate_store::{Grant, GrantKind, Host, SitePattern};
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

pub use upstream::roots;

pub(crate) use upstream::Upstream;

/// Why inspection could not be set up or a leaf not minted.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The deployment CA is unusable.
    #[error("deployment CA: {0}")]
    Ca(&'static str),
    /// Reading the CA failed.
    #[error(transparent)]
    Store(#[from] CaError),
    /// Minting a leaf failed.
    #[error("leaf certificate: {0}")]
    Mint(#[from] rcgen::Error),
    /// rustls refused a configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// `--upstream-ca` is unreadable.
    #[error("--upstream-ca {path}: {why}")]
    UpstreamCa {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// What the proxy needs to inspect: which hosts, the CA that signs their leaves, and the
/// verifying connector toward their origins.
pub(crate) struct Inspection {
    /// Deployment-wide inspected patterns (`--inspect`).
    patterns: Vec<SitePattern>,
    /// `None`: no CA was given, so nothing is inspected (a `read` grant then refuses what it
    /// cannot see, as for any non-inspected host). Swapped whole when the CA is rotated.
    authority: RwLock<Option<Arc<authority::Authority>>>,
    /// Toward the origins.
    pub(crate) upstream: Upstream,
}

impl Inspection {
    /// Builds it from the settings.
    pub(crate) fn new(
        patterns: Vec<SitePattern>,
        ca: Option<Arc<DeploymentCa>>,
        roots: Arc<rustls::RootCertStore>,
    ) -> Result<Self, InspectError> {
        let authority = ca.map(authority::Authority::new).transpose()?.map(Arc::new);
        Ok(Self {
            patterns,
            authority: RwLock::new(authority),
            upstream: Upstream::new(roots)?,
        })
    }

    fn current(&self) -> Option<Arc<authority::Authority>> {
        self.authority.read().ok().and_then(|a| a.clone())
    }

    /// Mints under `ca` from now on when it is not the CA already in use (after a rotation);
    /// leaves minted under the old one are dropped with it. `true` when it changed.
    pub(crate) fn adopt(&self, ca: DeploymentCa) -> Result<bool, InspectError> {
        if self.current().is_some_and(|a| a.ca_pem() == ca.cert_pem()) {
            return Ok(false);
        }
        let fresh = Arc::new(authority::Authority::new(Arc::new(ca))?);
        let mut slot = self
            .authority
            .write()
            .map_err(|_| InspectError::Ca("authority lock poisoned"))?;
        *slot = Some(fresh);
        Ok(true)
    }

    /// Whether requests to `host`, allowed by `grant`, are inspected: a package registry's
    /// host (its requests are judged package by package), an administrators' entry marked
    /// `inspect`, or a deployment-wide `--inspect` pattern; and a CA to mint with.
    pub(crate) fn wants(&self, host: &Host, grant: &Grant) -> bool {
        let chosen = grant.kind == GrantKind::Registry
            || grant.inspect
            || self.patterns.iter().any(|p| p.matches(host));
        chosen && self.current().is_some()
    }

    /// Ends the client's TLS (whose ClientHello already named `host`) with `host`'s leaf.
    pub(crate) async fn accept<C>(&self, host: &Host, client: C) -> std::io::Result<TlsStream<C>>
    where
        C: AsyncRead + AsyncWrite + Unpin,
    {
        let config = self.server_config(host).await?;
        TlsAcceptor::from(config).accept(client).await
    }

    /// Ends the client's TLS with `host`'s leaf (the same cached one) offering HTTP/1.1 only:
    /// for a refusal shown inside TLS, whose reason phrase only HTTP/1.1 carries.
    pub(crate) async fn accept_http1<C>(
        &self,
        host: &Host,
        client: C,
    ) -> std::io::Result<TlsStream<C>>
    where
        C: AsyncRead + AsyncWrite + Unpin,
    {
        let mut config = ServerConfig::clone(&*self.server_config(host).await?);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsAcceptor::from(Arc::new(config)).accept(client).await
    }

    async fn server_config(&self, host: &Host) -> std::io::Result<Arc<ServerConfig>> {
        let authority = self
            .current()
            .ok_or_else(|| std::io::Error::other("no deployment CA"))?;
        authority
            .server_config(host)
            .await
            .map_err(std::io::Error::other)
    }
}
