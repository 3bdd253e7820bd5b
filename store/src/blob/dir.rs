//! Blobs as files in one directory (the single-machine default): written to a temporary
//! name, fsynced, then renamed, so a key that exists always names complete bytes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::{BlobError, BlobFuture, BlobRef, BlobStore, new_key, sha256_hex, valid_key};
use crate::time::Timestamp;

/// Partial writes start with this prefix; the janitor removes stale ones.
const TMP_PREFIX: &str = ".tmp-";

/// A directory of blobs, created with mode 0700.
#[derive(Clone, Debug)]
pub struct DirBlobStore {
    dir: Arc<PathBuf>,
}

impl DirBlobStore {
    /// Opens (creating if needed) the blob directory.
    pub fn new(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir)?;
        Ok(Self { dir: Arc::new(dir) })
    }

    /// Path of a key; `None` for a key we never minted, so no input can escape the directory.
    fn path_of(&self, key: &str) -> Option<PathBuf> {
        let bare = key.strip_prefix(TMP_PREFIX).unwrap_or(key);
        valid_key(bare).then(|| self.dir.join(key))
    }
}

/// Writes `bytes` durably under a new key (temp file, fsync, rename, fsync the directory).
fn write_durably(dir: &Path, bytes: &[u8]) -> Result<BlobRef, BlobError> {
    let key = new_key();
    let tmp = dir.join(format!("{TMP_PREFIX}{key}"));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(&key))?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.into());
    }
    Ok(BlobRef {
        sha256: sha256_hex(bytes),
        key,
    })
}

fn older_than(dir: &Path, cutoff: Timestamp) -> Result<Vec<String>, BlobError> {
    let cutoff = UNIX_EPOCH + Duration::from_millis(u64::try_from(cutoff.millis()).unwrap_or(0));
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let bare = name.strip_prefix(TMP_PREFIX).unwrap_or(&name);
        if !valid_key(bare) {
            continue;
        }
        if entry.metadata()?.modified()? < cutoff {
            keys.push(name);
        }
    }
    Ok(keys)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BlobError> + Send + 'static,
) -> Result<T, BlobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BlobError::Io(std::io::Error::other(e)))?
}

impl BlobStore for DirBlobStore {
    fn put(&self, bytes: Vec<u8>) -> BlobFuture<'_, BlobRef> {
        let dir = Arc::clone(&self.dir);
        Box::pin(blocking(move || write_durably(&dir, &bytes)))
    }

    fn read<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Vec<u8>> {
        Box::pin(async move {
            let path = self.path_of(key).ok_or(BlobError::BadKey)?;
            match tokio::fs::read(path).await {
                Ok(bytes) => Ok(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            let path = self.path_of(key).ok_or(BlobError::BadKey)?;
            match tokio::fs::remove_file(path).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            }
        })
    }

    fn list_older_than(&self, cutoff: Timestamp) -> BlobFuture<'_, Vec<String>> {
        let dir = Arc::clone(&self.dir);
        Box::pin(blocking(move || older_than(&dir, cutoff)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_delete_and_integrity() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let store =
            DirBlobStore::new(tmp.path().join("blobs")).unwrap_or_else(|e| unreachable!("{e}"));
        let r = store
            .put(b"hello".to_vec())
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(store.get(&r).await.ok(), Some(b"hello".to_vec()));
        let forged = BlobRef {
            sha256: sha256_hex(b"other"),
            ..r.clone()
        };
        assert!(matches!(
            store.get(&forged).await,
            Err(BlobError::Integrity)
        ));
        let later = Timestamp::now().plus(Duration::from_secs(5));
        assert_eq!(
            store.list_older_than(later).await.ok(),
            Some(vec![r.key.clone()])
        );
        assert!(
            store
                .list_older_than(Timestamp::from_millis(0))
                .await
                .is_ok_and(|v| v.is_empty())
        );
        assert!(store.delete(&r.key).await.is_ok());
        assert!(matches!(store.get(&r).await, Err(BlobError::NotFound)));
        assert!(matches!(store.read("../x").await, Err(BlobError::BadKey)));
    }
}
