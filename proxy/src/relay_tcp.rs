//! Relaying between two plain TCP sockets (every tunnel unless the proxy listener itself
//! speaks TLS), driven by socket readiness instead of an always-allocated copy buffer:
//!
//! - small messages (requests, keep-alive traffic) take one read and one write, through a
//!   per-thread buffer, so they allocate nothing;
//! - once a read fills the whole buffer the stream looks like bulk, and on Linux it moves to
//!   `splice(2)` (socket → pipe → socket) for the rest of its life, never entering user space;
//! - elsewhere, or if splice is refused, the user-space path stays.
//!
//! The two directions are hand-written state machines polled from one small future, not
//! nested `async fn`s: an idle tunnel then holds no buffer, no pipe and no per-direction
//! waiter, only its sockets and one timer, which is what lets one process keep ten thousand
//! idle tunnels in a few kilobytes each (measured in `bench/`).

use std::future::{Future, poll_fn};
use std::io;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::relay::{Activity, End, Totals, bounded};

/// Buffer of the user-space path; a read that fills it marks the stream as bulk.
const BUFFER: usize = 64 * 1024;

/// Copies both ways until both directions reach end of file, either side fails, the tunnel
/// idles, the turn expires or the process stops draining.
pub async fn relay_tcp(
    client: TcpStream,
    origin: TcpStream,
    idle: Duration,
    turn_deadline: Instant,
    stop: impl Future<Output = ()>,
) -> Totals {
    let start = Instant::now();
    let up = Activity::default();
    let down = Activity::default();
    let up_way = Way {
        src: &client,
        dst: &origin,
        act: &up,
        start,
    };
    let down_way = Way {
        src: &origin,
        dst: &client,
        act: &down,
        start,
    };
    let mut up_pump = Pump::default();
    let mut down_pump = Pump::default();
    let both = poll_fn(|cx| {
        let a = up_pump.poll(cx, &up_way);
        let b = down_pump.poll(cx, &down_way);
        match (a, b) {
            (Poll::Ready(Err(_)), _) | (_, Poll::Ready(Err(_))) => Poll::Ready(End::Error),
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(End::Closed),
            _ => Poll::Pending,
        }
    });
    bounded(both, start, &up, &down, idle, turn_deadline, stop).await
}

/// One direction's sockets, `src` → `dst`, and the activity its moved bytes count on since
/// `start`: what each way of moving them (user space, splice) is polled with.
pub(crate) struct Way<'a> {
    src: &'a TcpStream,
    dst: &'a TcpStream,
    act: &'a Activity,
    start: Instant,
}

/// One direction's state, `src` → `dst`.
#[derive(Default)]
struct Pump {
    /// Bytes read but not yet written (the destination was not ready for all of them);
    /// unallocated in the usual case where a read is written at once.
    pending: Vec<u8>,
    /// How much of `pending` is written.
    written: usize,
    /// A read filled the whole buffer: the stream is bulk.
    bulk: bool,
    /// The zero-copy path, once the stream turned bulk.
    #[cfg(target_os = "linux")]
    splice: Option<splice::Pipe>,
    /// Splice was refused for this socket pair: stay in user space.
    no_splice: bool,
    /// End of file passed on; nothing more to do.
    done: bool,
}

thread_local! {
    /// Each worker thread's read buffer: a message is read into it and written straight on,
    /// so the usual small message costs no allocation; only bytes the destination cannot take
    /// yet are copied out (into [`Pump::pending`]).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(BUFFER));
}

/// What one read did.
enum Step {
    /// Bytes moved (some may be pending).
    Moved,
    /// The readiness was stale; wait again.
    Again,
    /// End of file.
    Eof,
}

