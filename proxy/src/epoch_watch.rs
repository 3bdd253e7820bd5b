//! Following the store's cache epoch (grown by revocations, declines, admin removals, hidden
//! chats and users' changed rights in any process). Cached allows are tagged with the epoch
//! they were decided under, so a change invalidates them; each new epoch also re-checks the
//! open connections ([`crate::revoke::sweep`]) and closes those nothing allows any more.
//!
//! The epoch is read when a change is pushed — the store wakes this task the moment a change
//! that may move the epoch commits, in this process or, on PostgreSQL, in any process (its
//! `LISTEN`) — when a connection registered late (its decision predates the epoch, so the
//! last sweep may have missed it), and every `epoch_poll` in case a push was lost. A failed
//! read makes the epoch unknown, which trusts no cached allow and drops cached turns, so
//! nothing is allowed on unknown state. Nothing here runs per request.

use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio::sync::watch;

use crate::shared::Shared;

/// Reads the epoch and sweeps on each wake-up until the proxy is gone.
pub(crate) async fn watch_epoch(shared: Weak<Shared>) {
    let (mut pushed, registry) = match shared.upgrade() {
        Some(s) => (s.store.subscribe_epoch(), s.registry.clone()),
        None => return,
    };
    let mut healthy = true;
    // The epoch the open connections were last checked under.
    let mut swept: Option<i64> = None;
    let mut last_read = Instant::now();
    loop {
        let Some(s) = shared.upgrade() else { return };
        match s.store.cache_epoch().await {
            Ok(epoch) => {
                s.epoch.set(Some(epoch));
                last_read = Instant::now();
                s.metrics.cache_epoch.set(epoch);
                healthy = true;
                if swept != Some(epoch) || crate::revoke::take_late(&s.registry) {
                    swept = sweep(&s, epoch).await;
                }
            }
            Err(e) => {
                if healthy {
                    tracing::error!(error = %e, "database unreachable; trusting no cached decision");
                }
                s.epoch.set(None);
                s.turns.clear();
                healthy = false;
            }
        }
        s.metrics
            .cache_epoch_age_seconds
            .set(last_read.elapsed().as_secs_f64());
        let poll = s.settings.epoch_poll;
        drop(s);
        wake_up(&mut pushed, &registry, poll).await;
    }
}

/// Re-checks the open connections under `epoch`: the epoch now swept, or `None` when the
/// check failed (the next wake-up tries again).
async fn sweep(s: &Shared, epoch: i64) -> Option<i64> {
    match crate::revoke::sweep(&s.registry, &s.store).await {
        Ok(done) => {
            s.metrics.revoked_connections.inc_by(done.stopped as u64);
            Some(epoch)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot re-check open connections; retrying");
            None
        }
    }
}

/// Waits for a pushed change, a late registration or the poll interval, whichever is first.
async fn wake_up(
    pushed: &mut watch::Receiver<u64>,
    registry: &Arc<crate::revoke::Registry>,
    poll: std::time::Duration,
) {
    tokio::select! {
        changed = pushed.changed() => {
            if changed.is_err() {
                // The store's signal is gone (it lives as long as the store): poll only.
                tokio::time::sleep(poll).await;
            }
        }
        () = registry.late_registered() => {}
        () = tokio::time::sleep(poll) => {}
    }
}
