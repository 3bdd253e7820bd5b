//! The CA kept in the `deployment_ca` table (PostgreSQL deployments), so every proxy sharing
//! the database mints under the same CA: the signing CA is the newest row without an end of
//! trust; rotated-out rows keep their certificate with one, and no key. The signing row's key
//! is sealed ([`SealKey`]); a key an older release left in clear is sealed in place by the
//! first process that has the seal key, and used by none without it.

use sqlx::Row as _;

use super::seal::{SealKey, is_sealed};
use super::{CaError, DeploymentCa};
use crate::db::{Store, StoreError};
use crate::time::Timestamp;

/// The signing row: id, certificate, stored key.
async fn signing_row(store: &Store) -> Result<Option<(i64, String, String)>, CaError> {
    let row = sqlx::query(
        "SELECT id, cert_pem, key_pem FROM deployment_ca WHERE trusted_until IS NULL \
         ORDER BY id DESC LIMIT 1",
    )
    .fetch_optional(store.pool())
    .await
    .map_err(StoreError::from)?;
    row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .transpose()
        .map_err(|e: sqlx::Error| StoreError::from(e).into())
}

/// The signing CA's certificate only (PEM), if any: no seal key needed.
pub(super) async fn signing_cert(store: &Store) -> Result<Option<String>, CaError> {
    Ok(signing_row(store).await?.map(|(_, cert, _)| cert))
}

/// The signing CA, if any, its key opened with `seal` (and sealed first when an older release
/// left it in clear).
pub(super) async fn load(
    store: &Store,
    seal: Option<&SealKey>,
) -> Result<Option<DeploymentCa>, CaError> {
    let Some((id, cert, stored)) = signing_row(store).await? else {
        return Ok(None);
    };
    let key = match (seal, is_sealed(&stored)) {
        (None, true) => return Err(CaError::NoSealKey),
        (None, false) => return Err(CaError::KeyInClear),
        (Some(seal), true) => seal.open(id, &stored)?,
        (Some(seal), false) => {
            seal_in_place(store, seal, id, &stored).await?;
            stored
        }
    };
    DeploymentCa::from_pem(&cert, &key).map(Some)
}

/// Seals the clear key of row `id` (unless another process just did) and drops the keys of
/// rotated-out rows, which never sign again: nothing stays in clear.
async fn seal_in_place(store: &Store, seal: &SealKey, id: i64, clear: &str) -> Result<(), CaError> {
    let mut tx = store.begin().await?;
    sqlx::query("UPDATE deployment_ca SET key_pem = $1 WHERE id = $2 AND key_pem = $3")
        .bind(seal.seal(id, clear)?)
        .bind(id)
        .bind(clear)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
    sqlx::query("UPDATE deployment_ca SET key_pem = '' WHERE trusted_until IS NOT NULL")
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!("the deployment CA's key, kept in clear by an older release, is now sealed");
    Ok(())
}

