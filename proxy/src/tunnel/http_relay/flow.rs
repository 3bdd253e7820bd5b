//! What the relay's two directions share: the tunnel's fixed facts, the requests passed on and
//! not yet answered (oldest first), and the few flags that decide when the tunnel ends and
//! whether its origin connection is clean enough to keep.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use egressgate_store::RefusalReason;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::http1::HeadError;
use crate::relay::Activity;

use super::super::Tunnel;

/// A request passed to the origin whose response has not been delivered yet.
pub(super) struct Sent {
    /// A `HEAD`: its response has no body.
    pub to_head: bool,
    /// Its body's declared length (`None`: chunked).
    pub declared: Option<u64>,
    /// When its head was judged.
    pub started: std::time::Instant,
    /// The tunnel ends after its answer: the client asked to close (`Connection: close`, or
    /// HTTP/1.0 without keep-alive), so nothing after it was passed on.
    pub close: bool,
}

/// The state both directions read and write.
#[derive(Default)]
pub(super) struct Flow {
    /// Requests sent and not yet answered to the client, oldest first.
    pub pending: Mutex<VecDeque<Sent>>,
    /// The origin side has finished.
    pub origin_done: AtomicBool,
    /// The origin said it will close (`Connection: close`, or HTTP/1.0).
    pub closing: AtomicBool,
    /// A request carried a body (or may have): the origin connection cannot be vouched for
    /// afterwards, so it is not kept for reuse.
    pub bodies: AtomicBool,
    /// The answer to a request that asked to close was delivered: the tunnel is done.
    pub client_closed: AtomicBool,
    /// Rung after every delivered response and when the origin side finishes.
    pub answered: Notify,
}

impl Flow {
    /// Every answer delivered and the origin still expecting requests: the connection is at
    /// a clean boundary.
    pub fn reusable(&self) -> bool {
        !self.bodies.load(Ordering::Acquire)
            && !self.origin_done.load(Ordering::Acquire)
            && !self.closing.load(Ordering::Acquire)
            && self.pending.lock().is_ok_and(|p| p.is_empty())
    }

    /// Nothing passed on is still waiting for its answer.
    pub fn settled(&self) -> bool {
        self.origin_done.load(Ordering::Acquire)
            || self.pending.lock().map_or(true, |p| p.is_empty())
    }

    /// Queues a request just passed on.
    pub fn sent(&self, sent: Sent) {
        if let Ok(mut p) = self.pending.lock() {
            p.push_back(sent);
        }
    }
}

/// The tunnel's fixed facts for this path.
pub(super) struct Ctx<'a, 't> {
    pub tunnel: &'a Tunnel<'t>,
    /// `host[:port]` as the origin is told in `Host` (the port only when not 80).
    pub authority: String,
    /// The vetted address dialled.
    pub addr: Option<SocketAddr>,
    pub start: Instant,
    pub up: Activity,
    pub down: Activity,
    pub flow: Flow,
}

/// Why the client side stopped taking requests.
#[derive(Debug)]
pub(super) enum Stop {
    /// A request named another host (recorded, answered `403`).
    Refused {
        reason: RefusalReason,
        method: String,
    },
    /// A request head the proxy cannot read or frame, or may not pass on (answered `400` or
    /// `431` after the answers to the requests before it, not recorded).
    Bad(HeadError),
    /// A body that breaks its framing after its head was passed on: the origin waits for the
    /// rest of it, so no answer can come in order and the tunnel just closes.
    BrokenBody,
}
