//! The blob store: where snapshots of paused agent runs (and answers too large for the pointer
//! record) live. A pointer only ever names a blob that was written and confirmed first, and
//! keeps its SHA-256, so a resume either gets the exact bytes that were paused or an error —
//! never a silently different snapshot.

mod db;
mod dir;

use std::future::Future;
use std::pin::Pin;

use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

use crate::db::StoreError;
use crate::time::Timestamp;

pub use db::DbBlobStore;
pub use dir::DirBlobStore;

/// Why a blob could not be written or read. Callers fail closed: no pointer without a
/// confirmed blob, no resume with a blob that does not match its hash.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The file system refused.
    #[error("blob I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// The database behind [`DbBlobStore`] refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No blob under that key (deleted by the janitor, or never written).
    #[error("blob not found")]
    NotFound,
    /// The bytes read back do not hash to what the pointer recorded.
    #[error("blob content does not match its recorded SHA-256")]
    Integrity,
    /// A key that this store never minted (never touches the file system).
    #[error("malformed blob key")]
    BadKey,
}

/// A confirmed blob: its random key and the SHA-256 of its bytes (hex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobRef {
    /// Random name, 128 bits in hex.
    pub key: String,
    /// Hex SHA-256 of the content, checked on every read.
    pub sha256: String,
}

impl BlobRef {
    /// One-column form `key:sha256`, for pointer columns that have no separate hash column.
    pub fn locator(&self) -> String {
        format!("{}:{}", self.key, self.sha256)
    }

    /// Parses [`BlobRef::locator`]; `None` for anything we did not write.
    pub fn from_locator(s: &str) -> Option<Self> {
        let (key, sha256) = s.split_once(':')?;
        (valid_key(key) && sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self {
                key: key.to_owned(),
                sha256: sha256.to_owned(),
            })
    }
}

/// A boxed future, so the store can sit behind `Arc<dyn BlobStore>` and be swapped per
/// deployment (a directory on one machine, the database or an object store when scaled out).
pub type BlobFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BlobError>> + Send + 'a>>;

/// Where blobs are kept. `put` returns only once the bytes are durable.
pub trait BlobStore: Send + Sync {
    /// Stores `bytes` under a fresh random key; returns once durable.
    fn put(&self, bytes: Vec<u8>) -> BlobFuture<'_, BlobRef>;

    /// Reads the raw bytes under `key` (no integrity check: use [`BlobStore::get`]).
    fn read<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Vec<u8>>;

    /// Deletes a blob; deleting a missing one is not an error.
    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()>;

    /// Keys of blobs (and abandoned partial writes) created before `cutoff`, for the janitor.
    fn list_older_than(&self, cutoff: Timestamp) -> BlobFuture<'_, Vec<String>>;

    /// Reads a blob and checks it against the hash the pointer recorded.
    fn get<'a>(&'a self, blob: &'a BlobRef) -> BlobFuture<'a, Vec<u8>> {
        Box::pin(async move {
            let bytes = self.read(&blob.key).await?;
            if sha256_hex(&bytes) == blob.sha256 {
                Ok(bytes)
            } else {
                Err(BlobError::Integrity)
            }
        })
    }
}

/// A fresh random key: 128 bits, lower-case hex (safe as a file name and a SQL key).
pub(crate) fn new_key() -> String {
    let mut buf = [0u8; 16];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Whether `key` has the shape [`new_key`] mints, so no caller can name a path of its own.
pub(crate) fn valid_key(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Hex SHA-256.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locator_round_trips_and_rejects_foreign_text() {
        let r = BlobRef {
            key: new_key(),
            sha256: sha256_hex(b"x"),
        };
        assert_eq!(BlobRef::from_locator(&r.locator()), Some(r));
        assert!(BlobRef::from_locator("../etc:passwd").is_none());
        assert!(!valid_key("../../etc/passwd"));
    }
}
