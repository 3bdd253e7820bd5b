//! The schema's version: which migrations a database has, which this binary knows, and
//! applying the missing ones. An upgrade is an operator's act: a server finds a database it
//! does not match and says what to do, rather than changing a schema that other (older)
//! processes sharing PostgreSQL may still be using.

use sqlx::Row as _;
use sqlx::SqlSafeStr as _;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use super::{Backend, MIGRATIONS, Store, StoreError};

/// One migration this binary knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    /// Its number (the file's prefix in `migrations/`).
    pub number: i64,
    /// What it brings.
    pub description: &'static str,
}

/// Where a database stands against this binary's migrations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaState {
    /// Nothing applied yet: a new database, which any start may create.
    Empty,
    /// Every known migration applied, none unknown.
    Current,
    /// Some known migrations are missing: `egressgate migrate` applies them.
    Behind {
        /// The newest version applied.
        at: i64,
        /// Known and not applied, oldest first.
        pending: Vec<Version>,
    },
    /// The database has migrations this binary does not know: a newer binary made them.
    Ahead {
        /// The newest version applied.
        at: i64,
        /// The newest version this binary knows.
        known: i64,
    },
}

/// The PostgreSQL session lock that makes creating a new database's schema one step among
/// processes (its key is arbitrary, fixed, and unlike the migrator's own).
const SCHEMA_LOCK: &str = "SELECT pg_advisory_lock(4242010818)";
/// Releases [`SCHEMA_LOCK`].
const SCHEMA_UNLOCK: &str = "SELECT pg_advisory_unlock(4242010818)";

/// Every migration this binary knows, oldest first.
pub fn known() -> impl Iterator<Item = Version> {
    MIGRATIONS
        .iter()
        .map(|&(number, description, _, _)| Version {
            number,
            description,
        })
}

impl Store {
    /// The versions applied to this database (successfully), oldest first; none when it was
    /// never migrated.
    pub async fn applied_versions(&self) -> Result<Vec<i64>, StoreError> {
        let exists = match self.backend {
            Backend::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'"
            }
        };
        let n: i64 = sqlx::query(exists)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let rows =
            sqlx::query("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| r.try_get::<i64, _>(0).map_err(StoreError::from))
            .collect()
    }

    /// Where this database stands against this binary's migrations.
    pub async fn schema_state(&self) -> Result<SchemaState, StoreError> {
        Ok(SchemaState::of(&self.applied_versions().await?))
    }

    /// Where the database stands, having created the schema when nothing was applied yet, as
    /// one step among processes: two processes started together on a new PostgreSQL database
    /// would otherwise each see the other's half-made schema as "behind" and refuse to start.
    /// On PostgreSQL the step holds a session lock on a connection of its own (outside the
    /// pool, so a one-connection pool cannot deadlock, and without the statement timeout,
    /// since it waits as long as the other process takes to create the schema).
    pub async fn create_if_empty(&self) -> Result<SchemaState, StoreError> {
        if self.backend == Backend::Sqlite {
            return self.create_if_empty_here().await;
        }
        let mut lock = self.pool.acquire().await?.detach();
        sqlx::query("SET statement_timeout = 0")
            .execute(&mut lock)
            .await?;
        sqlx::query(SCHEMA_LOCK).execute(&mut lock).await?;
        let state = self.create_if_empty_here().await;
        // Closing the connection would release the lock too; unlocking says so plainly.
        let unlocked = sqlx::query(SCHEMA_UNLOCK).execute(&mut lock).await;
        let state = state?;
        unlocked?;
        Ok(state)
    }

    /// [`Store::create_if_empty`]'s step, for a caller that holds the lock (or needs none).
    async fn create_if_empty_here(&self) -> Result<SchemaState, StoreError> {
        match self.schema_state().await? {
            SchemaState::Empty => {
                self.migrate().await?;
                self.schema_state().await
            }
            state => Ok(state),
        }
    }

    /// Applies this dialect's missing migrations and returns the ones it applied, oldest
    /// first; safe to run from many processes at once (the migrator takes a lock on
    /// PostgreSQL). Refuses a database that has migrations this binary does not know.
    pub async fn migrate(&self) -> Result<Vec<Version>, StoreError> {
        let before = self.applied_versions().await?;
        let migrations = MIGRATIONS
            .iter()
            .map(|&(version, description, sqlite, postgres)| {
                let sql = match self.backend {
                    Backend::Sqlite => sqlite,
                    Backend::Postgres => postgres,
                };
                Migration::new(
                    version,
                    description.into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect();
        Migrator::with_migrations(migrations)
            .run(&self.pool)
            .await?;
        Ok(known().filter(|v| !before.contains(&v.number)).collect())
    }
}

impl SchemaState {
    /// The state of a database with `applied` versions, against [`known`].
    pub fn of(applied: &[i64]) -> SchemaState {
        let Some(&at) = applied.iter().max() else {
            return SchemaState::Empty;
        };
        let newest_known = known().map(|v| v.number).max().unwrap_or(0);
        if applied.iter().any(|a| !known().any(|v| v.number == *a)) {
            return SchemaState::Ahead {
                at,
                known: newest_known,
            };
        }
        let pending: Vec<Version> = known().filter(|v| !applied.contains(&v.number)).collect();
        if pending.is_empty() {
            SchemaState::Current
        } else {
            SchemaState::Behind { at, pending }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_empty_current_behind_or_ahead() {
        let all: Vec<i64> = known().map(|v| v.number).collect();
        assert_eq!(SchemaState::of(&[]), SchemaState::Empty);
        assert_eq!(SchemaState::of(&all), SchemaState::Current);
        let newest = *all.last().unwrap_or(&0);
        let behind = SchemaState::of(&all[..all.len() - 1]);
        assert!(
            matches!(&behind, SchemaState::Behind { pending, .. } if pending.len() == 1 && pending[0].number == newest),
            "{behind:?}"
        );
        let mut ahead = all.clone();
        ahead.push(newest + 1);
        assert_eq!(
            SchemaState::of(&ahead),
            SchemaState::Ahead {
                at: newest + 1,
                known: newest
            }
        );
    }
}
