//! The janitor: deletes what nothing may read any more — pointer rows past their purge time,
//! expired drafts, approvals, resume slots and inbox links — and blobs that no pointer names (a snapshot
//! written for a registration that lost its race) or that outlived the snapshot retention —
//! and turns (with their refusal and egress rows) that expired more than the retention ago,
//! so the database stays bounded under a steady stream of turns. Reads already filter on
//! every expiry; this only reclaims space.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::Row as _;

use super::{Store, StoreError};
use crate::blob::{BlobError, BlobRef, BlobStore};
use crate::time::Timestamp;

/// What one sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepCounts {
    /// Pointer rows past `purge_at`.
    pub interrupts: u64,
    /// Drafts past their expiry.
    pub drafts: u64,
    /// Resume slots whose lease lapsed.
    pub resume_slots: u64,
    /// Approval rows past their expiry.
    pub approvals: u64,
    /// Blobs deleted.
    pub blobs: u64,
    /// Chat events older than [`super::events::RETENTION`].
    pub events: u64,
    /// Admin console sessions past their expiry.
    pub ui_sessions: u64,
    /// Inbox links past their purge time (a day after they expired).
    pub inbox_links: u64,
}

/// Turns deleted per transaction by [`Store::purge_turns`].
pub const TURN_BATCH: i64 = 2_000;
/// Batches per [`Store::purge_turns`] call (at most 200,000 turns per janitor pass).
pub const TURN_BATCHES: usize = 100;

impl Store {
    /// Deletes rows past their expiry (pointer rows past the purge time, not the logical
    /// expiry, so a just-expired request still answers "expired").
    pub async fn janitor_sweep(&self, now: Timestamp) -> Result<SweepCounts, StoreError> {
        let mut counts = SweepCounts::default();
        for (sql, slot) in [
            (
                "DELETE FROM interrupts WHERE purge_at <= $1",
                &mut counts.interrupts,
            ),
            (
                "DELETE FROM drafts WHERE expires_at <= $1",
                &mut counts.drafts,
            ),
            (
                "DELETE FROM resume_slots WHERE expires_at <= $1",
                &mut counts.resume_slots,
            ),
            (
                "DELETE FROM approvals WHERE expires_at <= $1",
                &mut counts.approvals,
            ),
            (
                "DELETE FROM ui_sessions WHERE expires_at <= $1",
                &mut counts.ui_sessions,
            ),
            (
                "DELETE FROM inbox_links WHERE purge_at <= $1",
                &mut counts.inbox_links,
            ),
        ] {
            *slot = sqlx::query(sql)
                .bind(now.millis())
                .execute(self.pool())
                .await?
                .rows_affected();
        }
        if counts.approvals > 0 {
            // The deletion moved the cache epoch (migration 2): proxies drop what they
            // remembered of those rows now rather than at their next poll.
            self.epoch_moved().await?;
        }
        let horizon = now
            .millis()
            .saturating_sub(i64::try_from(super::events::RETENTION.as_millis()).unwrap_or(0));
        counts.events = sqlx::query("DELETE FROM events WHERE at <= $1")
            .bind(horizon)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(counts)
    }

    /// Deletes the turns that expired at or before `before` and that no interrupt row names
    /// any more, with their refusal and egress rows, in batches of [`TURN_BATCH`] turns (one
    /// transaction each, so the proxy's writes wait for one batch at most), at most
    /// [`TURN_BATCHES`] batches per call; the next pass continues. Returns the turns deleted.
    /// A purged turn's id answers as unknown, like any id that never existed.
    pub async fn purge_turns(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.purge_turns_in(before, TURN_BATCH, TURN_BATCHES).await
    }

    async fn purge_turns_in(
        &self,
        before: Timestamp,
        batch: i64,
        batches: usize,
    ) -> Result<u64, StoreError> {
        // The same set in every statement of a batch: the oldest expired turns first.
        const BATCH: &str = "SELECT t.turn_id FROM turns t WHERE t.expires_at <= $1 \
             AND NOT EXISTS (SELECT 1 FROM interrupts i WHERE i.turn_id = t.turn_id) \
             ORDER BY t.expires_at, t.turn_id LIMIT $2";
        let mut total = 0;
        for _ in 0..batches {
            let mut tx = self.begin().await?;
            for child in ["refusals", "refusal_evidence", "egress"] {
                let sql = format!("DELETE FROM {child} WHERE turn_id IN ({BATCH})");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(before.millis())
                    .bind(batch)
                    .execute(&mut *tx)
                    .await?;
            }
            let sql = format!("DELETE FROM turns WHERE turn_id IN ({BATCH})");
            let n = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(before.millis())
                .bind(batch)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            total += n;
            if n < u64::try_from(batch).unwrap_or(0) {
                break;
            }
        }
        Ok(total)
    }

    /// Every blob key a pointer row names: `(snapshots, answers)`.
    async fn referenced_blobs(&self) -> Result<(HashSet<String>, HashSet<String>), StoreError> {
        let rows = sqlx::query(
            "SELECT snapshot_key, first_answer_key, answer_key FROM interrupts \
             WHERE snapshot_key IS NOT NULL OR first_answer_key IS NOT NULL \
             OR answer_key IS NOT NULL",
        )
        .fetch_all(self.pool())
        .await?;
        let (mut snapshots, mut answers) = (HashSet::new(), HashSet::new());
        for r in rows {
            if let Some(k) = r.try_get::<Option<String>, _>(0)? {
                snapshots.insert(k);
            }
            for i in [1, 2] {
                if let Some(loc) = r.try_get::<Option<String>, _>(i)? {
                    answers.extend(BlobRef::from_locator(&loc).map(|b| b.key));
                }
            }
        }
        Ok((snapshots, answers))
    }
}

