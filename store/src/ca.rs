//! The deployment CA: the one certificate authority every inspected host's leaf is signed by.
//! Generated on first use; kept in a mode-0600 file in the data directory (SQLite) or in the
//! database (PostgreSQL, so every proxy sharing it mints under the same CA). Only the
//! certificate is public; the key never leaves this type except to sign leaves.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use sqlx::Row as _;

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

/// `now` as a certificate time, moved by `days`.
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
            CaHome::Dir(dir) => load_or_create_file(&dir.join(CA_FILE), now),
            CaHome::Database(store) => {
                if let Some(ca) = load_row(store).await? {
                    return Ok(ca);
                }
                let fresh = Self::generate(now)?;
                // Id 1 only ever for the first CA: two processes starting on an empty
                // table race for the same row, and the loser reads the winner's.
                sqlx::query(
                    "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) \
                     VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING",
                )
                .bind(&fresh.cert_pem)
                .bind(fresh.key.serialize_pem())
                .bind(now.millis())
                .execute(store.pool())
                .await
                .map_err(StoreError::from)?;
                load_row(store)
                    .await?
                    .ok_or(CaError::Corrupt("missing row"))
            }
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
            CaHome::Dir(dir) => {
                let mut kept: String = self
                    .previous()
                    .await?
                    .into_iter()
                    .filter(|(_, u)| *u > now.millis())
                    .map(|(cert, u)| format!("# trusted-until-ms: {u}\n{cert}"))
                    .collect();
                kept.push_str(&format!("# trusted-until-ms: {until}\n{}", old.cert_pem));
                replace_file(&dir.join(PREVIOUS_FILE), &kept)?;
                let text = format!("{}{}", fresh.cert_pem, fresh.key.serialize_pem());
                replace_file(&dir.join(CA_FILE), &text)?;
            }
            CaHome::Database(store) => {
                let mut tx = store.begin().await?;
                sqlx::query(
                    "UPDATE deployment_ca SET trusted_until = $1 WHERE trusted_until IS NULL",
                )
                .bind(until)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from)?;
                sqlx::query(
                    "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) \
                     SELECT COALESCE(MAX(id), 0) + 1, $1, $2, $3 FROM deployment_ca",
                )
                .bind(&fresh.cert_pem)
                .bind(fresh.key.serialize_pem())
                .bind(now.millis())
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from)?;
                tx.commit().await.map_err(StoreError::from)?;
            }
        }
        Ok(Timestamp::from_millis(until))
    }

    /// Rotated-out certificates with the end of their trust (ms).
    async fn previous(&self) -> Result<Vec<(String, i64)>, CaError> {
        match self {
            CaHome::Dir(dir) => {
                let path = dir.join(PREVIOUS_FILE);
                let text = match std::fs::read_to_string(&path) {
                    Ok(t) => t,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(source) => return Err(CaError::File { path, source }),
                };
                parse_previous(&text)
            }
            CaHome::Database(store) => {
                let rows = sqlx::query(
                    "SELECT cert_pem, trusted_until FROM deployment_ca \
                     WHERE trusted_until IS NOT NULL ORDER BY id DESC",
                )
                .fetch_all(store.pool())
                .await
                .map_err(StoreError::from)?;
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.try_get::<String, _>(0).map_err(StoreError::from)?,
                            r.try_get::<i64, _>(1).map_err(StoreError::from)?,
                        ))
                    })
                    .collect()
            }
        }
    }
}

/// Parses [`PREVIOUS_FILE`].
fn parse_previous(text: &str) -> Result<Vec<(String, i64)>, CaError> {
    let end = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    for block in text.split_inclusive(end).filter(|b| b.contains(end)) {
        let block = block.trim_start();
        let (marker, cert) = block
            .split_once('\n')
            .ok_or(CaError::Corrupt("previous CA list"))?;
        let until = marker
            .strip_prefix("# trusted-until-ms: ")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .ok_or(CaError::Corrupt("previous CA list"))?;
        out.push((format!("{}\n", cert.trim_end()), until));
    }
    Ok(out)
}

