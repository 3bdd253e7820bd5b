//! Upstream connection reuse for forwarded requests: an idle HTTP/1.1 connection to a vetted
//! address is kept per (turn, host, port) and reused by the same turn's next request to the
//! same host, so keep-alive clients do not pay a TCP handshake per request.
//!
//! Two rules keep one request's bytes from answering another's:
//! - a connection is only ever reused by the turn that opened it, for the host it was opened
//!   for, and only to an address the current request vetted (one tenant's connection never
//!   carries another tenant's request, whatever an origin does with the bytes it was sent);
//! - a connection goes back to the pool only after a request without a body (see
//!   [`Reuse::for_request`]) whose response was read to its end and did not switch protocols.
//!   An origin that ignores a body it was sent (a `GET` with `Content-Length`, a `POST`
//!   answered early) reads what is left as the next request, so the proxy cannot vouch for
//!   the framing of any connection that carried one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use egressgate_store::db::refusals::EgressEvent;
use egressgate_store::{Host, Timestamp, TurnId};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use prometheus_client::metrics::counter::Counter;

use crate::decision_log::{Allowed, DecisionLog};
use crate::recorder::Recorder;

/// Idle connections kept per (turn, host, port).
const MAX_IDLE_PER_KEY: usize = 32;
/// Idle connections older than this are closed rather than reused.
const IDLE_TTL: Duration = Duration::from_secs(30);
/// Keys kept before stale ones (ended turns, closed connections) are swept out.
const SWEEP_AT_KEYS: usize = 4096;

/// Who may reuse a connection: one turn, one host, one port, plain or verified TLS.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    turn: TurnId,
    host: Host,
    port: u16,
    tls: bool,
}

impl Key {
    /// The key of `turn`'s connections to `host:port` (over verified TLS when `tls`).
    pub fn new(turn: &TurnId, host: &Host, port: u16, tls: bool) -> Self {
        Self {
            turn: turn.clone(),
            host: host.clone(),
            port,
            tls,
        }
    }

    /// The host the connection was opened for.
    pub fn host(&self) -> &Host {
        &self.host
    }
}

/// Whether a connection may go back to the pool after the request it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// No request body: the origin has read exactly the head we sent.
    Vouched,
    /// The request carried a body (or may have): the connection is closed after it.
    Close,
}

impl Reuse {
    /// [`Reuse::Vouched`] only for a request whose body is known to be empty.
    pub fn for_request<B: Body>(body: &B) -> Self {
        if body.is_end_stream() {
            Self::Vouched
        } else {
            Self::Close
        }
    }
}

/// An upstream connection the pool can keep: it says whether it can carry a request now.
pub trait Reusable: Send + 'static {
    /// Still open, with nothing unread from the origin, and ready for a request.
    fn usable(&self) -> bool;
}

impl Reusable for SendRequest<Incoming> {
    fn usable(&self) -> bool {
        !self.is_closed() && self.is_ready()
    }
}

