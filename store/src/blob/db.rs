//! Blobs in the database's `blobs` table: the scale-out choice when many control processes
//! share PostgreSQL and no shared directory exists. A committed insert is a confirmed write.

use sqlx::Row as _;

use super::{BlobError, BlobFuture, BlobRef, BlobStore, new_key, sha256_hex};
use crate::db::{Store, StoreError};
use crate::time::Timestamp;

/// Blobs kept in the shared database.
#[derive(Clone, Debug)]
pub struct DbBlobStore {
    store: Store,
}

impl DbBlobStore {
    /// Uses `store`'s `blobs` table.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

impl BlobStore for DbBlobStore {
    fn put(&self, bytes: Vec<u8>) -> BlobFuture<'_, BlobRef> {
        Box::pin(async move {
            let key = new_key();
            let sha256 = sha256_hex(&bytes);
            sqlx::query("INSERT INTO blobs (blob_key, data, created_at) VALUES ($1, $2, $3)")
                .bind(&key)
                .bind(bytes)
                .bind(Timestamp::now().millis())
                .execute(self.store.pool())
                .await
                .map_err(StoreError::from)?;
            Ok(BlobRef { key, sha256 })
        })
    }

    fn read<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Vec<u8>> {
        Box::pin(async move {
            let row = sqlx::query("SELECT data FROM blobs WHERE blob_key = $1")
                .bind(key)
                .fetch_optional(self.store.pool())
                .await
                .map_err(StoreError::from)?;
            let row = row.ok_or(BlobError::NotFound)?;
            Ok(row.try_get::<Vec<u8>, _>(0).map_err(StoreError::from)?)
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM blobs WHERE blob_key = $1")
                .bind(key)
                .execute(self.store.pool())
                .await
                .map_err(StoreError::from)?;
            Ok(())
        })
    }

    fn list_older_than(&self, cutoff: Timestamp) -> BlobFuture<'_, Vec<String>> {
        Box::pin(async move {
            let rows = sqlx::query("SELECT blob_key FROM blobs WHERE created_at < $1")
                .bind(cutoff.millis())
                .fetch_all(self.store.pool())
                .await
                .map_err(StoreError::from)?;
            rows.iter()
                .map(|r| {
                    r.try_get::<String, _>(0)
                        .map_err(|e| BlobError::Store(e.into()))
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing;

    #[tokio::test]
    async fn round_trip_in_the_database() {
        let db = testing::fresh().await;
        let blobs = DbBlobStore::new(db.store.clone());
        let r = blobs
            .put(vec![0, 1, 2, 255])
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(blobs.get(&r).await.ok(), Some(vec![0, 1, 2, 255]));
        let later = Timestamp::now().plus(std::time::Duration::from_secs(5));
        assert_eq!(
            blobs.list_older_than(later).await.ok(),
            Some(vec![r.key.clone()])
        );
        assert!(blobs.delete(&r.key).await.is_ok());
        assert!(matches!(blobs.get(&r).await, Err(BlobError::NotFound)));
    }
}
