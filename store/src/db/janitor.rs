//! The janitor: deletes what nothing may read any more — pointer rows past their purge time,
//! expired drafts, approvals and resume slots — and blobs that no pointer names (a snapshot
//! written for a registration that lost its race) or that outlived the snapshot retention.
//! Reads already filter on every expiry; this only reclaims space.

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
}

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
        ] {
            *slot = sqlx::query(sql)
                .bind(now.millis())
                .execute(self.pool())
                .await?
                .rows_affected();
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
