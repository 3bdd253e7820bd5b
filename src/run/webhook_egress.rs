//! The way out for webhook deliveries: the proxy's own resolver and address rules (static
//! `--resolve` answers, `--dns-server`, public addresses only unless `--allow-cidr` allows a
//! range, never the gate's own listeners or database) and TLS verified against the proxy's
//! upstream roots. So the control plane reaches exactly what the proxy would, no more.

use std::sync::Arc;

use egressgate_control::notify::{Conn, Egress};
use egressgate_proxy::dial::Dialer;
use egressgate_store::Host;
use futures_util::future::BoxFuture;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// [`Egress`] over a [`Dialer`] built from the proxy settings.
pub(super) struct WebhookEgress {
    dialer: Dialer,
    tls: TlsConnector,
}

impl WebhookEgress {
    /// From the deployment's proxy settings (with its forbidden addresses already filled in).
    pub(super) fn new(proxy: &egressgate_proxy::Settings) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(proxy.upstream_roots.clone())
            .with_no_client_auth();
        Ok(Self {
            dialer: Dialer::new(
                proxy.resolve.clone(),
                proxy.allow_cidrs.clone(),
                proxy.forbidden_addrs.clone(),
                &proxy.dns_servers,
                proxy.connect_timeout,
            ),
            tls: TlsConnector::from(Arc::new(config)),
        })
    }
}

impl Egress for WebhookEgress {
    fn vet<'a>(&'a self, host: &'a Host, port: u16) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.dialer
                .resolve_vetted(host, port)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    fn connect<'a>(
        &'a self,
        host: &'a Host,
        port: u16,
        tls: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Conn>, String>> {
        Box::pin(async move {
            let addrs = self
                .dialer
                .resolve_vetted(host, port)
                .await
                .map_err(|e| e.to_string())?;
            let tcp = self
                .dialer
                .connect(host, &addrs)
                .await
                .map_err(|e| e.to_string())?;
            if !tls {
                return Ok(Box::new(tcp) as Box<dyn Conn>);
            }
            let name = ServerName::try_from(host.as_str().to_owned()).map_err(|e| e.to_string())?;
            let stream = self
                .tls
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            Ok(Box::new(stream) as Box<dyn Conn>)
        })
    }
}
