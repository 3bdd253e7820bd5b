//! The database: one pool over SQLite (embedded default) or PostgreSQL (scale-out), migrations
//! per dialect, and the only place in the product that holds SQL. Each submodule owns the
//! statements for one table family; domain crates call typed functions, never SQL.

pub mod admin;
pub mod approvals;
pub mod audit;
mod backup;
pub mod contacts;
pub mod drafts;
pub mod egress;
mod epoch;
pub mod events;
pub mod inbox_links;
pub mod interrupts;
pub mod janitor;
pub mod outbox;
mod pointer;
pub mod policy;
pub mod refusals;
pub mod register;
pub mod resume;
pub mod revalidate;
mod rows;
pub mod schema;
mod signal;
pub mod slack;
mod slots;
pub mod tokens;
pub mod turns;
pub mod ui_sessions;
pub mod webhooks;

use std::path::Path;
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

use sqlx::{AnyPool, ConnectOptions as _, Executor as _};

pub(crate) use rows::{FromRow, fetch_all};

/// Errors from the store. The API maps these to statuses without ever echoing database text.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or answered with an error: callers fail closed.
    #[error("database unavailable: {0}")]
    Unavailable(#[from] sqlx::Error),
    /// Migrations could not be applied.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The audit row could not be written, so the change it records was rolled back.
    #[error("audit write failed: {0}")]
    Audit(#[source] sqlx::Error),
    /// A row we wrote does not parse back: never guess, refuse.
    #[error("corrupt row: {0}")]
    Corrupt(&'static str),
    /// A value that must be unique (a Slack user id) already belongs to another row.
    #[error("already taken: {0}")]
    Taken(&'static str),
}

/// Which SQL dialect is behind the pool (a few statements differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Embedded, one process.
    Sqlite,
    /// Shared by many proxy and control processes.
    Postgres,
}

/// Pool sizing and timeouts, from configuration.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Most connections this process opens.
    pub max_connections: u32,
    /// How long a caller waits for a free connection before the store reports unavailable.
    pub acquire_timeout: Duration,
    /// Longest a single statement may run (PostgreSQL `statement_timeout`, SQLite busy timeout).
    pub statement_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(5),
        }
    }
}

/// A handle on the database, cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    signal: std::sync::Arc<signal::Signals>,
    /// Path-style multi-tenant hosts the administrator opted in (`--allow-whole-host`): what
    /// the refusal record's `approvable` needs to agree with the proxy and the tool.
    whole_host_ok: std::sync::Arc<[crate::Host]>,
}

/// Migrations per dialect: (version, description, SQLite text, PostgreSQL text). Both folders
/// keep the same version numbers.
pub(crate) const MIGRATIONS: &[(i64, &str, &str, &str)] = &[
    (
        1,
        "schema",
        include_str!("../../migrations/sqlite/0001_schema.sql"),
        include_str!("../../migrations/postgres/0001_schema.sql"),
    ),
    (
        2,
        "cache epoch",
        include_str!("../../migrations/sqlite/0002_cache_epoch.sql"),
        include_str!("../../migrations/postgres/0002_cache_epoch.sql"),
    ),
    (
        3,
        "scoped tokens",
        include_str!("../../migrations/sqlite/0003_scoped_tokens.sql"),
        include_str!("../../migrations/postgres/0003_scoped_tokens.sql"),
    ),
    (
        4,
        "deployment keys",
        include_str!("../../migrations/sqlite/0004_deployment_keys.sql"),
        include_str!("../../migrations/postgres/0004_deployment_keys.sql"),
    ),
    (
        5,
        "revocation",
        include_str!("../../migrations/sqlite/0005_revocation.sql"),
        include_str!("../../migrations/postgres/0005_revocation.sql"),
    ),
    (
        6,
        "shadow mode",
        include_str!("../../migrations/sqlite/0006_shadow_mode.sql"),
        include_str!("../../migrations/postgres/0006_shadow_mode.sql"),
    ),
    (
        7,
        "inspection",
        include_str!("../../migrations/sqlite/0007_inspection.sql"),
        include_str!("../../migrations/postgres/0007_inspection.sql"),
    ),
    (
        8,
        "package refusals",
        include_str!("../../migrations/sqlite/0008_package_refusals.sql"),
        include_str!("../../migrations/postgres/0008_package_refusals.sql"),
    ),
    (
        9,
        "scale indexes",
        include_str!("../../migrations/sqlite/0009_scale_indexes.sql"),
        include_str!("../../migrations/postgres/0009_scale_indexes.sql"),
    ),
    (
        14,
        "events and console sessions",
        include_str!("../../migrations/sqlite/0014_events.sql"),
        include_str!("../../migrations/postgres/0014_events.sql"),
    ),
    (
        15,
        "refusal evidence",
        include_str!("../../migrations/sqlite/0015_refusal_evidence.sql"),
        include_str!("../../migrations/postgres/0015_refusal_evidence.sql"),
    ),
    (
        16,
        "narrow grants",
        include_str!("../../migrations/sqlite/0016_narrow_grants.sql"),
        include_str!("../../migrations/postgres/0016_narrow_grants.sql"),
    ),
    (
        17,
        "inbox links",
        include_str!("../../migrations/sqlite/0017_inbox_links.sql"),
        include_str!("../../migrations/postgres/0017_inbox_links.sql"),
    ),
    (
        18,
        "webhooks",
        include_str!("../../migrations/sqlite/0018_webhooks.sql"),
        include_str!("../../migrations/postgres/0018_webhooks.sql"),
    ),
    (
        19,
        "evidence command",
        include_str!("../../migrations/sqlite/0019_evidence_command.sql"),
        include_str!("../../migrations/postgres/0019_evidence_command.sql"),
    ),
    (
        20,
        "channels",
        include_str!("../../migrations/sqlite/0020_channels.sql"),
        include_str!("../../migrations/postgres/0020_channels.sql"),
    ),
];

