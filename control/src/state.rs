//! What every handler is handed: the database, the settings, the token hashes and the blob
//! store. Its own room, beneath every module that reads it, so no module has to import the
//! crate root (which imports them all to build the router).

use std::sync::Arc;

use egressgate_store::{SecretHash, Store};

use crate::settings::Settings;

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database both planes share.
    pub store: Store,
    /// Limits and lifetimes.
    pub settings: Arc<Settings>,
    /// Hashes of the API bearer tokens.
    pub tokens: Arc<Tokens>,
    /// Where snapshots and oversized answers go (`DirBlobStore` under the data dir, or
    /// `DbBlobStore` when processes share PostgreSQL).
    pub blobs: Arc<dyn egressgate_store::blob::BlobStore>,
}

/// The hashes of the two env API tokens.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// Administrator token hash.
    pub admin: SecretHash,
    /// Agent-runtime token hash.
    pub runtime: SecretHash,
}
