//! A consistent copy of the embedded database while it serves: `VACUUM INTO` reads one
//! snapshot of every table (writers go on meanwhile, in WAL mode) and writes a compact new
//! file that opens on its own, with nothing of the write-ahead log left to replay.

use std::path::Path;

use super::{Backend, Store, StoreError};

impl Store {
    /// Copies an SQLite store into `to`, which must not exist yet or be empty (SQLite refuses
    /// to write over a database). `false`, and nothing copied, on PostgreSQL: its own tools
    /// (`pg_dump`) make a consistent copy of a shared database, this process cannot.
    pub async fn backup_sqlite(&self, to: &Path) -> Result<bool, StoreError> {
        if self.backend != Backend::Sqlite {
            return Ok(false);
        }
        sqlx::query("VACUUM INTO $1")
            .bind(to.to_string_lossy().into_owned())
            .execute(&self.pool)
            .await?;
        Ok(true)
    }
}
