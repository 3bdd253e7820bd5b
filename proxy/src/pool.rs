//! Upstream connection reuse for forwarded requests: an idle HTTP/1.1 connection to a vetted
//! address is kept per (host, port) and reused by the next request to the same host, so
//! keep-alive clients do not pay a TCP handshake per request. A connection is only ever
//! reused for the host it was opened for, and only to an address the current request vetted.

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

use crate::recorder::Recorder;

/// Idle connections kept per (host, port).
const MAX_IDLE_PER_KEY: usize = 32;
/// Idle connections older than this are closed rather than reused.
const IDLE_TTL: Duration = Duration::from_secs(30);

type Key = (Host, u16);

struct Idle {
    addr: SocketAddr,
    sender: SendRequest<Incoming>,
    since: Instant,
}

/// The pool; cheap to share.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Key, Vec<Idle>>>,
}

impl Pool {
    /// Takes a ready idle connection to `host:port` whose address is among `vetted`.
    pub fn take(self: &Arc<Self>, host: &Host, port: u16, vetted: &[SocketAddr]) -> Option<Lease> {
        let key = (host.clone(), port);
        let mut map = self.idle.lock().ok()?;
        let list = map.get_mut(&key)?;
        while let Some(c) = list.pop() {
            if c.since.elapsed() < IDLE_TTL && c.sender.is_ready() && vetted.contains(&c.addr) {
                return Some(Lease {
                    pool: self.clone(),
                    key,
                    addr: c.addr,
                    sender: c.sender,
                });
            }
        }
        None
    }

    /// Returns a connection whose last response was fully read.
    fn put(&self, lease: Lease) {
        if lease.sender.is_closed() {
            return;
        }
        if let Ok(mut map) = self.idle.lock() {
            let list = map.entry(lease.key).or_default();
            list.retain(|c| c.since.elapsed() < IDLE_TTL && !c.sender.is_closed());
            if list.len() < MAX_IDLE_PER_KEY {
                list.push(Idle {
                    addr: lease.addr,
                    sender: lease.sender,
                    since: Instant::now(),
                });
            }
        }
    }
}

/// A connection checked out of (or destined for) the pool.
pub struct Lease {
    pool: Arc<Pool>,
    key: Key,
    addr: SocketAddr,
    /// The connection's request half.
    pub sender: SendRequest<Incoming>,
}

impl Lease {
    /// A fresh connection that will join the pool once its first response is read.
    pub fn new(
        pool: Arc<Pool>,
        host: Host,
        port: u16,
        addr: SocketAddr,
        sender: SendRequest<Incoming>,
    ) -> Self {
        Self {
            pool,
            key: (host, port),
            addr,
            sender,
        }
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
        }
    }
}

impl Drop for EgressMeter {
    fn drop(&mut self) {
        self.relayed.inc_by(self.bytes);
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
