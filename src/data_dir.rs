//! The data directory: made private (0700) by whoever first needs it, the embedded database
//! or, on PostgreSQL, the generated tokens' file.

use std::path::Path;

use anyhow::{Context as _, Result};

/// Creates `dir` and its parents, readable by this user only, if missing.
pub fn create_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create data directory {}", dir.display()))
}
