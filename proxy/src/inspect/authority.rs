//! Leaf certificates for inspected hosts, minted on demand under the deployment CA and kept
//! in memory only: each with its own random serial and key (never the CA's), the Authority
//! Key Identifier, explicit short validity ending no later than the CA, and the host as its
//! only name. A host's `ServerConfig` is minted once however many connections ask at the
//! same moment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use egressgate_store::Host;
use egressgate_store::Timestamp;
use egressgate_store::ca::{DeploymentCa, cert_time, random_serial};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::OnceCell;

use super::InspectError;

/// How long a leaf is valid (from an hour before it was minted, for clock skew).
const LEAF_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// A cached leaf older than this is minted again, long before it expires.
const REMINT_AFTER: Duration = Duration::from_secs(12 * 3600);
/// Hosts kept; past this the cache starts over (leaves are cheap to mint again).
const MAX_CACHED: usize = 10_000;

/// One host's minted configuration.
struct Minted {
    config: Arc<ServerConfig>,
    at: Instant,
}

type Slot = Arc<OnceCell<Minted>>;

/// Mints and caches leaves under the deployment CA.
pub(crate) struct Authority {
    ca: Arc<DeploymentCa>,
    ca_der: CertificateDer<'static>,
    cache: Mutex<HashMap<Host, Slot>>,
}

impl Authority {
    /// The authority of `ca`.
    pub(crate) fn new(ca: Arc<DeploymentCa>) -> Result<Self, InspectError> {
        let ca_der = rustls_pemfile::certs(&mut ca.cert_pem().as_bytes())
            .next()
            .and_then(Result::ok)
            .ok_or(InspectError::Ca(
                "the deployment CA certificate does not parse",
            ))?;
        Ok(Self {
            ca,
            ca_der,
            cache: Mutex::default(),
        })
    }

    /// The certificate (PEM) of the CA it mints under.
    pub(crate) fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The TLS configuration presenting `host`'s leaf (ALPN `h2`, `http/1.1`).
    pub(crate) async fn server_config(
        &self,
        host: &Host,
    ) -> Result<Arc<ServerConfig>, InspectError> {
        let slot = self.slot(host)?;
        let minted = slot.get_or_try_init(|| async { self.mint(host) }).await?;
        Ok(minted.config.clone())
    }

    /// The cell for `host`: the cached one, or a fresh one when there is none or its leaf is
    /// due to be minted again.
    fn slot(&self, host: &Host) -> Result<Slot, InspectError> {
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| InspectError::Ca("leaf cache poisoned"))?;
        if let Some(slot) = cache.get(host)
            && slot.get().is_none_or(|m| m.at.elapsed() < REMINT_AFTER)
        {
            return Ok(slot.clone());
        }
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        let slot = Slot::default();
        cache.insert(host.clone(), slot.clone());
        Ok(slot)
    }

    fn mint(&self, host: &Host) -> Result<Minted, InspectError> {
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host.as_str());
        p.distinguished_name = dn;
        p.subject_alt_names = vec![SanType::DnsName(host.as_str().try_into()?)];
        p.serial_number = Some(random_serial());
        let now = Timestamp::now();
        p.not_before = cert_time(now, -3600)?;
        // Never valid past its CA: the CA's end is when clients stop trusting it.
        p.not_after = cert_time(
            now,
            i64::try_from(LEAF_LIFETIME.as_secs()).unwrap_or(86_400),
        )?
        .min(cert_time(self.ca.not_after(), 0)?);
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.use_authority_key_identifier_extension = true;
        let cert = p.signed_by(&key, &self.ca.issuer())?;
        let chain = vec![cert.der().clone(), self.ca_der.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Minted {
            config: Arc::new(config),
            at: Instant::now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[tokio::test]
    async fn one_leaf_per_host_minted_once_under_load() {
        let ca = DeploymentCa::generate(Timestamp::now(), LEAF_LIFETIME, None)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let auth = Arc::new(Authority::new(Arc::new(ca)).unwrap_or_else(|e| unreachable!("{e}")));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let auth = auth.clone();
            tasks.spawn(async move { auth.server_config(&host("files.example.com")).await });
        }
        let mut configs = Vec::new();
        while let Some(r) = tasks.join_next().await {
            configs.push(
                r.unwrap_or_else(|e| unreachable!("{e}"))
                    .unwrap_or_else(|e| unreachable!("{e}")),
            );
        }
        assert!(
            configs.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])),
            "minted once"
        );
        let other = auth
            .server_config(&host("other.example.com"))
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(
            !Arc::ptr_eq(&configs[0], &other),
            "each host has its own leaf"
        );
    }
}
