//! The proxy's TLS listener configuration from PEM files, so the turn credential never
//! crosses a network in clear.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow};

/// Builds a rustls server config (ring provider) from a PEM chain and key.
pub fn server_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig> {
    let certs = rustls_pemfile::certs(&mut std::io::BufReader::new(
        std::fs::File::open(cert)
            .with_context(|| format!("cannot open --tls-cert {}", cert.display()))?,
    ))
    .collect::<Result<Vec<_>, _>>()
    .with_context(|| format!("invalid PEM in {}", cert.display()))?;
    if certs.is_empty() {
        return Err(anyhow!("no certificate in {}", cert.display()));
    }
    let key = rustls_pemfile::private_key(&mut std::io::BufReader::new(
        std::fs::File::open(key)
            .with_context(|| format!("cannot open --tls-key {}", key.display()))?,
    ))
    .with_context(|| format!("invalid PEM in {}", key.display()))?
    .ok_or_else(|| anyhow!("no private key in {}", key.display()))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("TLS certificate and key do not match")
}
