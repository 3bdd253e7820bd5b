//! Opening the configured store: embedded SQLite in the data directory (created 0700 only by
//! the subcommands that may create it) or a database URL, then migrated.

use anyhow::{Context as _, Result, bail};
use egressgate_store::Store;
use egressgate_store::db::schema::SchemaState;

use crate::config::{self, Config, Database};

/// Whether opening the embedded database may create it: only `serve`, `proxy`, `control` and
/// `migrate` may; `admin` run in the wrong directory must not report success on an empty one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Create {
    Yes,
    No,
}

/// The embedded database's file inside the data directory.
const SQLITE_FILE: &str = "egressgate.db";

/// Opens the configured store, creating the data directory (0700) for SQLite when allowed.
pub(super) async fn open(cfg: &Config, create: Create) -> Result<Store> {
    match &cfg.database {
        Database::Sqlite => {
            let dir = &cfg.data_dir;
            let file = dir.join(SQLITE_FILE);
            if create == Create::Yes {
                crate::data_dir::create_private(dir)?;
            } else if !file.exists() {
                bail!(
                    "no egressgate database in {} (no {SQLITE_FILE}): run this where `egressgate \
                     serve` keeps its data, or pass --data-dir or --database-url \
                     (`egressgate migrate --data-dir DIR` creates one)",
                    dir.display()
                );
            }
            // Say "permission denied" when that is the reason, not SQLite's "unable to open".
            std::fs::read_dir(dir)
                .with_context(|| format!("cannot read data directory {}", dir.display()))?;
            match Store::open_sqlite(dir, &cfg.pool).await {
                Ok(s) => Ok(s),
                Err(e) => {
                    let probe = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(create == Create::Yes)
                        .truncate(false)
                        .open(&file);
                    match probe {
                        Err(io) => Err(io).with_context(|| {
                            format!("cannot open the database {}", file.display())
                        }),
                        Ok(_) => Err(e).with_context(|| {
                            format!("cannot open the database in {}", dir.display())
                        }),
                    }
                }
            }
        }
        Database::Url(u) => Store::open_url(u, &cfg.pool)
            .await
            .with_context(|| format!("cannot reach the database at {}", config::redact(u))),
    }
}

/// The configured store, opened, with the schema this binary needs: what every subcommand
/// that touches the database starts with. A new (empty) database is created; one that is
/// behind is migrated only when told (`--auto-migrate`), since other processes sharing it
/// may still run the older binary; one that is ahead (a newer binary migrated it) is refused.
pub(super) async fn open_migrated(cfg: &Config, create: Create) -> Result<Store> {
    let store = open(cfg, create)
        .await?
        .with_whole_host_ok(&cfg.control.allow_whole_host);
    // A new database is created here, under a lock shared with every process starting now.
    let state = store
        .create_if_empty()
        .await
        .context("cannot read the database's schema version (or create a new one's)")?;
    match state {
        SchemaState::Current => {}
        SchemaState::Empty => bail!("the new database's schema was not created"),
        SchemaState::Behind { at, pending } if cfg.auto_migrate => {
            let applied = store.migrate().await.context("migration failed")?;
            tracing::info!(
                from = at,
                to = applied.last().map_or(at, |v| v.number),
                applied = applied.len(),
                pending = pending.len(),
                "database migrated at start (--auto-migrate)"
            );
        }
        SchemaState::Behind { at, pending } => bail!(
            "the database's schema is at version {at}; this egressgate needs {} ({} pending: {}). \
             Back it up, then run `egressgate migrate` with the same database settings \
             (or start with --auto-migrate when no other process uses this database)",
            pending.last().map_or(at, |v| v.number),
            pending.len(),
            pending
                .iter()
                .map(|v| format!("{} {}", v.number, v.description))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        SchemaState::Ahead { at, known } => bail!(
            "the database's schema is at version {at}, newer than this egressgate knows \
             (up to {known}): a newer egressgate migrated it; run that version (or restore \
             the backup taken before the upgrade)"
        ),
    }
    Ok(store)
}