/// Replaces `path` with `text` at once (a private temporary file renamed over it).
fn replace_file(path: &Path, text: &str) -> Result<(), CaError> {
    let file_err = |source| CaError::File {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let (tmp, mut f) = tempfile_in(dir).map_err(file_err)?;
    let written = f
        .write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(file_err)
}

async fn load_row(store: &Store) -> Result<Option<DeploymentCa>, CaError> {
    let row = sqlx::query(
        "SELECT cert_pem, key_pem FROM deployment_ca WHERE trusted_until IS NULL \
         ORDER BY id DESC LIMIT 1",
    )
    .fetch_optional(store.pool())
    .await
    .map_err(StoreError::from)?;
    match row {
        None => Ok(None),
        Some(r) => {
            let cert: String = r.try_get(0).map_err(StoreError::from)?;
            let key: String = r.try_get(1).map_err(StoreError::from)?;
            DeploymentCa::from_pem(&cert, &key).map(Some)
        }
    }
}

/// The file holds the certificate then the key. A new one is written to a private temporary
/// file and linked into place, so a reader never sees half a file and a second writer loses
/// to the first.
fn load_or_create_file(path: &Path, now: Timestamp) -> Result<DeploymentCa, CaError> {
    let file_err = |source| CaError::File {
        path: path.to_owned(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => return parse_file(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(file_err(e)),
    }
    let fresh = DeploymentCa::generate(now)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile_in(dir).map_err(file_err)?;
    let text = format!("{}{}", fresh.cert_pem, fresh.key.serialize_pem());
    tmp.1.write_all(text.as_bytes()).map_err(file_err)?;
    tmp.1.sync_all().map_err(file_err)?;
    let linked = std::fs::hard_link(&tmp.0, path);
    let _ = std::fs::remove_file(&tmp.0);
    match linked {
        Ok(()) => Ok(fresh),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            parse_file(&std::fs::read_to_string(path).map_err(file_err)?)
        }
        Err(e) => Err(file_err(e)),
    }
}

/// A new file only this user can read, with a random name next to the CA file.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let name = format!(".ca-{}.tmp", hex::encode(rand::random::<[u8; 8]>()));
    let path = dir.join(name);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    Ok((path, f))
}

fn parse_file(text: &str) -> Result<DeploymentCa, CaError> {
    let end = "-----END CERTIFICATE-----";
    let at = text.find(end).ok_or(CaError::Corrupt("no certificate"))? + end.len();
    let (cert, key) = text.split_at(at);
    DeploymentCa::from_pem(&format!("{cert}\n"), key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[tokio::test]
    async fn a_file_ca_is_made_once_private_and_read_back() -> Result<(), CaError> {
        let dir = tempfile::tempdir().map_err(|source| CaError::File {
            path: PathBuf::new(),
            source,
        })?;
        let home = CaHome::Dir(dir.path().to_owned());
        let first = DeploymentCa::load_or_create(&home, Timestamp::now()).await?;
        let again = DeploymentCa::load_or_create(&home, Timestamp::now()).await?;
        assert_eq!(first.cert_pem(), again.cert_pem());
        assert_eq!(first.key.serialize_pem(), again.key.serialize_pem());
        let meta = std::fs::metadata(dir.path().join(CA_FILE)).map_err(|source| CaError::File {
            path: PathBuf::new(),
            source,
        })?;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(!format!("{first:?}").contains("PRIVATE KEY"));
        let leftovers = std::fs::read_dir(dir.path())
            .map_err(|source| CaError::File {
                path: PathBuf::new(),
                source,
            })?
            .count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
        Ok(())
    }

    #[tokio::test]
    async fn rotation_signs_with_a_new_ca_and_keeps_the_old_one_trusted_for_the_overlap()
    -> Result<(), CaError> {
        let dir = tempfile::tempdir().map_err(|source| CaError::File {
            path: PathBuf::new(),
            source,
        })?;
        let home = CaHome::Dir(dir.path().to_owned());
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let old = DeploymentCa::load_or_create(&home, t0).await?;
        let until = home.rotate(t0, 60_000).await?;
        assert_eq!(until.millis(), t0.millis() + 60_000);
        let new = DeploymentCa::load_or_create(&home, t0).await?;
        assert_ne!(old.cert_pem(), new.cert_pem());
        let trusted = home.trusted_pem(t0).await?;
        assert!(trusted.starts_with(new.cert_pem()), "the signing CA first");
        assert!(
            trusted.contains(old.cert_pem()),
            "the old one during the overlap"
        );
        let later = Timestamp::from_millis(until.millis());
        assert_eq!(
            home.trusted_pem(later).await?,
            new.cert_pem(),
            "and not after it"
        );
        home.rotate(later, 60_000).await?;
        let trusted = home.trusted_pem(later).await?;
        assert_eq!(
            trusted.matches("BEGIN CERTIFICATE").count(),
            2,
            "expired ones are dropped"
        );
        let meta = std::fs::metadata(dir.path().join(CA_FILE)).map_err(|source| CaError::File {
            path: PathBuf::new(),
            source,
        })?;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "still private");
        Ok(())
    }
}
