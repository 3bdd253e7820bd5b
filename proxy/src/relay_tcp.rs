//! Relaying between two plain TCP sockets (every tunnel unless the proxy listener itself
//! speaks TLS), driven by socket readiness instead of an always-allocated copy buffer:
//!
//! - on Linux, bytes move socket → pipe → socket with `splice(2)` and never enter user space;
//! - elsewhere (or if splice is refused), a buffer exists only while data is in flight.
//!
//! Either way an idle tunnel holds no buffer, which is what lets one process keep tens of
//! thousands of idle tunnels open in little memory.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::relay::{Activity, End, Totals, watchdog};

/// Largest chunk moved per system call.
const CHUNK: usize = 256 * 1024;

/// Copies both ways until both directions reach end of file, either side fails, the tunnel
/// idles, the turn expires or the process stops draining.
pub async fn relay_tcp(
    client: TcpStream,
    origin: TcpStream,
    idle: Duration,
    turn_deadline: Instant,
    stop: impl std::future::Future<Output = ()>,
) -> Totals {
    let start = Instant::now();
    let up = Arc::new(Activity::default());
    let down = Arc::new(Activity::default());
    let both = async {
        let (a, b) = tokio::join!(
            pump(&client, &origin, &up, start),
            pump(&origin, &client, &down, start)
        );
        if a.is_ok() && b.is_ok() {
            End::Closed
        } else {
            End::Error
        }
    };
    let end = tokio::select! {
        end = both => end,
        () = watchdog(start, &up, &down, idle) => End::Idle,
        () = tokio::time::sleep_until(turn_deadline) => End::TurnExpired,
        () = stop => End::Shutdown,
    };
    Totals {
        up: up.bytes(),
        down: down.bytes(),
        end,
    }
}

/// One direction: `src` → `dst`, then half-close `dst` for writing.
async fn pump(src: &TcpStream, dst: &TcpStream, act: &Activity, start: Instant) -> io::Result<()> {
    // Small messages (requests, keep-alive traffic) are cheapest with one read and one write;
    // once a read fills the whole buffer the stream looks like bulk, and on Linux it moves to
    // splice for the rest of its life.
    let bulk_switch = cfg!(target_os = "linux");
    let r = match buffered(src, dst, act, start, bulk_switch).await {
        Ok(Flow::Eof) => Ok(()),
        #[cfg(target_os = "linux")]
        Ok(Flow::Bulk) => splice::pump(src, dst, act, start).await,
        #[cfg(not(target_os = "linux"))]
        Ok(Flow::Bulk) => Ok(()),
        Err(e) => Err(e),
    };
    if r.is_ok() {
        use std::os::fd::AsRawFd as _;
        // Pass the end of file on; the other direction may still be talking.
        let _ = nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
    }
    r
}

/// How a buffered pump ended.
enum Flow {
    /// The source reached end of file.
    Eof,
    /// A read filled the whole buffer: hand over to the zero-copy path.
    Bulk,
}

/// Buffer size of the user-space path.
const BUFFER: usize = 64 * 1024;

/// User-space copies with a buffer that exists only while data is in flight (reads go into
/// spare capacity, so nothing is zeroed). With `until_bulk`, stops after the first read that
/// fills the buffer.
async fn buffered(
    src: &TcpStream,
    dst: &TcpStream,
    act: &Activity,
    start: Instant,
    until_bulk: bool,
) -> io::Result<Flow> {
    loop {
        src.readable().await?;
        let mut buf = Vec::with_capacity(BUFFER);
        let n = match src.try_read_buf(&mut buf) {
            Ok(0) => return Ok(Flow::Eof),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        act.note(n, start);
        write_all(dst, &buf).await?;
        if until_bulk && n == BUFFER {
            return Ok(Flow::Bulk);
        }
    }
}

async fn write_all(dst: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        dst.writable().await?;
        match dst.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
mod splice {
    //! The zero-copy path: a pipe per direction, created on the first byte.

    use std::io;
    use std::os::fd::{AsFd as _, OwnedFd};

    use nix::errno::Errno;
    use nix::fcntl::{OFlag, SpliceFFlags, splice};
    use tokio::io::Interest;
    use tokio::net::TcpStream;
    use tokio::time::Instant;

    use super::{Activity, CHUNK};

    fn flags() -> SpliceFFlags {
        SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE
    }

    pub(super) async fn pump(
        src: &TcpStream,
        dst: &TcpStream,
        act: &Activity,
        start: Instant,
    ) -> io::Result<()> {
        let mut pipe: Option<(OwnedFd, OwnedFd)> = None;
        loop {
            src.readable().await?;
            if pipe.is_none() {
                pipe = Some(
                    nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
                        .map_err(io::Error::from)?,
                );
            }
            let Some((rd, wr)) = &pipe else { continue };
            let moved = src.try_io(Interest::READABLE, || {
                splice(src.as_fd(), None, wr.as_fd(), None, CHUNK, flags()).map_err(io::Error::from)
            });
            let n = match moved {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.raw_os_error() == Some(Errno::EINVAL as i32) => {
                    // This socket pair cannot splice: fall back to user-space copies.
                    return super::buffered(src, dst, act, start, false)
                        .await
                        .map(|_| ());
                }
                Err(e) => return Err(e),
            };
            act.note(n, start);
            let mut left = n;
            while left > 0 {
                dst.writable().await?;
                let out = dst.try_io(Interest::WRITABLE, || {
                    splice(rd.as_fd(), None, dst.as_fd(), None, left, flags())
                        .map_err(io::Error::from)
                });
                match out {
                    Ok(m) => left -= m,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
}
