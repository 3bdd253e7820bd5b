//! The CA kept in the `deployment_ca` table (PostgreSQL deployments), so every proxy sharing
//! the database mints under the same CA: the signing CA is the newest row without an end of
//! trust; rotated-out rows keep their certificate with one.

use sqlx::Row as _;

use super::{CaError, DeploymentCa};
use crate::db::{Store, StoreError};
use crate::time::Timestamp;

/// The signing CA, made first when the table has none.
pub(super) async fn load_or_create(store: &Store, now: Timestamp) -> Result<DeploymentCa, CaError> {
    if let Some(ca) = load(store).await? {
        return Ok(ca);
    }
    let fresh = DeploymentCa::generate(now)?;
    // Id 1 only ever for the first CA: two processes starting on an empty table race for the
    // same row, and the loser reads the winner's.
    sqlx::query(
        "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) \
         VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&fresh.cert_pem)
    .bind(fresh.key.serialize_pem())
    .bind(now.millis())
    .execute(store.pool())
    .await
    .map_err(StoreError::from)?;
    load(store).await?.ok_or(CaError::Corrupt("missing row"))
}

/// Ends the signing CA's row at `until` and adds `fresh` as the next one, in one transaction.
pub(super) async fn rotate(
    store: &Store,
    fresh: &DeploymentCa,
    until: i64,
    now: Timestamp,
) -> Result<(), CaError> {
    let mut tx = store.begin().await?;
    sqlx::query("UPDATE deployment_ca SET trusted_until = $1 WHERE trusted_until IS NULL")
        .bind(until)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
    sqlx::query(
        "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) \
         SELECT COALESCE(MAX(id), 0) + 1, $1, $2, $3 FROM deployment_ca",
    )
    .bind(&fresh.cert_pem)
    .bind(fresh.key.serialize_pem())
    .bind(now.millis())
    .execute(&mut *tx)
    .await
    .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// Rotated-out certificates with the end of their trust (ms), newest first.
pub(super) async fn previous(store: &Store) -> Result<Vec<(String, i64)>, CaError> {
    let rows = sqlx::query(
        "SELECT cert_pem, trusted_until FROM deployment_ca \
         WHERE trusted_until IS NOT NULL ORDER BY id DESC",
    )
    .fetch_all(store.pool())
    .await
    .map_err(StoreError::from)?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, sqlx::Error>>()
        .map_err(|e| StoreError::from(e).into())
}

/// The signing CA's row, if any.
async fn load(store: &Store) -> Result<Option<DeploymentCa>, CaError> {
    let row = sqlx::query(
        "SELECT cert_pem, key_pem FROM deployment_ca WHERE trusted_until IS NULL \
         ORDER BY id DESC LIMIT 1",
    )
    .fetch_optional(store.pool())
    .await
    .map_err(StoreError::from)?;
    match row {
        None => Ok(None),
        Some(r) => {
            let cert: String = r.try_get(0).map_err(StoreError::from)?;
            let key: String = r.try_get(1).map_err(StoreError::from)?;
            DeploymentCa::from_pem(&cert, &key).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca::CaHome;
    use crate::db::testing;

    #[tokio::test]
    async fn the_table_keeps_one_signing_ca_and_the_rotated_ones_until_their_end()
    -> Result<(), CaError> {
        let db = testing::fresh().await;
        let home = CaHome::Database(db.store.clone());
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let first = DeploymentCa::load_or_create(&home, t0).await?;
        let again = DeploymentCa::load_or_create(&home, t0).await?;
        assert_eq!(first.cert_pem(), again.cert_pem());
        assert_eq!(first.key.serialize_pem(), again.key.serialize_pem());
        let until = home.rotate(t0, 60_000).await?;
        let new = DeploymentCa::load_or_create(&home, t0).await?;
        assert_ne!(first.cert_pem(), new.cert_pem());
        assert_eq!(
            previous(&db.store).await?,
            [(first.cert_pem().to_owned(), until.millis())]
        );
        let trusted = home.trusted_pem(t0).await?;
        assert!(trusted.starts_with(new.cert_pem()), "the signing CA first");
        assert!(
            trusted.contains(first.cert_pem()),
            "the old one during the overlap"
        );
        assert_eq!(
            home.trusted_pem(until).await?,
            new.cert_pem(),
            "and not after it"
        );
        Ok(())
    }
}
