//! Revocation closes what is open. Every open tunnel and every keep-alive client connection
//! that forwarded a request is registered here, keyed by turn and host, with the grant that
//! let it through and a stop signal. When the store's cache epoch changes (a revocation, a
//! decline, an admin removal, a hidden chat, a user losing `can_approve`), [`sweep`] reads in
//! one batch what still allows the open connections and stops the ones nothing allows any
//! more; the rest (another chat's tunnel to the same host, a launch-time site) stay open.
//!
//! Registering costs one lock of one of [`SHARDS`] maps, once per tunnel or once per
//! (connection, turn, host): never a database trip and never a process-wide lock per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use egressgate_store::db::revalidate::OpenGrant;
use egressgate_store::db::turns::Turn;
use egressgate_store::{ChatId, Grant, Host, Store, StoreError, Timestamp, TurnId, UserId};
use tokio::sync::watch;

use crate::decide::CacheEpoch;

/// Independent maps, so concurrent registrations rarely meet on a lock.
const SHARDS: usize = 16;

/// A one-way stop signal for one tunnel or one client connection.
pub(crate) struct Stop(watch::Sender<bool>);

impl Default for Stop {
    fn default() -> Self {
        Self(watch::channel(false).0)
    }
}

impl Stop {
    /// Tells whoever waits on [`Stop::stopped`] to end.
    fn stop(&self) {
        self.0.send_replace(true);
    }

    /// Whether the signal was given.
    pub(crate) fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the signal is given (at once if it already was).
    pub(crate) fn stopped(&self) -> impl Future<Output = ()> + use<> {
        let mut rx = self.0.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }
}

/// One registered connection.
struct Watched {
    turn: TurnId,
    user: UserId,
    chat: ChatId,
    host: Host,
    grant: Grant,
    stop: Arc<Stop>,
}

/// The open connections of this process.
pub(crate) struct Registry {
    shards: [Mutex<HashMap<u64, Watched>>; SHARDS],
    next: AtomicU64,
    /// Set when a connection registered after its decision's epoch had moved on: the sweep
    /// for the new epoch may have missed it, so the next poll sweeps again.
    late: AtomicBool,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::default()),
            next: AtomicU64::new(0),
            late: AtomicBool::new(false),
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
        turn: &Turn,
        host: &Host,
        grant: &Grant,
        stop: Arc<Stop>,
        decided: Option<i64>,
        epoch: &CacheEpoch,
    ) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let watched = Watched {
            turn: turn.id.clone(),
            user: turn.user.clone(),
            chat: turn.chat.clone(),
            host: host.clone(),
            grant: grant.clone(),
            stop,
        };
        if let Ok(mut m) = self.shard(id).lock() {
            m.insert(id, watched);
        }
        // Read after the insert: if the epoch moved since the decision, the sweep for the new
        // epoch may have taken its snapshot before this entry was there.
        if epoch.get() != decided || decided.is_none() {
            self.late.store(true, Ordering::Release);
        }
        Registration {
            registry: self.clone(),
            id,
        }
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

/// Whether a connection registered late since the last call (see [`Registry::register`]).
pub(crate) fn take_late(registry: &Registry) -> bool {
    registry.late.swap(false, Ordering::AcqRel)
}

/// Re-checks every open connection against the store in one batched read and stops those
/// nothing allows any more. On a store error nothing is stopped (the caller retries at the
/// next poll; new requests already fail closed).
pub(crate) async fn sweep(registry: &Registry, store: &Store) -> Result<Swept, StoreError> {
    // Snapshot under each shard's lock in turn, then let go before the database trip.
    let mut open: Vec<(TurnId, UserId, ChatId, Host, Grant, Arc<Stop>)> = Vec::new();
    for shard in &registry.shards {
        if let Ok(m) = shard.lock() {
            open.extend(m.values().filter(|w| !w.stop.is_stopped()).map(|w| {
                (
                    w.turn.clone(),
                    w.user.clone(),
                    w.chat.clone(),
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
            stop.stop();
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
    pub stop: Arc<Stop>,
    regs: Mutex<Vec<(TurnId, Host, Grant, Registration)>>,
}

impl ConnWatch {
    /// Registers the connection for `turn` → `host` under `grant` (decided under cache epoch
    /// `decided`), unless it already is.
    pub(crate) fn watch(
        &self,
        registry: &Arc<Registry>,
        turn: &Turn,
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
            .any(|(t, h, g, _)| t == &turn.id && h == host && g == grant)
        {
            return;
        }
        let reg = registry.register(turn, host, grant, self.stop.clone(), decided, epoch);
        regs.push((turn.id.clone(), host.clone(), grant.clone(), reg));
    }
}