impl Reusable for tokio::net::TcpStream {
    /// A kept tunnel connection: any byte waiting (an origin talking out of turn) or the
    /// origin's close makes it unusable; only "would block" says it is clean.
    fn usable(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

struct Idle<C> {
    addr: SocketAddr,
    conn: C,
    since: Instant,
}

impl<C: Reusable> Idle<C> {
    fn fresh(&self) -> bool {
        self.since.elapsed() < IDLE_TTL
    }
}

/// The pool of idle connections of one kind (hyper's HTTP/1.1 client halves for forwarded
/// requests; raw TCP streams for relayed tunnels); cheap to share.
pub struct Pool<C = SendRequest<Incoming>> {
    idle: Mutex<HashMap<Key, Vec<Idle<C>>>>,
}

impl<C> Default for Pool<C> {
    fn default() -> Self {
        Self {
            idle: Mutex::default(),
        }
    }
}

impl<C: Reusable> Pool<C> {
    /// Takes a usable idle connection of `key` whose address is among `vetted`.
    pub fn take_conn(&self, key: &Key, vetted: &[SocketAddr]) -> Option<(SocketAddr, C)> {
        let mut map = self.idle.lock().ok()?;
        let list = map.get_mut(key)?;
        while let Some(c) = list.pop() {
            if c.fresh() && c.conn.usable() && vetted.contains(&c.addr) {
                return Some((c.addr, c.conn));
            }
        }
        None
    }

    /// Keeps `conn` (to `addr`, opened for `key`) for reuse; the caller vouches that its
    /// last response was read to the end and that no request body could have been misread.
    pub fn put_conn(&self, key: Key, addr: SocketAddr, conn: C) {
        if let Ok(mut map) = self.idle.lock() {
            if map.len() >= SWEEP_AT_KEYS && !map.contains_key(&key) {
                map.retain(|_, list| {
                    list.retain(Idle::fresh);
                    !list.is_empty()
                });
                if map.len() >= SWEEP_AT_KEYS {
                    return;
                }
            }
            let list = map.entry(key).or_default();
            list.retain(Idle::fresh);
            if list.len() < MAX_IDLE_PER_KEY {
                list.push(Idle {
                    addr,
                    conn,
                    since: Instant::now(),
                });
            }
        }
    }
}

impl Pool {
    /// Takes a ready idle connection of `key` whose address is among `vetted`.
    pub fn take(self: &Arc<Self>, key: &Key, vetted: &[SocketAddr]) -> Option<Lease> {
        let (addr, sender) = self.take_conn(key, vetted)?;
        Some(Lease {
            pool: self.clone(),
            key: key.clone(),
            addr,
            sender,
            reuse: Reuse::Vouched,
        })
    }

    /// Returns a connection whose last response was fully read, if its request allows it.
    fn put(&self, lease: Lease) {
        if lease.reuse != Reuse::Vouched || lease.sender.is_closed() {
            return;
        }
        self.put_conn(lease.key, lease.addr, lease.sender);
    }
}

/// A connection checked out of (or destined for) the pool.
pub struct Lease {
    pool: Arc<Pool>,
    key: Key,
    addr: SocketAddr,
    reuse: Reuse,
    /// The connection's request half.
    pub sender: SendRequest<Incoming>,
}

impl Lease {
    /// A fresh connection that will join the pool once its first response is read.
    pub fn new(pool: Arc<Pool>, key: Key, addr: SocketAddr, sender: SendRequest<Incoming>) -> Self {
        Self {
            pool,
            key,
            addr,
            reuse: Reuse::Vouched,
            sender,
        }
    }

    /// The vetted address the connection goes to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Marks the connection for closing after the request it is about to carry.
    pub fn set_reuse(&mut self, reuse: Reuse) {
        self.reuse = reuse;
    }
}

/// Counts a forwarded response's bytes and reports them when the response is done (read to
/// the end or dropped), so the egress summary holds what was really sent, chunked bodies
/// included.
pub struct EgressMeter {
    recorder: Recorder,
    turn: TurnId,
    host: Host,
    bytes: u64,
    relayed: Counter,
    /// The request's decision line, written with the bytes when the response is done.
    line: Option<MeteredLine>,
}

/// What the decision line of a forwarded request needs at its end.
pub struct MeteredLine {
    /// Where lines go.
    pub log: Arc<DecisionLog>,
    /// The allowed request.
    pub allowed: Allowed,
    /// The origin's status.
    pub status: u16,
    /// The vetted address the request went to.
    pub addr: SocketAddr,
    /// The request body's declared length.
    pub up: Option<u64>,
}

impl EgressMeter {
    /// A meter for one response of `turn` from `host`; `relayed` is the bytes-down metric.
    pub fn new(recorder: Recorder, turn: TurnId, host: Host, relayed: Counter) -> Self {
        Self {
            recorder,
            turn,
            host,
            bytes: 0,
            relayed,
            line: None,
        }
    }

    /// Writes `line` (with the bytes counted) when the response is done.
    pub fn with_line(mut self, line: MeteredLine) -> Self {
        self.line = Some(line);
        self
    }
}

impl Drop for EgressMeter {
    fn drop(&mut self) {
        self.relayed.inc_by(self.bytes);
        if let Some(l) = &self.line {
            let line = l
                .allowed
                .line(l.status, Some(l.addr), l.up, Some(self.bytes));
            l.log.allowed(&line);
        }
        self.recorder.egress(EgressEvent {
            turn: self.turn.clone(),
            host: self.host.clone(),
            connections: 1,
            bytes_up: 0,
            bytes_down: i64::try_from(self.bytes).unwrap_or(i64::MAX),
            at: Timestamp::now(),
        });
    }
}

/// A response body that hands its connection back to the pool once it has been read to the
/// end (a body dropped half-way closes the connection instead).
pub struct PooledBody {
    inner: Incoming,
    back: Option<Lease>,
    meter: EgressMeter,
}

impl PooledBody {
    /// Wraps `inner`; the lease goes back to its pool when the body ends.
    pub fn new(inner: Incoming, lease: Lease, meter: EgressMeter) -> Self {
        Self {
            inner,
            back: Some(lease),
            meter,
        }
    }

    fn release(&mut self) {
        if let Some(lease) = self.back.take() {
            let pool = lease.pool.clone();
            pool.put(lease);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(None) => self.release(),
            Poll::Ready(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    self.meter.bytes += d.len() as u64;
                }
                if self.inner.is_end_stream() {
                    self.release();
                }
            }
            Poll::Ready(Some(Err(_))) => self.back = None,
            Poll::Pending => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
