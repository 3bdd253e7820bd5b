//! The control plane's housekeeping: expired rows, orphaned blobs and old turns removed once
//! a minute, so the database stays bounded under a steady stream of turns.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use egressgate_store::blob::BlobStore;
use egressgate_store::{Store, Timestamp};
use tokio::sync::watch;

use super::shutdown::stopped;

/// Every minute: expired rows and orphaned blobs (`janitor_pass`), and turns that expired more
/// than `turn_retention` (the interrupt retention: a turn's record lives as long as its
/// cards') ago, with their refusals and egress rows, so a steady stream of turns keeps the
/// database bounded.
pub(super) async fn run(
    store: Store,
    blobs: Arc<dyn BlobStore>,
    retention: Duration,
    turn_retention: Duration,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped(stop.clone()) => return Ok(()),
        }
        match egressgate_store::db::janitor::janitor_pass(
            &store,
            blobs.as_ref(),
            Timestamp::now(),
            retention,
            Duration::from_secs(600),
        )
        .await
        {
            Ok(c) => tracing::debug!(?c, "janitor pass"),
            Err(e) => tracing::warn!(error = %e, "janitor pass failed"),
        }
        let horizon = Timestamp::from_millis(
            Timestamp::now()
                .millis()
                .saturating_sub(i64::try_from(turn_retention.as_millis()).unwrap_or(i64::MAX)),
        );
        match store.purge_turns(horizon).await {
            Ok(turns) => tracing::debug!(turns, "janitor turn purge"),
            Err(e) => tracing::warn!(error = %e, "janitor turn purge failed"),
        }
    }
}
