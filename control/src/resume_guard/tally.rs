//! Rejected resume answers, counted in memory and written per card in batches: the first
//! rejection of a card schedules one flush after `flush_after`, and a card whose count
//! reaches `flush_at` is flushed at once. A wrong secret therefore costs no database write of
//! its own, yet the card's `rejected_count` and its one `decision_rejected` audit row still
//! say what happened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use egressgate_store::{InterruptId, Store, Timestamp};

/// One card's rejections not yet written.
#[derive(Debug)]
struct Pending {
    count: u32,
    first_reason: &'static str,
}

/// The in-memory tally and its flush policy.
#[derive(Debug)]
pub(crate) struct Tally {
    flush_after: Duration,
    flush_at: u32,
    pending: Mutex<HashMap<InterruptId, Pending>>,
}

impl Tally {
    pub(crate) fn new(flush_after: Duration, flush_at: u32) -> Self {
        Self {
            flush_after,
            flush_at: flush_at.max(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<InterruptId, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one rejection of card `id`; the write happens later, off the request path.
    pub(crate) fn note(self: &Arc<Self>, store: &Store, id: &InterruptId, reason: &'static str) {
        let (first, full) = {
            let mut map = self.lock();
            let p = map.entry(id.clone()).or_insert(Pending {
                count: 0,
                first_reason: reason,
            });
            p.count += 1;
            (p.count == 1, p.count >= self.flush_at)
        };
        if full {
            self.spawn_flush(store, id, Duration::ZERO);
        } else if first {
            self.spawn_flush(store, id, self.flush_after);
        }
    }

    fn spawn_flush(self: &Arc<Self>, store: &Store, id: &InterruptId, after: Duration) {
        let (tally, store, id) = (self.clone(), store.clone(), id.clone());
        tokio::spawn(async move {
            if !after.is_zero() {
                tokio::time::sleep(after).await;
            }
            tally.flush(&store, &id).await;
        });
    }

    /// Writes what is pending for `id` (nothing if an earlier flush took it).
    async fn flush(&self, store: &Store, id: &InterruptId) {
        let Some(p) = self.lock().remove(id) else {
            return;
        };
        if let Err(e) = store
            .record_rejected_decisions(id, p.first_reason, i64::from(p.count), Timestamp::now())
            .await
        {
            tracing::warn!(error = %e, interrupt_id = %id, count = p.count,
                "could not record rejected decisions");
        }
    }
}
