//! The deployment CA: the one certificate authority every inspected host's leaf is signed by.
//! Generated on first use; kept in a mode-0600 file in the data directory (SQLite) or in the
//! database (PostgreSQL, so every proxy sharing it mints under the same CA). Only the
//! certificate is public; the key never leaves this type except to sign leaves.

mod file;
mod table;

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SerialNumber,
};

use crate::db::{Store, StoreError};
use crate::time::Timestamp;

/// The file (in the data directory) that holds the CA certificate and key, mode 0600.
pub const CA_FILE: &str = "ca-key.pem";
/// The file (in the data directory) that lists rotated-out CA certificates, each after a
/// `# trusted-until-ms: N` line (no keys: they are gone).
pub const PREVIOUS_FILE: &str = "ca-previous.pem";

/// How long a deployment CA is valid for.
const CA_LIFETIME_DAYS: i64 = 3650;

/// Why the CA could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The CA file could not be read or written.
    #[error("deployment CA file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The stored CA does not parse.
    #[error("the stored deployment CA is unreadable: {0}")]
    Corrupt(&'static str),
    /// Generating or signing failed.
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    /// The database could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where the CA is kept.
#[derive(Clone, Debug)]
pub enum CaHome {
    /// A mode-0600 file in this (data) directory.
    Dir(PathBuf),
    /// The `deployment_ca` table (PostgreSQL).
    Database(Store),
}

/// The deployment CA: its certificate (public) and its signing key.
pub struct DeploymentCa {
    cert_pem: String,
    key: KeyPair,
}

impl std::fmt::Debug for DeploymentCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentCa")
            .field("cert_pem", &self.cert_pem)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// The CA's fixed subject and usages: leaves name it as their issuer, so an issuer rebuilt from
/// these parameters and the stored key signs exactly like the stored certificate.
fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "egressgate deployment CA");
    dn.push(DnType::OrganizationName, "egressgate");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

/// A random positive serial (the top bit cleared), as every certificate needs its own.
pub fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// `now` as a certificate time, moved by `secs`.
pub fn cert_time(now: Timestamp, secs: i64) -> Result<time::OffsetDateTime, CaError> {
    time::OffsetDateTime::from_unix_timestamp(now.millis() / 1000 + secs)
        .map_err(|_| CaError::Corrupt("time out of range"))
}

impl DeploymentCa {
    /// A new CA (its key generated here, never derived from anything).
    pub fn generate(now: Timestamp) -> Result<Self, CaError> {
        let key = KeyPair::generate()?;
        let mut p = ca_params();
        p.serial_number = Some(random_serial());
        p.not_before = cert_time(now, -86_400)?;
        p.not_after = cert_time(now, CA_LIFETIME_DAYS * 86_400)?;
        let cert = p.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            key,
        })
    }

    /// The CA from its stored PEM parts.
    fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CaError> {
        if !cert_pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(CaError::Corrupt("no certificate"));
        }
        let key = KeyPair::from_pem(key_pem).map_err(|_| CaError::Corrupt("key"))?;
        Ok(Self {
            cert_pem: cert_pem.to_owned(),
            key,
        })
    }

    /// The certificate, PEM (public: clients trust it).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The issuer that signs leaves.
    pub fn issuer(&self) -> rcgen::Issuer<'static, &KeyPair> {
        rcgen::Issuer::new(ca_params(), &self.key)
    }

    /// Reads the CA kept at `home`, making and keeping one first when there is none. Two
    /// processes starting at once end up with the same CA: the first write wins and the
    /// other reads it.
    pub async fn load_or_create(home: &CaHome, now: Timestamp) -> Result<Self, CaError> {
        match home {
            CaHome::Dir(dir) => file::load_or_create(&dir.join(CA_FILE), now),
            CaHome::Database(store) => table::load_or_create(store, now).await,
        }
    }
}

impl CaHome {
    /// The certificates clients should trust now, PEM: the signing CA first, then each
    /// rotated-out CA whose overlap has not ended (leaves it signed may still be in use).
    pub async fn trusted_pem(&self, now: Timestamp) -> Result<String, CaError> {
        let current = DeploymentCa::load_or_create(self, now).await?;
        let mut out = current.cert_pem;
        for (cert, until) in self.previous().await? {
            if until > now.millis() {
                out.push_str(&cert);
            }
        }
        Ok(out)
    }

    /// Starts a new CA: the current one stops signing and stays trusted until
    /// `now + overlap`, which is returned. Proxies pick the new one up within their CA poll.
    pub async fn rotate(&self, now: Timestamp, overlap_ms: i64) -> Result<Timestamp, CaError> {
        let until = now.millis().saturating_add(overlap_ms);
        let old = DeploymentCa::load_or_create(self, now).await?;
        let fresh = DeploymentCa::generate(now)?;
        match self {
            CaHome::Dir(dir) => file::rotate(dir, &old, &fresh, until, now)?,
            CaHome::Database(store) => table::rotate(store, &fresh, until, now).await?,
        }
        Ok(Timestamp::from_millis(until))
    }

    /// Rotated-out certificates with the end of their trust (ms).
    async fn previous(&self) -> Result<Vec<(String, i64)>, CaError> {
        match self {
            CaHome::Dir(dir) => file::previous(dir),
            CaHome::Database(store) => table::previous(store).await,
        }
    }
}
