//! Slack interaction requests already accepted (migration 0020), so a replay inside the five
//! minutes a timestamp is accepted for is refused on whichever control process it lands: the
//! first insert of a signature wins, in the shared database.

use super::{Store, StoreError};
use crate::time::Timestamp;

impl Store {
    /// Records the accepted request whose signature hashes to `signature_hash`: `true` the
    /// first time, `false` for a replay. Rows older than `keep` are dropped on the way (a
    /// request that old is refused for its timestamp before it gets here).
    pub async fn slack_request_first_seen(
        &self,
        signature_hash: &str,
        now: Timestamp,
        keep: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let horizon = now
            .millis()
            .saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        sqlx::query("DELETE FROM slack_replays WHERE seen_at < $1")
            .bind(horizon)
            .execute(self.pool())
            .await?;
        self.changed_a_row(
            sqlx::query(
                "INSERT INTO slack_replays (signature_hash, seen_at) VALUES ($1, $2) \
                 ON CONFLICT (signature_hash) DO NOTHING",
            )
            .bind(signature_hash)
            .bind(now.millis()),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::fresh;

    #[tokio::test]
    async fn a_signature_is_accepted_once_until_it_ages_out() {
        let db = fresh().await;
        let s = &db.store;
        let keep = std::time::Duration::from_secs(600);
        let now = Timestamp::now();
        assert_eq!(
            s.slack_request_first_seen("h1", now, keep).await.ok(),
            Some(true)
        );
        assert_eq!(
            s.slack_request_first_seen("h1", now, keep).await.ok(),
            Some(false)
        );
        assert_eq!(
            s.slack_request_first_seen("h2", now, keep).await.ok(),
            Some(true)
        );
        let later = now.plus(std::time::Duration::from_secs(601));
        assert_eq!(
            s.slack_request_first_seen("h1", later, keep).await.ok(),
            Some(true)
        );
    }
}
