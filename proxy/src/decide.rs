//! Step 3, decide: the design's ordered rules, first match wins. Names are judged before any
//! DNS; an allow is cached for the turn; a miss always asks the database (through the
//! recorder, in the transaction that would record the refusal), so a fresh approval works on
//! the very next request.

use egressgate_store::{Grant, Host, RefusalReason, Timestamp};

use crate::identify::TurnEntry;
use crate::settings::Settings;
use crate::target::Target;

/// The store's cache epoch as last seen by this process; `None` while unknown (at start, or
/// while the database is not answering), when no cached allow is trusted.
#[derive(Debug)]
pub struct CacheEpoch(std::sync::atomic::AtomicI64);

impl Default for CacheEpoch {
    fn default() -> Self {
        Self(std::sync::atomic::AtomicI64::new(-1))
    }
}

impl CacheEpoch {
    /// The last epoch read, if known.
    pub fn get(&self) -> Option<i64> {
        let v = self.0.load(std::sync::atomic::Ordering::Acquire);
        (v >= 0).then_some(v)
    }

    /// Records a fresh read (`None`: the read failed).
    pub fn set(&self, v: Option<i64>) {
        self.0
            .store(v.unwrap_or(-1), std::sync::atomic::Ordering::Release);
    }
}

/// The outcome of the in-memory rules for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead and dial (addresses are still vetted); the grant that allows it.
    Allow(Grant),
    /// Refuse with this reason.
    Refuse(RefusalReason),
    /// Nothing in memory allows the host: the database decides, inside the transaction that
    /// records the refusal if it still stands (see [`crate::recorder::Recorder`]), so a fresh
    /// approval works on the very next request.
    AskStore,
}

/// The rules that need no database: IP literal, internal name, port.
pub fn static_rules(target: &Target, internal: &[Host], ports: &[u16]) -> Option<RefusalReason> {
    if target.host.is_ip_literal() {
        Some(RefusalReason::IpLiteral)
    } else if target.host.is_internal(internal) {
        Some(RefusalReason::InternalName)
    } else if !ports.contains(&target.port) {
        Some(RefusalReason::PortNotAllowed)
    } else {
        None
    }
}

/// Decides what memory can decide: the static rules, then a host of an enabled package
/// registry (allowed as a host: each of its requests is judged by its package, see
/// [`crate::packages`]), the turn's launch-time sites and the allows cached for this turn
/// under the current cache `epoch`.
pub fn decide(
    turn: &TurnEntry,
    target: &Target,
    settings: &Settings,
    epoch: Option<i64>,
) -> Decision {
    if let Some(reason) = static_rules(target, &settings.internal_suffixes, &settings.allow_ports) {
        return Decision::Refuse(reason);
    }
    if settings.registries.ecosystem(&target.host).is_some() {
        return Decision::Allow(Grant::registry());
    }
    let cache_ttl = settings.allow_cache_ttl;
    let host = &target.host;
    match turn
        .site_allowed_recently(host, cache_ttl, epoch, Timestamp::now())
        .or_else(|| turn.launch_grant(host))
    {
        Some(grant) => Decision::Allow(grant),
        None => Decision::AskStore,
    }
}