/// Keeps `fresh` as the first CA, sealed. Id 1 only ever for the first CA: two processes
/// starting on an empty table race for the same row, and the loser keeps the winner's.
pub(super) async fn create(
    store: &Store,
    seal: &SealKey,
    fresh: &DeploymentCa,
    now: Timestamp,
) -> Result<(), CaError> {
    sqlx::query(
        "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) \
         VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&fresh.cert_pem)
    .bind(seal.seal(1, &fresh.key.serialize_pem())?)
    .bind(now.millis())
    .execute(store.pool())
    .await
    .map_err(StoreError::from)?;
    Ok(())
}

/// Ends `old`'s row at `until`, dropping its key, and adds `fresh` as the next one, sealed,
/// in one transaction; `false`, changing nothing, when `old` is no longer the signing CA
/// (the row lock makes a second process replacing it at once find it ended).
pub(super) async fn replace(
    store: &Store,
    seal: &SealKey,
    old: &DeploymentCa,
    fresh: &DeploymentCa,
    until: i64,
    now: Timestamp,
) -> Result<bool, CaError> {
    let mut tx = store.begin().await?;
    let ended = sqlx::query(
        "UPDATE deployment_ca SET trusted_until = $1, key_pem = '' \
         WHERE trusted_until IS NULL AND cert_pem = $2",
    )
    .bind(until)
    .bind(&old.cert_pem)
    .execute(&mut *tx)
    .await
    .map_err(StoreError::from)?;
    if ended.rows_affected() != 1 {
        return Ok(false);
    }
    let id: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM deployment_ca")
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::from)?;
    sqlx::query(
        "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(id)
    .bind(&fresh.cert_pem)
    .bind(seal.seal(id, &fresh.key.serialize_pem())?)
    .bind(now.millis())
    .execute(&mut *tx)
    .await
    .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(true)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca::{CaHome, CaPolicy};
    use crate::db::testing;

    fn seal_key(byte: char) -> SealKey {
        SealKey::repeated(byte as u8)
    }

    async fn keys(store: &Store) -> Result<Vec<String>, CaError> {
        sqlx::query_scalar("SELECT key_pem FROM deployment_ca ORDER BY id")
            .fetch_all(store.pool())
            .await
            .map_err(|e| StoreError::from(e).into())
    }

    #[tokio::test]
    async fn the_table_keeps_one_signing_ca_sealed_and_the_rotated_ones_keyless_until_their_end()
    -> Result<(), CaError> {
        let db = testing::fresh().await;
        let home = CaHome::database(db.store.clone(), Some(seal_key('A')));
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        assert!(
            matches!(home.trusted_pem(t0).await, Err(CaError::Missing)),
            "a reader never makes one"
        );
        let first = home.signing(t0).await?;
        let again = home.signing(t0).await?;
        assert_eq!(first.cert_pem(), again.cert_pem());
        assert_eq!(first.key.serialize_pem(), again.key.serialize_pem());
        assert!(
            keys(&db.store).await?.iter().all(|k| is_sealed(k)),
            "sealed"
        );
        let until = home.rotate(t0, 60_000).await?.ok_or(CaError::Missing)?;
        let new = home.signing(t0).await?;
        assert_ne!(first.cert_pem(), new.cert_pem());
        assert_eq!(
            previous(&db.store).await?,
            [(first.cert_pem().to_owned(), until.millis())]
        );
        assert_eq!(
            keys(&db.store).await?[0],
            "",
            "a rotated-out CA keeps no key"
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
        // Without the seal key, or with another: the certificates, never the key.
        let bare = CaHome::database(db.store.clone(), None);
        assert_eq!(bare.trusted_pem(t0).await?, trusted);
        assert!(matches!(bare.signing(t0).await, Err(CaError::NoSealKey)));
        assert!(matches!(bare.rotate(t0, 1).await, Err(CaError::NoSealKey)));
        let other = CaHome::database(db.store.clone(), Some(seal_key('B')));
        assert!(matches!(
            other.signing(t0).await,
            Err(CaError::WrongSealKey)
        ));
        assert_eq!(keys(&db.store).await?.len(), 2, "nothing written");
        Ok(())
    }

    #[tokio::test]
    async fn without_a_seal_key_nothing_is_made() -> Result<(), CaError> {
        let db = testing::fresh().await;
        let bare = CaHome::database(db.store.clone(), None);
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        assert!(matches!(bare.signing(t0).await, Err(CaError::NoSealKey)));
        assert!(keys(&db.store).await?.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn a_key_left_in_clear_is_refused_without_the_seal_key_and_sealed_with_it()
    -> Result<(), CaError> {
        let db = testing::fresh().await;
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let legacy = DeploymentCa::generate(t0, CaPolicy::default().lifetime, None)?;
        let clear = legacy.key.serialize_pem();
        for (id, until) in [(1, Some(t0.millis())), (2, None)] {
            sqlx::query(
                "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at, trusted_until) \
                 VALUES ($1, $2, $3, 0, $4)",
            )
            .bind(id)
            .bind(legacy.cert_pem())
            .bind(&clear)
            .bind(until)
            .execute(db.store.pool())
            .await
            .map_err(StoreError::from)?;
        }
        let bare = CaHome::database(db.store.clone(), None);
        assert!(matches!(bare.signing(t0).await, Err(CaError::KeyInClear)));
        assert_eq!(
            keys(&db.store).await?,
            [clear.clone(), clear.clone()],
            "untouched"
        );
        let home = CaHome::database(db.store.clone(), Some(seal_key('A')));
        let ca = home.signing(t0).await?;
        assert_eq!(ca.cert_pem(), legacy.cert_pem(), "the same CA, now sealed");
        let stored = keys(&db.store).await?;
        assert_eq!(stored[0], "", "a rotated-out row's key is dropped");
        assert_eq!(seal_key('A').open(2, &stored[1])?, clear);
        Ok(())
    }

    #[tokio::test]
    async fn a_ca_another_process_replaced_first_is_not_replaced_again() -> Result<(), CaError> {
        let db = testing::fresh().await;
        let seal = seal_key('A');
        let home = CaHome::database(db.store.clone(), Some(seal.clone()));
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let old = home.signing(t0).await?;
        let lifetime = CaPolicy::default().lifetime;
        let (a, b) = (
            DeploymentCa::generate(t0, lifetime, None)?,
            DeploymentCa::generate(t0, lifetime, None)?,
        );
        assert!(replace(&db.store, &seal, &old, &a, t0.millis(), t0).await?);
        assert!(!replace(&db.store, &seal, &old, &b, t0.millis(), t0).await?);
        assert_eq!(home.signing(t0).await?.cert_pem(), a.cert_pem());
        assert_eq!(keys(&db.store).await?.len(), 2);
        Ok(())
    }
}
