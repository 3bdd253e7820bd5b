//! Revocation closes what is open. Every open tunnel and every keep-alive client connection
//! that forwarded a request is registered here, keyed by turn and host, with the grant that
//! let it through and a stop signal. When the store's cache epoch changes (a revocation, a
//! decline, an admin removal, a hidden chat, a user losing `can_approve`; pushed to
//! [`crate::epoch_watch`] as the change commits), [`sweep`] reads in
//! one batch what still allows the open connections and stops the ones nothing allows any
//! more; the rest (another chat's tunnel to the same host, a launch-time site) stay open.
//!
//! When the process's drain time runs out, [`Registry::stop_all`] stops every registered
//! connection the same way.
//!
//! Registering costs one lock of one of [`SHARDS`] maps, once per tunnel or once per
//! (connection, turn, host): never a database trip and never a process-wide lock per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use egressgate_store::db::revalidate::OpenGrant;
use egressgate_store::{ChatId, Grant, Host, Store, StoreError, Timestamp, TurnId, UserId};
use tokio::sync::Notify;

use crate::decide::CacheEpoch;
use crate::identify::TurnEntry;

/// Independent maps, so concurrent registrations rarely meet on a lock.
const SHARDS: usize = 16;

/// A one-way stop signal for one tunnel or one client connection; clones share it. A flag
/// and a [`Notify`] rather than a `watch` channel: an idle tunnel holds one of these for its
/// whole life, and a channel's shared state is several times larger (measured in `bench/`).
#[derive(Clone, Default)]
pub(crate) struct Stop(Arc<StopState>);

#[derive(Default)]
struct StopState {
    /// [`OPEN`], [`REVOKED`] or [`DRAINED`]: the first stop's cause.
    cause: AtomicU8,
    notify: Notify,
}

/// Not stopped.
const OPEN: u8 = 0;
/// Stopped because nothing allows it any more.
const REVOKED: u8 = 1;
/// Stopped because the process's drain time ran out.
const DRAINED: u8 = 2;

impl Stop {
    /// Tells whoever waits on [`Stop::stopped`] to end, for `cause` (the first cause stays).
    fn stop(&self, cause: u8) {
        let _ = self
            .0
            .cause
            .compare_exchange(OPEN, cause, Ordering::AcqRel, Ordering::Acquire);
        self.0.notify.notify_waiters();
    }

    /// Whether the signal was given.
    pub(crate) fn is_stopped(&self) -> bool {
        self.0.cause.load(Ordering::Acquire) != OPEN
    }

    /// Whether it was given because a revocation left nothing that allows the connection.
    pub(crate) fn is_revoked(&self) -> bool {
        self.0.cause.load(Ordering::Acquire) == REVOKED
    }

    /// Resolves once the signal is given (at once if it already was).
    pub(crate) fn stopped(&self) -> impl Future<Output = ()> + use<> {
        let state = self.0.clone();
        async move {
            // A `Notified` sees every `notify_waiters` made after it was created, so checking
            // the flag after creating it cannot miss a stop given in between.
            let notified = state.notify.notified();
            if state.cause.load(Ordering::Acquire) == OPEN {
                notified.await;
            }
        }
    }
}

/// One registered connection. The turn is the connection's own shared entry, not copies of
/// its ids: ten thousand idle tunnels each kept three id strings here.
struct Watched {
    turn: Arc<TurnEntry>,
    host: Host,
    grant: Grant,
    stop: Stop,
}

/// The open connections of this process.
pub(crate) struct Registry {
    shards: [Mutex<HashMap<u64, Watched>>; SHARDS],
    next: AtomicU64,
    /// Set when a connection registered after its decision's epoch had moved on: the sweep
    /// for the new epoch may have missed it, so the epoch watcher sweeps again.
    late: AtomicBool,
    /// Wakes the epoch watcher when `late` is set, so that sweep does not wait for a poll.
    late_wake: Notify,
    /// Set by [`Registry::stop_all`]: a connection registered after it is stopped at once.
    drained: AtomicBool,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::default()),
            next: AtomicU64::new(0),
            late: AtomicBool::new(false),
            late_wake: Notify::new(),
            drained: AtomicBool::new(false),
        }
    }
}

/// Keeps a connection registered while it lives.
pub(crate) struct Registration {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut m) = self.registry.shard(self.id).lock() {
            m.remove(&self.id);
        }
    }
}

impl Registry {
    fn shard(&self, id: u64) -> &Mutex<HashMap<u64, Watched>> {
        // The modulo keeps the index below SHARDS, so the cast cannot truncate.
        &self.shards[(id % SHARDS as u64) as usize]
    }

