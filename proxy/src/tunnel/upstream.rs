//! Dialling a tunnel's origin, and the one line that says so when it fails: what the client
//! was told. A tunnel is dialled only once its first bytes are judged, so the client already
//! holds its `200`; a plain request in the relay is answered `502` inside the tunnel, any
//! other bytes can only be cut, and the line must say `200` then, not a `502` nobody saw.

use http::StatusCode;
use tokio::net::TcpStream;

use super::Tunnel;
use crate::decision_log::{Line, Verdict};
use crate::dial::DialError;

/// What the client is told when the origin cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Told {
    /// A `502` (or `504` on a timeout) answered inside the tunnel, to a request the relay read.
    BadGateway,
    /// Nothing: the tunnel is closed after its `200` (TLS and opaque bytes).
    Cut,
}

impl Tunnel<'_> {
    /// Connects to a vetted address of the CONNECT host; on failure, logs the line of what
    /// the client was told, counts it, and returns the status to answer with (`502`, or
    /// `504` when the connect timed out).
    pub(super) async fn dial(&self, told: Told) -> Result<TcpStream, StatusCode> {
        let connect = self.shared.dialer.connect(&self.target.host, self.addrs);
        let e = match Box::pin(connect).await {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        tracing::debug!(error = %e, turn_id = %self.turn.turn.id, "tunnel upstream connect failed");
        let (status, reason) = match e {
            DialError::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "timeout"),
            _ => (StatusCode::BAD_GATEWAY, "connect"),
        };
        let line = Line {
            decision: Verdict::Fail,
            reason: Some(reason),
            ..self.allowed.line(status.as_u16(), None, None, None)
        };
        match told {
            Told::BadGateway => self.shared.failed(line),
            Told::Cut => {
                self.shared.metrics.tunnel_cut_upstream.inc();
                self.shared.log.refused(&Line {
                    status: 200,
                    end: Some("upstream_failed"),
                    ..line
                });
            }
        }
        Err(status)
    }
}
