//! Step 3, decide: the design's ordered rules, first match wins. Names are judged before any
//! DNS; an allow is cached for the turn; a miss always asks the database, so a fresh approval
//! works on the very next request.

use std::time::Duration;

use egressgate_store::{Host, RefusalReason, Store, StoreError, Timestamp};

use crate::identify::TurnEntry;
use crate::target::Target;

/// The outcome for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead and dial (addresses are still vetted).
    Allow,
    /// Refuse with this reason.
    Refuse(RefusalReason),
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

/// Decides a request for a turn. Store errors propagate so the caller answers `503`.
pub async fn decide(
    store: &Store,
    turn: &TurnEntry,
    target: &Target,
    internal: &[Host],
    ports: &[u16],
    cache_ttl: Duration,
) -> Result<Decision, StoreError> {
    if let Some(reason) = static_rules(target, internal, ports) {
        return Ok(Decision::Refuse(reason));
    }
    let host = &target.host;
    if turn.allowed_recently(host, cache_ttl) || turn.launch_allows(host) {
        return Ok(Decision::Allow);
    }
    if store
        .site_allowed(&turn.turn.user, &turn.turn.chat, host, Timestamp::now())
        .await?
    {
        turn.remember_allowed(host);
        return Ok(Decision::Allow);
    }
    Ok(Decision::Refuse(RefusalReason::NotApproved))
}