impl Store {
    /// Opens the embedded SQLite database `DIR/egressgate.db`, creating it if needed, in WAL
    /// mode so readers (the proxy) never wait for writers.
    pub async fn open_sqlite(dir: &Path, opts: &PoolOptions) -> Result<Self, StoreError> {
        let url = format!("sqlite://{}?mode=rwc", dir.join("egressgate.db").display());
        Self::open_url(&url, opts).await
    }

    /// Opens `sqlite://…` or `postgres://…`.
    pub async fn open_url(url: &str, opts: &PoolOptions) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            Backend::Sqlite
        };
        let connect = AnyConnectOptions::from_str(url)?.disable_statement_logging();
        let timeout_ms = opts.statement_timeout.as_millis();
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => opts.max_connections.min(8),
                Backend::Postgres => opts.max_connections,
            })
            .acquire_timeout(opts.acquire_timeout)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    let setup = match backend {
                        Backend::Sqlite => format!(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                             PRAGMA busy_timeout = {timeout_ms}; PRAGMA foreign_keys = ON;"
                        ),
                        Backend::Postgres => format!("SET statement_timeout = {timeout_ms}"),
                    };
                    conn.execute(sqlx::AssertSqlSafe(setup)).await?;
                    Ok(())
                })
            })
            .connect_with(connect)
            .await?;
        let listen_url = (backend == Backend::Postgres).then(|| url.to_owned());
        Ok(Self {
            pool,
            backend,
            signal: signal::Signals::new(listen_url),
            whole_host_ok: std::sync::Arc::from(Vec::new()),
        })
    }

    /// The path-style multi-tenant hosts the administrator opted in as whole-host grants, so
    /// the refusal record says `approvable` exactly as the proxy and the tool do.
    pub fn with_whole_host_ok(mut self, hosts: &[crate::Host]) -> Self {
        self.whole_host_ok = std::sync::Arc::from(hosts.to_vec());
        self
    }

    /// Whether a person can approve one refusal ([`crate::refusal_approvable`] with this
    /// deployment's opt-ins).
    pub fn refusal_approvable(
        &self,
        reason: crate::RefusalReason,
        names_package: bool,
        host: &str,
    ) -> bool {
        crate::refusal_approvable(reason, names_package, host, &self.whole_host_ok)
    }

    /// Which dialect this store speaks.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A trivial round trip, for `/readyz`.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Closes the pool, waiting for checked-out connections (graceful shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Starts a write transaction. On SQLite it takes the write lock up front (`BEGIN
    /// IMMEDIATE`), so two writers queue on the busy timeout instead of one failing with
    /// "database is locked" when it upgrades a read lock.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        })
    }

    /// Starts a write transaction with a guarded write in it: the transaction when the write
    /// changed a row, `None` (rolled back) when its guard no longer held. Every change made
    /// "only if it is still as read" — a claim and each step of it, a revocation, hiding a
    /// chat — starts so, and answers `false` on `None`.
    pub(crate) async fn begin_guarded(
        &self,
        write: sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> Result<Option<sqlx::Transaction<'static, sqlx::Any>>, StoreError> {
        let mut tx = self.begin().await?;
        let changed = write.execute(&mut *tx).await?.rows_affected();
        Ok((changed > 0).then_some(tx))
    }

    /// Runs one conditional statement on its own (an insert that may meet a conflict, an
    /// update or delete of what may be gone) and answers whether it changed a row: the
    /// single-statement form of [`Store::begin_guarded`], for answers of `false` when
    /// nothing matched.
    pub(crate) async fn changed_a_row(
        &self,
        write: sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> Result<bool, StoreError> {
        Ok(write.execute(self.pool()).await?.rows_affected() > 0)
    }

    /// The pool, for the submodules' single-statement reads and writes.
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}

/// `$first, $first+1, …` for `n` values: dynamic `IN (...)` lists, built only here.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// BIGINT 0/1 ⇄ bool, the portable boolean.
pub(crate) fn flag(b: bool) -> i64 {
    i64::from(b)
}

/// Reads text column `index` of one of our rows as a closed word (`parse` is the enum's
/// `parse`, such as [`crate::Access::parse`]); an unknown word is a corrupt row named by
/// `what`, never a default, the same way for every such column.
pub(crate) fn word_column<T>(
    r: &sqlx::any::AnyRow,
    index: usize,
    parse: fn(&str) -> Option<T>,
    what: &'static str,
) -> Result<T, StoreError> {
    use sqlx::Row as _;
    parse(&r.try_get::<String, _>(index)?).ok_or(StoreError::Corrupt(what))
}

/// Parses a JSON column we wrote; a parse failure is a corrupt row, never a default.
pub(crate) fn json_column<T: serde::de::DeserializeOwned>(
    s: &str,
    what: &'static str,
) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|_| StoreError::Corrupt(what))
}

#[cfg(test)]
pub(crate) mod testing;