impl Pump {
    fn poll(&mut self, cx: &mut Context<'_>, way: &Way<'_>) -> Poll<io::Result<()>> {
        let dst = way.dst;
        if self.done {
            return Poll::Ready(Ok(()));
        }
        loop {
            while self.written < self.pending.len() {
                ready!(dst.poll_write_ready(cx))?;
                match dst.try_write(&self.pending[self.written..]) {
                    Ok(n) => self.written += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            if !self.pending.is_empty() {
                self.pending = Vec::new();
                self.written = 0;
            }
            #[cfg(target_os = "linux")]
            if self.bulk && !self.no_splice && self.splice.is_none() {
                self.splice = Some(splice::Pipe::new()?);
            }
            #[cfg(target_os = "linux")]
            if let Some(pipe) = &mut self.splice {
                match ready!(pipe.poll(cx, way)) {
                    Ok(splice::Flow::Eof) => return Poll::Ready(self.finish(dst)),
                    Ok(splice::Flow::Refused) => {
                        self.splice = None;
                        self.no_splice = true;
                        continue;
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            ready!(way.src.poll_read_ready(cx))?;
            match SCRATCH.with_borrow_mut(|buf| self.move_once(buf, way)) {
                Ok(Step::Moved | Step::Again) => {}
                Ok(Step::Eof) => return Poll::Ready(self.finish(dst)),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Reads once into `buf` and writes as much as `dst` takes now; keeps the rest.
    fn move_once(&mut self, buf: &mut Vec<u8>, way: &Way<'_>) -> io::Result<Step> {
        buf.clear();
        buf.reserve(BUFFER);
        let n = match read_drained(way.src, buf) {
            Ok(0) => return Ok(Step::Eof),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Again),
            Err(e) => return Err(e),
        };
        way.act.note(n, way.start);
        self.bulk |= n >= BUFFER;
        let written = match way.dst.try_write(buf) {
            Ok(w) => w,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if written < n {
            self.pending = buf[written..].to_vec();
            self.written = 0;
        }
        Ok(Step::Moved)
    }

    /// Passes the end of file on (the other direction may still be talking).
    fn finish(&mut self, dst: &TcpStream) -> io::Result<()> {
        use std::os::fd::AsRawFd as _;
        self.done = true;
        let _ = nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
        Ok(())
    }
}

/// One read into `buf`'s spare capacity. A TCP read that leaves spare capacity has emptied
/// the socket's receive queue, so the socket's readiness is cleared with it: the next wait goes
/// straight to the reactor instead of first costing a read that can only say "would block"
/// (before this, a third of a small-message tunnel's system calls were such reads). Data that
/// arrives meanwhile raises a new readiness event, which clearing does not lose.
pub(crate) fn read_drained(src: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let spare = buf.capacity() - buf.len();
    let mut got = 0;
    let r = src.try_io(Interest::READABLE, || {
        got = src.try_read_buf(buf)?;
        if got > 0 && got < spare {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(got)
        }
    });
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        r => r,
    }
}

#[cfg(target_os = "linux")]
pub(crate) mod splice {
    //! The zero-copy path: a pipe per direction, created when the stream turns bulk.

    use std::io;
    use std::os::fd::{AsFd as _, OwnedFd};
    use std::task::{Context, Poll, ready};

    use nix::errno::Errno;
    use nix::fcntl::{OFlag, SpliceFFlags, splice};
    use tokio::io::Interest;
    use tokio::net::TcpStream;

    use super::Way;

    /// Largest chunk moved per system call.
    const CHUNK: usize = 256 * 1024;

    /// How the zero-copy path ended.
    pub(super) enum Flow {
        /// The source reached end of file and the pipe is empty.
        Eof,
        /// This socket pair cannot splice (nothing was moved): use the user-space path.
        Refused,
    }

    /// A pipe and how many bytes sit in it.
    pub(crate) struct Pipe {
        rd: OwnedFd,
        wr: OwnedFd,
        queued: usize,
    }

    fn flags() -> SpliceFFlags {
        SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE
    }

    impl Pipe {
        pub(crate) fn new() -> io::Result<Self> {
            let (rd, wr) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
                .map_err(io::Error::from)?;
            // A pipe holds 64 KiB by default, so each splice would move at most that: widen it
            // to a whole chunk where the system allows (pages are only taken while in use).
            let _ = nix::fcntl::fcntl(&wr, nix::fcntl::FcntlArg::F_SETPIPE_SZ(CHUNK as i32));
            Ok(Self { rd, wr, queued: 0 })
        }

        /// One splice of up to `max` bytes from `src` into the pipe (`WouldBlock` clears the
        /// socket's readiness).
        fn fill(&self, src: &TcpStream, max: usize) -> io::Result<usize> {
            src.try_io(Interest::READABLE, || {
                splice(src.as_fd(), None, self.wr.as_fd(), None, max, flags())
                    .map_err(io::Error::from)
            })
        }

        /// One splice of what the pipe holds into `dst`.
        fn drain(&mut self, dst: &TcpStream) -> io::Result<()> {
            let m = dst.try_io(Interest::WRITABLE, || {
                splice(
                    self.rd.as_fd(),
                    None,
                    dst.as_fd(),
                    None,
                    self.queued,
                    flags(),
                )
                .map_err(io::Error::from)
            })?;
            self.queued -= m;
            Ok(())
        }

        /// Moves up to `max` bytes from `src` to `dst` inside the kernel (a body whose length
        /// the caller knows): `Ok(0)` at the source's end of file, `Ok(None)` when this
        /// socket pair cannot splice (nothing was moved).
        pub(crate) async fn move_up_to(
            &mut self,
            src: &TcpStream,
            dst: &TcpStream,
            max: usize,
        ) -> io::Result<Option<usize>> {
            let n = loop {
                src.readable().await?;
                match self.fill(src, max.min(CHUNK)) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.raw_os_error() == Some(Errno::EINVAL as i32) => return Ok(None),
                    Err(e) => return Err(e),
                }
            };
            self.queued = n;
            while self.queued > 0 {
                dst.writable().await?;
                match self.drain(dst) {
                    Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                    _ => {}
                }
            }
            Ok(Some(n))
        }

        pub(super) fn poll(
            &mut self,
            cx: &mut Context<'_>,
            way: &Way<'_>,
        ) -> Poll<io::Result<Flow>> {
            let (src, dst) = (way.src, way.dst);
            loop {
                if self.queued > 0 {
                    ready!(dst.poll_write_ready(cx))?;
                    match self.drain(dst) {
                        Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                            return Poll::Ready(Err(e));
                        }
                        _ => {}
                    }
                    continue;
                }
                ready!(src.poll_read_ready(cx))?;
                match self.fill(src, CHUNK) {
                    Ok(0) => return Poll::Ready(Ok(Flow::Eof)),
                    Ok(n) => {
                        way.act.note(n, way.start);
                        self.queued = n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.raw_os_error() == Some(Errno::EINVAL as i32) => {
                        return Poll::Ready(Ok(Flow::Refused));
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
    }
}