    /// Registers a connection of `turn` to `host`, let through by `grant` (decided under
    /// cache epoch `decided`), to be stopped through `stop` when that no longer holds.
    pub(crate) fn register(
        self: &Arc<Self>,
        turn: &Arc<TurnEntry>,
        host: &Host,
        grant: &Grant,
        stop: Stop,
        decided: Option<i64>,
        epoch: &CacheEpoch,
    ) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let watched = Watched {
            turn: turn.clone(),
            host: host.clone(),
            grant: grant.clone(),
            stop,
        };
        let drained_stop = watched.stop.clone();
        if let Ok(mut m) = self.shard(id).lock() {
            m.insert(id, watched);
        }
        // Read after the insert, as `stop_all` sets the flag before it walks the shards:
        // one of the two sees the other.
        if self.drained.load(Ordering::SeqCst) {
            drained_stop.stop(DRAINED);
        }
        // Read after the insert: if the epoch moved since the decision, the sweep for the new
        // epoch may have taken its snapshot before this entry was there.
        if epoch.get() != decided || decided.is_none() {
            self.late.store(true, Ordering::Release);
            self.late_wake.notify_one();
        }
        Registration {
            registry: self.clone(),
            id,
        }
    }
}

impl Registry {
    /// Stops every registered connection, and any registered later: the drain time ran out.
    /// One pass here instead of a drain timer in each of ten thousand tunnels. Returns how
    /// many were open.
    pub(crate) fn stop_all(&self) -> usize {
        self.drained.store(true, Ordering::SeqCst);
        let mut stopped = 0;
        for shard in &self.shards {
            if let Ok(m) = shard.lock() {
                for w in m.values() {
                    w.stop.stop(DRAINED);
                    stopped += 1;
                }
            }
        }
        stopped
    }
}

/// What one sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Connections looked at.
    pub checked: usize,
    /// Connections told to stop.
    pub stopped: usize,
}

impl Registry {
    /// Resolves once a connection registered late (see [`Registry::register`]), at once if
    /// one did since the last wait.
    pub(crate) async fn late_registered(&self) {
        self.late_wake.notified().await;
    }
}

/// Whether a connection registered late since the last call (see [`Registry::register`]).
pub(crate) fn take_late(registry: &Registry) -> bool {
    registry.late.swap(false, Ordering::AcqRel)
}

/// Re-checks every open connection against the store in one batched read and stops those
/// nothing allows any more. On a store error nothing is stopped (the caller retries at the
/// next poll; new requests already fail closed).
pub(crate) async fn sweep(registry: &Registry, store: &Store) -> Result<Swept, StoreError> {
    // Snapshot under each shard's lock in turn, then let go before the database trip.
    let mut open: Vec<(TurnId, UserId, ChatId, Host, Grant, Stop)> = Vec::new();
    for shard in &registry.shards {
        if let Ok(m) = shard.lock() {
            open.extend(m.values().filter(|w| !w.stop.is_stopped()).map(|w| {
                let t = &w.turn.turn;
                (
                    t.id.clone(),
                    t.user.clone(),
                    t.chat.clone(),
                    w.host.clone(),
                    w.grant.clone(),
                    w.stop.clone(),
                )
            }));
        }
    }
    if open.is_empty() {
        return Ok(Swept::default());
    }
    let turns: Vec<(TurnId, UserId, ChatId)> = open
        .iter()
        .map(|(t, u, c, ..)| (t.clone(), u.clone(), c.clone()))
        .collect();
    let now = Timestamp::now();
    let allowed = store.still_allowed(&turns, now).await?;
    let mut swept = Swept {
        checked: open.len(),
        stopped: 0,
    };
    for (turn, user, chat, host, grant, stop) in &open {
        let o = OpenGrant {
            turn,
            user,
            chat,
            host,
            grant,
        };
        if !allowed.keeps(o, now) {
            tracing::info!(
                turn_id = %turn,
                chat_id = %chat,
                host = host.as_str(),
                grant = grant.kind_str(),
                card_id = card_of(grant),
                "revoked: closing an open connection"
            );
            stop.stop(REVOKED);
            swept.stopped += 1;
        }
    }
    Ok(swept)
}

/// The card behind an approval grant, for logs.
pub(crate) fn card_of(grant: &Grant) -> Option<&str> {
    match &grant.kind {
        egressgate_store::GrantKind::Approval { card_id } => Some(card_id.as_str()),
        _ => None,
    }
}

/// The registrations of one keep-alive client connection: one per (turn, host) it forwarded
/// to, all sharing the connection's stop signal (stopping closes the whole connection; the
/// client reconnects and its next request is decided afresh).
#[derive(Default)]
pub(crate) struct ConnWatch {
    /// Stops the client connection.
    pub stop: Stop,
    regs: Mutex<Vec<(TurnId, Host, Grant, Registration)>>,
}

impl ConnWatch {
    /// Registers the connection for `turn` → `host` under `grant` (decided under cache epoch
    /// `decided`), unless it already is.
    pub(crate) fn watch(
        &self,
        registry: &Arc<Registry>,
        turn: &Arc<TurnEntry>,
        host: &Host,
        grant: &Grant,
        decided: Option<i64>,
        epoch: &CacheEpoch,
    ) {
        let Ok(mut regs) = self.regs.lock() else {
            return;
        };
        if regs
            .iter()
            .any(|(t, h, g, _)| t == &turn.turn.id && h == host && g == grant)
        {
            return;
        }
        let reg = registry.register(turn, host, grant, self.stop.clone(), decided, epoch);
        regs.push((turn.turn.id.clone(), host.clone(), grant.clone(), reg));
    }
}
