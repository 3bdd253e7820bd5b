//! Bounds on the proxy's own reads of refused wheels (for their dependencies), so refused
//! requests cannot turn the proxy into a downloader or a memory sink: a few reads at once
//! across the proxy, each wheel once per turn, a few dozen per turn. State only, no I/O: the
//! shared state holds one of these and the package rule takes its permits, both importing
//! it from here (downward).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Wheels read at once, across all turns: each may hold up to [`super::wheel::WHEEL_MAX`]
/// in memory while it is fetched and parsed.
pub const WHEEL_READS_AT_ONCE: usize = 2;

/// Distinct wheels read per turn: a script cannot make the proxy download without end.
pub const WHEEL_READS_PER_TURN: usize = 32;

/// Bounds the proxy's own wheel reads: a few at once, each wheel once per turn, a few dozen
/// per turn.
pub struct WheelReads {
    at_once: Arc<tokio::sync::Semaphore>,
    /// (turn, host, path) already read; cleared when it grows past a bound.
    seen: Mutex<HashSet<(String, String, String)>>,
}

impl Default for WheelReads {
    fn default() -> Self {
        Self {
            at_once: Arc::new(tokio::sync::Semaphore::new(WHEEL_READS_AT_ONCE)),
            seen: Mutex::default(),
        }
    }
}

impl WheelReads {
    /// Whether this turn may read this wheel now (first time, under the per-turn bound).
    pub fn first(&self, turn: &str, host: &str, path: &str) -> bool {
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        if seen.iter().filter(|(t, _, _)| t == turn).count() >= WHEEL_READS_PER_TURN {
            return false;
        }
        if seen.len() >= 64 * WHEEL_READS_PER_TURN {
            seen.clear();
        }
        seen.insert((turn.to_owned(), host.to_owned(), path.to_owned()))
    }

    /// Waits for one of the [`WHEEL_READS_AT_ONCE`] slots. The read holds it from the fetch
    /// through the parse, moving it into the parse's blocking thread with the wheel (which
    /// outlives a request whose client went away), so at most that many wheels are in memory
    /// at once. `None` only if the semaphore was closed (never, in practice).
    pub async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.at_once.clone().acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wheel_is_read_once_per_turn_and_a_turn_reads_a_bounded_number() {
        let reads = WheelReads::default();
        assert!(reads.first("t1", "pypi.org", "/packages/a.whl"));
        assert!(!reads.first("t1", "pypi.org", "/packages/a.whl"));
        assert!(
            reads.first("t2", "pypi.org", "/packages/a.whl"),
            "another turn reads it"
        );
        for i in 1..WHEEL_READS_PER_TURN {
            assert!(reads.first("t1", "pypi.org", &format!("/packages/{i}.whl")));
        }
        assert!(!reads.first("t1", "pypi.org", "/packages/one-more.whl"));
    }
}