/// Deletes blobs older than `grace` that no pointer names, and snapshots older than
/// `snapshot_retention` (no request can be answered that late: its logical expiry is
/// clamped below the retention). Answers of done requests stay until their row is purged.
pub async fn sweep_blobs(
    store: &Store,
    blobs: &dyn BlobStore,
    now: Timestamp,
    snapshot_retention: Duration,
    grace: Duration,
) -> Result<u64, BlobError> {
    let before = |d: Duration| {
        Timestamp::from_millis(
            now.millis()
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    };
    let candidates = blobs.list_older_than(before(grace)).await?;
    if candidates.is_empty() {
        return Ok(0);
    }
    let old: HashSet<String> = blobs
        .list_older_than(before(snapshot_retention))
        .await?
        .into_iter()
        .collect();
    let (snapshots, answers) = store.referenced_blobs().await?;
    let mut deleted = 0;
    for key in candidates {
        let orphan = !snapshots.contains(&key) && !answers.contains(&key);
        let stale_snapshot = old.contains(&key) && !answers.contains(&key);
        if orphan || stale_snapshot {
            blobs.delete(&key).await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// One janitor pass: rows, then blobs (rows first, so blobs of purged rows go in the same
/// pass). The binary runs this on a timer.
pub async fn janitor_pass(
    store: &Store,
    blobs: &dyn BlobStore,
    now: Timestamp,
    snapshot_retention: Duration,
    grace: Duration,
) -> Result<SweepCounts, BlobError> {
    let mut counts = store.janitor_sweep(now).await?;
    counts.blobs = sweep_blobs(store, blobs, now, snapshot_retention, grace).await?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::refusals::{EgressEvent, RefusalEvent};
    use crate::db::testing;
    use crate::db::turns::Turn;
    use crate::host::Host;
    use crate::reason::RefusalReason;

    /// A turn opened at `at` for one minute, with one refusal and one egress row.
    async fn turn_with_rows(
        s: &Store,
        chat: &str,
        at: Timestamp,
    ) -> Result<Turn, Box<dyn std::error::Error>> {
        let turn = testing::open_turn_at(s, "u1", chat, at).await?;
        let refusal = RefusalEvent {
            turn: turn.id.clone(),
            host: "blocked.example.com".into(),
            port: 443,
            reason: RefusalReason::NotApproved,
            url: None,
            package: None,
            at,
            shadow: false,
            method: None,
            upload: false,
            command: None,
        };
        s.record_refusals(&[refusal], 256).await?;
        let egress = EgressEvent {
            turn: turn.id.clone(),
            host: Host::parse("files.example.com")?,
            connections: 1,
            bytes_up: 10,
            bytes_down: 20,
            at,
        };
        s.record_egress(&[egress]).await?;
        Ok(turn)
    }

    #[tokio::test]
    async fn purge_deletes_turns_expired_before_the_horizon_with_their_rows()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let s = &db.store;
        let now = Timestamp::now();
        let hour = 3_600_000;
        let old = turn_with_rows(s, "c1", Timestamp::from_millis(now.millis() - 3 * hour)).await?;
        let named =
            turn_with_rows(s, "c2", Timestamp::from_millis(now.millis() - 3 * hour)).await?;
        let recent = turn_with_rows(s, "c3", now).await?;
        // An interrupt row still names `named`: its turn stays until the row is purged.
        sqlx::query(
            "INSERT INTO interrupts (user_id, chat_id, interrupt_id, secret_hash, turn_id, \
             turn_seq, card, state, created_at, expires_at, purge_at) \
             VALUES ('u1', 'c2', 'int_1', 'h', $1, 1, '{}', 'expired', 0, 0, $2)",
        )
        .bind(named.id.as_str())
        .bind(now.millis() + hour)
        .execute(s.pool())
        .await?;

        let horizon = Timestamp::from_millis(now.millis() - hour);
        assert_eq!(s.purge_turns(horizon).await?, 1);
        assert!(s.turn(&old.id).await?.is_none());
        assert!(s.list_refusals(&old.id).await?.0.is_empty());
        assert!(s.list_egress(&old.id).await?.is_empty());
        for kept in [&named, &recent] {
            assert!(s.turn(&kept.id).await?.is_some());
            assert_eq!(s.list_refusals(&kept.id).await?.0.len(), 1);
            assert_eq!(s.list_egress(&kept.id).await?.len(), 1);
        }
        // Nothing left to purge: a second pass deletes nothing.
        assert_eq!(s.purge_turns(horizon).await?, 0);
        Ok(())
    }

    #[tokio::test]
    async fn purge_works_through_batches_and_stops_at_the_pass_limit()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let s = &db.store;
        let old = Timestamp::from_millis(Timestamp::now().millis() - 3_600_000);
        for i in 0..8 {
            turn_with_rows(s, &format!("c{}", i % 3), old).await?;
        }
        let rows = |table: &'static str| async move {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
                .fetch_one(s.pool())
                .await
        };
        // Two batches of 3 in this pass; the next pass takes the last 2.
        assert_eq!(s.purge_turns_in(Timestamp::now(), 3, 2).await?, 6);
        assert_eq!(rows("turns").await?, 2);
        assert_eq!(rows("refusals").await?, 2);
        assert_eq!(s.purge_turns_in(Timestamp::now(), 3, 2).await?, 2);
        for table in ["turns", "refusals", "egress"] {
            assert_eq!(rows(table).await?, 0, "{table}");
        }
        Ok(())
    }
}
