//! A tunnel's account when it ends: its decision line (with how it ended: a stop by
//! revocation reads `revoked`), the byte metrics, and the egress summary when its origin was
//! dialled. Every tunnel leaves exactly one line, relayed or ended before its relay.

use std::net::SocketAddr;

use egressgate_store::Timestamp;
use egressgate_store::db::refusals::EgressEvent;

use super::Tunnel;
use crate::decision_log::Line;
use crate::relay::{self, End};

impl Tunnel<'_> {
    /// How the tunnel ended, for its line: a stop by revocation reads `revoked`.
    pub(super) fn end_of(&self, end: End) -> &'static str {
        if self.stop.is_revoked() && end == End::Shutdown {
            "revoked"
        } else {
            end.as_str()
        }
    }

    /// The end of a relayed tunnel: no longer active, then its account.
    pub(super) fn finish(&self, totals: relay::Totals, addr: Option<SocketAddr>) {
        self.shared.metrics.active_tunnels.dec();
        self.account(totals, addr);
    }

    /// Byte metrics, the tunnel's decision line (with how it ended) and, when its origin was
    /// dialled (at `addr`), the egress summary.
    pub(super) fn account(&self, totals: relay::Totals, addr: Option<SocketAddr>) {
        let shared = self.shared;
        shared.metrics.bytes_up.inc_by(totals.up);
        shared.metrics.bytes_down.inc_by(totals.down);
        let end = self.end_of(totals.end);
        shared.log.allowed(&Line {
            end: Some(end),
            ..self
                .allowed
                .line(200, addr, Some(totals.up), Some(totals.down))
        });
        if addr.is_none() {
            return;
        }
        shared.recorder.egress(EgressEvent {
            turn: self.turn.turn.id.clone(),
            host: self.target.host.clone(),
            connections: 1,
            bytes_up: i64::try_from(totals.up).unwrap_or(i64::MAX),
            bytes_down: i64::try_from(totals.down).unwrap_or(i64::MAX),
            at: Timestamp::now(),
        });
    }
}
