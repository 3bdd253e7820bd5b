//! Step 5, relay: copy bytes both ways until either side closes, the tunnel idles, the turn
//! expires or the process drains. Byte counts feed the egress summary and metrics.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Buffer per direction: large enough for bulk downloads, small enough for 10k idle tunnels
/// (buffers are only allocated while copying).
const BUF: usize = 64 * 1024;

/// Activity clock and byte counter for one direction.
#[derive(Default)]
pub(crate) struct Activity {
    last_ms: AtomicU64,
    bytes: AtomicU64,
}

impl Activity {
    /// Notes `n` bytes moved now.
    pub(crate) fn note(&self, n: usize, start: Instant) {
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Bytes moved so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Resolves when the tunnel must end for time: the turn's credential expired
/// ([`End::TurnExpired`]) or neither direction has moved a byte for `idle` ([`End::Idle`]).
/// One timer serves both, so an idle tunnel holds a single timer entry.
pub(crate) async fn deadline(
    start: Instant,
    up: &Activity,
    down: &Activity,
    idle: Duration,
    turn_deadline: Instant,
) -> End {
    loop {
        let last = up
            .last_ms
            .load(Ordering::Relaxed)
            .max(down.last_ms.load(Ordering::Relaxed));
        let idle_due = start + Duration::from_millis(last) + idle;
        let now = Instant::now();
        if now >= turn_deadline {
            return End::TurnExpired;
        }
        if now >= idle_due {
            return End::Idle;
        }
        tokio::time::sleep_until(idle_due.min(turn_deadline)).await;
    }
}

/// A stream whose reads (starting with bytes already read from it) and writes are counted,
/// noting when data last moved: the idle timeout's clock and the tunnel's totals.
pub(crate) struct Tracked<S> {
    inner: S,
    /// Bytes read from `inner` ahead of time, served before anything else.
    first: Vec<u8>,
    at: usize,
    start: Instant,
    reads: Arc<Activity>,
    writes: Option<Arc<Activity>>,
}

impl<S> Tracked<S> {
    /// Counts what is read from `inner` (`first`, then the stream) into `reads` and, when
    /// given, what is written to it into `writes`, both timed from `start`.
    pub(crate) fn new(
        inner: S,
        first: Vec<u8>,
        start: Instant,
        reads: Arc<Activity>,
        writes: Option<Arc<Activity>>,
    ) -> Self {
        Self {
            inner,
            first,
            at: 0,
            start,
            reads,
            writes,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = if self.at < self.first.len() {
            let n = buf.remaining().min(self.first.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.first[at..at + n]);
            self.at += n;
            if self.at == self.first.len() {
                // Served: the buffer goes now, not with the stream.
                self.first = Vec::new();
                self.at = 0;
            }
            Poll::Ready(Ok(()))
        } else {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        };
        let n = buf.filled().len() - before;
        if n > 0 {
            self.reads.note(n, self.start);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let (Poll::Ready(Ok(n)), Some(writes)) = (&r, &self.writes) {
            writes.note(*n, self.start);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a relay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// A side closed (normal).
    Closed,
    /// No bytes either way for the idle timeout.
    Idle,
    /// The turn's credential expired.
    TurnExpired,
    /// The process is shutting down and the drain deadline passed.
    Shutdown,
    /// An I/O error on either side.
    Error,
}

impl End {
    /// The spelling in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Idle => "idle",
            Self::TurnExpired => "turn_expired",
            Self::Shutdown => "shutdown",
            Self::Error => "error",
        }
    }
}

/// Totals of one relay.
#[derive(Debug, Clone, Copy)]
pub struct Totals {
    /// Client → origin bytes.
    pub up: u64,
    /// Origin → client bytes.
    pub down: u64,
    /// Why it ended.
    pub end: End,
}

/// Copies both ways with the limits above (generic streams, e.g. a TLS client connection;
/// plain TCP tunnels use [`crate::relay_tcp`]). `stop` resolves when the process stops
/// draining.
pub async fn relay<A, B>(
    client: A,
    origin: B,
    idle: Duration,
    turn_deadline: Instant,
    stop: impl std::future::Future<Output = ()>,
) -> Totals
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let start = Instant::now();
    let up = Arc::new(Activity::default());
    let down = Arc::new(Activity::default());
    let mut a = Tracked::new(client, Vec::new(), start, up.clone(), None);
    let mut b = Tracked::new(origin, Vec::new(), start, down.clone(), None);
    let copy = async {
        match tokio::io::copy_bidirectional_with_sizes(&mut a, &mut b, BUF, BUF).await {
            Ok(_) => End::Closed,
            Err(_) => End::Error,
        }
    };
    bounded(copy, start, &up, &down, idle, turn_deadline, stop).await
}

/// Runs `copy` (both directions, counting into `up` and `down` since `start`) until it ends,
/// nothing moves for `idle`, the turn's credential expires at `turn_deadline` or `stop`
/// resolves; the totals either way.
pub(crate) async fn bounded(
    copy: impl std::future::Future<Output = End>,
    start: Instant,
    up: &Activity,
    down: &Activity,
    idle: Duration,
    turn_deadline: Instant,
    stop: impl std::future::Future<Output = ()>,
) -> Totals {
    let end = tokio::select! {
        end = copy => end,
        end = deadline(start, up, down, idle, turn_deadline) => end,
        () = stop => End::Shutdown,
    };
    Totals {
        up: up.bytes(),
        down: down.bytes(),
        end,
    }
}
