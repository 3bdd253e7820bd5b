//! The CA kept in the data directory (SQLite deployments): the signing CA's certificate and
//! key in one mode-0600 file, and the rotated-out certificates, each after the end of its
//! trust, in another. Every write goes to a private temporary file first and is then linked
//! or renamed into place, so a reader never sees half a file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{CA_FILE, CaError, DeploymentCa, PREVIOUS_FILE};
use crate::time::Timestamp;

/// What ends a certificate in PEM text.
const PEM_END: &str = "-----END CERTIFICATE-----";

/// The marker line before each rotated-out certificate.
const UNTIL: &str = "# trusted-until-ms: ";

/// The CA file's text, or `None` when there is no CA yet.
fn read(dir: &Path) -> Result<Option<String>, CaError> {
    let path = dir.join(CA_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(file_err(&path, e)),
    }
}

/// The signing CA, if any.
pub(super) fn load(dir: &Path) -> Result<Option<DeploymentCa>, CaError> {
    read(dir)?.map(|text| parse_file(&text)).transpose()
}

/// The signing CA's certificate only (PEM), if any.
pub(super) fn signing_cert(dir: &Path) -> Result<Option<String>, CaError> {
    read(dir)?
        .map(|text| split_file(&text).map(|(cert, _)| cert))
        .transpose()
}

/// Keeps `fresh` as the first CA. It is linked into place, so of two processes starting at
/// once the second to link loses and reads the first's.
pub(super) fn create(dir: &Path, fresh: DeploymentCa) -> Result<DeploymentCa, CaError> {
    let path = dir.join(CA_FILE);
    let tmp = write_private_temp(&path, &file_text(&fresh))?;
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(fresh),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            load(dir)?.ok_or(CaError::Corrupt("the CA file vanished"))
        }
        Err(e) => Err(file_err(&path, e)),
    }
}

/// Keeps `old` trusted until `until` (dropping rotated-out CAs whose trust has ended) and
/// makes `fresh` the signing CA; `false`, changing nothing, when `old` is no longer the
/// signing CA. The CA file is locked meanwhile, so two processes replacing the same CA at
/// once cannot both succeed.
pub(super) fn replace(
    dir: &Path,
    old: &DeploymentCa,
    fresh: &DeploymentCa,
    until: i64,
    now: Timestamp,
) -> Result<bool, CaError> {
    let path = dir.join(CA_FILE);
    let held = std::fs::File::open(&path).map_err(|e| file_err(&path, e))?;
    held.lock().map_err(|e| file_err(&path, e))?;
    // Read through the name, not the locked handle: a replacement renamed over the file
    // while this process waited is what the name shows now.
    if signing_cert(dir)?.as_deref() != Some(old.cert_pem()) {
        return Ok(false);
    }
    let mut kept: String = previous(dir)?
        .into_iter()
        .filter(|(_, u)| *u > now.millis())
        .map(|(cert, u)| format!("{UNTIL}{u}\n{cert}"))
        .collect();
    kept.push_str(&format!("{UNTIL}{until}\n{}", old.cert_pem));
    replace_file(&dir.join(PREVIOUS_FILE), &kept)?;
    replace_file(&path, &file_text(fresh))?;
    Ok(true)
}

/// Rotated-out certificates with the end of their trust (ms); none when the file is absent.
pub(super) fn previous(dir: &Path) -> Result<Vec<(String, i64)>, CaError> {
    let path = dir.join(PREVIOUS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_previous(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(CaError::File { path, source }),
    }
}

/// Parses [`PREVIOUS_FILE`].
fn parse_previous(text: &str) -> Result<Vec<(String, i64)>, CaError> {
    let mut out = Vec::new();
    for block in text
        .split_inclusive(PEM_END)
        .filter(|b| b.contains(PEM_END))
    {
        let block = block.trim_start();
        let (marker, cert) = block
            .split_once('\n')
            .ok_or(CaError::Corrupt("previous CA list"))?;
        let until = marker
            .strip_prefix(UNTIL)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .ok_or(CaError::Corrupt("previous CA list"))?;
        out.push((format!("{}\n", cert.trim_end()), until));
    }
    Ok(out)
}

/// The CA file's text: the certificate, then the key.
fn file_text(ca: &DeploymentCa) -> String {
    format!("{}{}", ca.cert_pem, ca.key.serialize_pem())
}

/// [`CA_FILE`]'s text as the certificate (PEM) and the key.
fn split_file(text: &str) -> Result<(String, &str), CaError> {
    let at = text
        .find(PEM_END)
        .ok_or(CaError::Corrupt("no certificate"))?
        + PEM_END.len();
    let (cert, key) = text.split_at(at);
    Ok((format!("{cert}\n"), key))
}

/// Parses [`CA_FILE`]'s text.
fn parse_file(text: &str) -> Result<DeploymentCa, CaError> {
    let (cert, key) = split_file(text)?;
    DeploymentCa::from_pem(&cert, key)
}

/// Replaces `path` with `text` at once (a private temporary file renamed over it).
fn replace_file(path: &Path, text: &str) -> Result<(), CaError> {
    let tmp = write_private_temp(path, text)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        file_err(path, e)
    })
}

/// Writes `text` durably to a new file only this user can read, with a random name next to
/// `path`, and returns its name (nothing is left behind when the write fails).
fn write_private_temp(path: &Path, text: &str) -> Result<PathBuf, CaError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".ca-{}.tmp",
        hex::encode(rand::random::<[u8; 8]>())
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| file_err(path, e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            file_err(path, e)
        })?;
    Ok(tmp)
}

/// An I/O failure on the CA file at `path`.
fn file_err(path: &Path, source: std::io::Error) -> CaError {
    CaError::File {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::ca::CaHome;
    use crate::db::testing;

    #[tokio::test]
    async fn a_file_ca_is_made_once_private_and_read_back() -> Result<(), CaError> {
        let dir = tempfile::tempdir().map_err(|e| file_err(Path::new("tempdir"), e))?;
        let db = testing::fresh().await;
        let home = CaHome::dir(dir.path().to_owned(), db.store.clone());
        let first = DeploymentCa::load_or_create(&home, Timestamp::now()).await?;
        let again = DeploymentCa::load_or_create(&home, Timestamp::now()).await?;
        assert_eq!(first.cert_pem(), again.cert_pem());
        assert_eq!(first.key.serialize_pem(), again.key.serialize_pem());
        let meta =
            std::fs::metadata(dir.path().join(CA_FILE)).map_err(|e| file_err(dir.path(), e))?;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(!format!("{first:?}").contains("PRIVATE KEY"));
        let leftovers = std::fs::read_dir(dir.path())
            .map_err(|e| file_err(dir.path(), e))?
            .count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
        Ok(())
    }

    #[tokio::test]
    async fn rotation_signs_with_a_new_ca_and_keeps_the_old_one_trusted_for_the_overlap()
    -> Result<(), CaError> {
        let dir = tempfile::tempdir().map_err(|e| file_err(Path::new("tempdir"), e))?;
        let db = testing::fresh().await;
        let home = CaHome::dir(dir.path().to_owned(), db.store.clone());
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let old = DeploymentCa::load_or_create(&home, t0).await?;
        let until = home.rotate(t0, 60_000).await?.ok_or(CaError::Missing)?;
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
        let meta =
            std::fs::metadata(dir.path().join(CA_FILE)).map_err(|e| file_err(dir.path(), e))?;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "still private");
        Ok(())
    }
}
