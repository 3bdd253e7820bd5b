//! Token buckets keyed by anything: `capacity` tokens, refilled evenly over `window`. Kept in
//! memory per process; a key whose bucket has refilled is forgotten when the map grows, and
//! the map never holds more than [`MAX_KEYS`] keys, so a flood from many addresses cannot grow
//! it without bound. The resume limits and the unauthenticated-request limit both count here.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::settings::Budget;

/// Keys kept before refilled buckets are swept out.
const SWEEP_AT: usize = 16 * 1024;

/// Most keys one set holds (a few MiB): past it, after a sweep, a new key is not tracked (not
/// charged) until old ones refill, so memory stays bounded; keys already held stay limited.
pub(crate) const MAX_KEYS: usize = 64 * 1024;

/// One key's bucket, plus whatever the caller keeps beside it.
#[derive(Debug, Clone)]
struct Bucket<V> {
    tokens: f64,
    at: Instant,
    value: V,
}

/// A set of token buckets.
#[derive(Debug)]
pub(crate) struct Buckets<K, V> {
    capacity: f64,
    per_second: f64,
    map: Mutex<HashMap<K, Bucket<V>>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Buckets<K, V> {
    /// `budget.per_window` tokens per key, refilled over `budget.window` (a zero window never
    /// limits).
    pub(crate) fn new(budget: Budget) -> Self {
        let capacity = f64::from(budget.per_window.max(1));
        let secs = budget.window.as_secs_f64();
        Self {
            capacity,
            per_second: if secs > 0.0 {
                capacity / secs
            } else {
                f64::INFINITY
            },
            map: Mutex::new(HashMap::new()),
        }
    }

    fn refill(&self, b: &mut Bucket<V>, now: Instant) {
        let gained = now.saturating_duration_since(b.at).as_secs_f64() * self.per_second;
        b.tokens = (b.tokens + gained).min(self.capacity);
        b.at = now;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Bucket<V>>> {
        // A panic while holding this lock cannot leave a bucket half-updated in a way that
        // matters; keep limiting rather than fail every request.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `None` when `key` has a token left (or no bucket yet); otherwise how long until it
    /// has one, and the value kept with it.
    pub(crate) fn empty(&self, key: &K, now: Instant) -> Option<(Duration, V)> {
        let mut map = self.lock();
        let b = map.get_mut(key)?;
        self.refill(b, now);
        if b.tokens >= 1.0 {
            return None;
        }
        let wait = (1.0 - b.tokens) / self.per_second;
        Some((
            Duration::from_secs_f64(wait.clamp(0.0, 86_400.0)),
            b.value.clone(),
        ))
    }

    /// Takes one token from `key`'s bucket (creating it full) and keeps `value` beside it.
    pub(crate) fn take(&self, key: K, value: V, now: Instant) {
        let mut map = self.lock();
        if map.len() >= SWEEP_AT {
            let full = self.capacity;
            let per_second = self.per_second;
            map.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * per_second < full
            });
            if map.len() >= MAX_KEYS && !map.contains_key(&key) {
                return;
            }
        }
        let b = map.entry(key).or_insert_with(|| Bucket {
            tokens: self.capacity,
            at: now,
            value: value.clone(),
        });
        self.refill(b, now);
        b.tokens = (b.tokens - 1.0).max(0.0);
        b.value = value;
    }

    /// Drops `key`'s bucket (its kept value went stale).
    pub(crate) fn forget(&self, key: &K) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_empties_then_refills_over_its_window() {
        let b: Buckets<&str, ()> = Buckets::new(Budget {
            per_window: 3,
            window: Duration::from_secs(3),
        });
        let t0 = Instant::now();
        assert!(b.empty(&"k", t0).is_none(), "no bucket yet: not limited");
        for _ in 0..3 {
            b.take("k", (), t0);
        }
        let (wait, ()) = b.empty(&"k", t0).unwrap_or_else(|| unreachable!("limited"));
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1));
        assert!(b.empty(&"other", t0).is_none(), "keys are apart");
        assert!(b.empty(&"k", t0 + Duration::from_secs(1)).is_none());
        b.forget(&"k");
        assert!(b.empty(&"k", t0).is_none());
    }

    #[test]
    fn the_map_holds_at_most_max_keys() {
        let b: Buckets<usize, ()> = Buckets::new(Budget {
            per_window: 2,
            window: Duration::from_secs(3600),
        });
        let t0 = Instant::now();
        for k in 0..MAX_KEYS + 10 {
            b.take(k, (), t0);
        }
        assert_eq!(b.lock().len(), MAX_KEYS);
        // Keys already held keep being limited.
        b.take(0, (), t0);
        assert!(b.empty(&0, t0).is_some());
    }
}
