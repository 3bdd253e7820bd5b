//! `egressgate backup PATH`: a consistent copy of the embedded database, taken while it
//! serves, into a new file only (a backup never replaces another). A PostgreSQL deployment is
//! told to use `pg_dump`, whose copy is consistent across every process sharing the database.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail};

use super::database::{Create, open};
use super::load;
use crate::cli::BackupArgs;
use crate::config::{self, Database};

/// Runs `backup`; what it did goes to stdout, one line.
pub(super) async fn run(args: BackupArgs) -> Result<()> {
    let cfg = load(args.db)?;
    if let Database::Url(url) = &cfg.database
        && !url.starts_with("sqlite:")
    {
        bail!(
            "`egressgate backup` copies the embedded SQLite database; this one is PostgreSQL \
             ({}): back it up with its own tools, e.g. `pg_dump --format=custom \
             --file=egressgate.dump \"$DATABASE_URL\"` (restore with `pg_restore`)",
            config::redact(url)
        );
    }
    let path = args.path;
    if path.to_str().is_none() {
        bail!("the backup path {} is not UTF-8", path.display());
    }
    let store = open(&cfg, Create::No).await?;
    create_empty(&path)?;
    let copied = store.backup_sqlite(&path).await;
    let version = store
        .applied_versions()
        .await
        .ok()
        .and_then(|v| v.last().copied());
    store.close().await;
    match copied {
        Ok(true) => {}
        Ok(false) => {
            let _ = std::fs::remove_file(&path);
            bail!("internal: the store is not SQLite");
        }
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(e).context(format!("cannot copy the database to {}", path.display()));
        }
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let schema = version.map_or_else(|| "no schema".to_owned(), |v| format!("schema version {v}"));
    writeln!(
        std::io::stdout(),
        "backed up the database ({schema}, {bytes} bytes) to {}",
        path.display()
    )
    .context("cannot write to stdout")
}

/// Creates `path` empty and readable by this user only (the copy holds token hashes and every
/// decision), refusing one that exists: SQLite writes its copy into the empty file.
fn create_empty(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} exists: a backup never replaces a file; name a new one",
            path.display()
        ),
        Err(e) => {
            Err(e).with_context(|| format!("cannot create the backup file {}", path.display()))
        }
    }
}
