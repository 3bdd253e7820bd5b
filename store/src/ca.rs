//! The deployment CA: the one certificate authority every inspected host's leaf is signed by.
//! Its life: made by the proxy when it starts (or by `egressgate ca print`), never by a
//! reader; valid for a lifetime measured in months; replaced by a successor before it ends,
//! when it outlives the lifetime, or when it no longer permits every inspected name; the
//! replaced one stays trusted until its own end or the overlap's, whichever comes first. Kept
//! in a mode-0600 file in the data directory (SQLite) or in the database with its key sealed
//! (PostgreSQL, so every proxy sharing it mints under the same CA). Only the certificate is
//! public; the key never leaves this type except to sign leaves.

mod cert;
mod file;
mod home;
mod names;
mod seal;
mod table;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SerialNumber,
};

pub use home::{CaHome, CaPolicy};
pub use seal::{SealKey, SealKeyError};

use crate::db::StoreError;
use crate::pattern::SitePattern;
use crate::time::Timestamp;

/// The file (in the data directory) that holds the CA certificate and key, mode 0600.
pub const CA_FILE: &str = "ca-key.pem";
/// The file (in the data directory) that lists rotated-out CA certificates, each after a
/// `# trusted-until-ms: N` line (no keys: they are gone).
pub const PREVIOUS_FILE: &str = "ca-previous.pem";

/// Why the CA could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// Nothing has made a CA yet (readers never make one).
    #[error(
        "no deployment CA yet: the proxy makes it when it starts (`egressgate serve` or \
         `egressgate proxy`), as does `egressgate ca print`"
    )]
    Missing,
    /// PostgreSQL keeps the CA's key only sealed, and no seal key was given.
    #[error(
        "the deployment CA's key is kept in PostgreSQL only sealed, and no seal key was given: \
         set EGRESSGATE_CA_SEAL_KEY or --ca-seal-key-file (32 random bytes, base64)"
    )]
    NoSealKey,
    /// An older release left the CA's key in clear in PostgreSQL, and no seal key was given
    /// to seal it with.
    #[error(
        "the deployment CA's key is stored in clear in PostgreSQL (by an older release) and is \
         not used that way: give the seal key (EGRESSGATE_CA_SEAL_KEY or --ca-seal-key-file) \
         and the next start seals it"
    )]
    KeyInClear,
    /// The seal key given does not open the stored key.
    #[error(
        "the seal key given does not open the deployment CA's key (it was sealed with another)"
    )]
    WrongSealKey,
    /// Another process replaced the CA at the same moment.
    #[error("another process replaced the deployment CA at the same moment; nothing was changed")]
    Raced,
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

impl CaError {
    /// Whether the CA is unusable for want of the right seal key (so the process runs without
    /// inspecting rather than not at all).
    pub fn is_sealing(&self) -> bool {
        matches!(
            self,
            Self::NoSealKey | Self::KeyInClear | Self::WrongSealKey
        )
    }
}

/// The deployment CA: its certificate (public) and its signing key.
pub struct DeploymentCa {
    cert_pem: String,
    key: KeyPair,
    not_after: Timestamp,
    names: Option<Vec<SitePattern>>,
}

impl std::fmt::Debug for DeploymentCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentCa")
            .field("cert_pem", &self.cert_pem)
            .field("key", &"<redacted>")
            .field("not_after", &self.not_after)
            .field("names", &self.names)
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
    /// A new CA valid from now for `lifetime`, permitting only `names` when given (its key
    /// generated here, never derived from anything).
    pub fn generate(
        now: Timestamp,
        lifetime: Duration,
        names: Option<&[SitePattern]>,
    ) -> Result<Self, CaError> {
        let key = KeyPair::generate()?;
        let mut p = ca_params();
        p.serial_number = Some(random_serial());
        p.not_before = cert_time(now, -86_400)?;
        p.not_after = cert_time(now, i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX))?;
        p.name_constraints = names.map(names::constraints);
        let cert = p.self_signed(&key)?;
        Self::from_pem(&cert.pem(), &key.serialize_pem())
    }

    /// The CA from its stored PEM parts (its end and names read from the certificate).
    fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CaError> {
        let read = cert::read(cert_pem)?;
        let key = KeyPair::from_pem(key_pem).map_err(|_| CaError::Corrupt("key"))?;
        Ok(Self {
            cert_pem: cert_pem.to_owned(),
            key,
            not_after: read.not_after,
            names: read.names,
        })
    }

    /// The certificate, PEM (public: clients trust it).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// When the CA ends: no leaf it signs may be valid past this.
    pub fn not_after(&self) -> Timestamp {
        self.not_after
    }

    /// The names the CA permits (`None`: any).
    pub fn names(&self) -> Option<&[SitePattern]> {
        self.names.as_deref()
    }

    /// The issuer that signs leaves.
    pub fn issuer(&self) -> rcgen::Issuer<'static, &KeyPair> {
        rcgen::Issuer::new(ca_params(), &self.key)
    }

    /// The CA to sign with now, as [`CaHome::signing`] makes, renews or widens it.
    pub async fn load_or_create(home: &CaHome, now: Timestamp) -> Result<Self, CaError> {
        home.signing(now).await
    }
}
