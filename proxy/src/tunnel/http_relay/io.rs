//! Moving the relay's bytes: read buffers lent from a per-thread spare list only while bytes
//! move (an idle tunnel holds none), a read that waits for readiness first, a write that
//! tries at once, the proxy's own answers as HTTP/1.1 bytes, and a carried partial head
//! joined with the next read.

use std::io;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::relay::Activity;
use crate::relay_tcp::read_drained;
use crate::respond::ProxyBody;

/// Read buffer per direction, taken from a per-thread spare list only while bytes move.
pub(super) const BUF: usize = 64 * 1024;

/// Spare buffers kept per worker thread.
const SPARES: usize = 64;

thread_local! {
    /// Buffers of finished reads, so a busy thread reuses a few instead of allocating one
    /// per read, and an idle tunnel holds none.
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer from the thread's spares (or a new one).
pub(super) fn take_buf() -> Vec<u8> {
    SPARE
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| Vec::with_capacity(BUF))
}

/// Returns a buffer to the thread's spares (an oversized one is dropped).
pub(super) fn give_buf(mut buf: Vec<u8>) {
    if buf.capacity() > 4 * BUF {
        return;
    }
    buf.clear();
    SPARE.with_borrow_mut(|s| {
        if s.len() < SPARES {
            s.push(buf);
        }
    });
}

/// Reads once from `src` when it is readable: `Ok(None)` at end of file.
pub(super) async fn read_once(
    src: &TcpStream,
    act: &Activity,
    start: Instant,
) -> io::Result<Option<Vec<u8>>> {
    loop {
        src.readable().await?;
        let mut buf = take_buf();
        buf.reserve(BUF);
        match read_drained(src, &mut buf) {
            Ok(0) => {
                give_buf(buf);
                return Ok(None);
            }
            Ok(n) => {
                act.note(n, start);
                return Ok(Some(buf));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => give_buf(buf),
            Err(e) => {
                give_buf(buf);
                return Err(e);
            }
        }
    }
}

/// Writes all of `data`, trying at once (a socket is usually writable) before waiting.
pub(super) async fn write_all(dst: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match dst.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => dst.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The bytes to parse: `input` after what an unfinished head left in `carry` (moved into
/// `slot`, which then owns them).
pub(super) fn after_carry<'a>(
    carry: &mut Vec<u8>,
    input: &'a [u8],
    slot: &'a mut Vec<u8>,
) -> &'a [u8] {
    if carry.is_empty() {
        return input;
    }
    carry.extend_from_slice(input);
    *slot = std::mem::take(carry);
    slot
}

/// A response the proxy writes itself, as HTTP/1.1 bytes that close the connection.
pub(super) async fn wire(resp: http::Response<ProxyBody>) -> Vec<u8> {
    let (parts, body) = resp.into_parts();
    let body = crate::respond::read_whole(body).await;
    let mut out = Vec::with_capacity(256 + body.len());
    let status = parts.status;
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    // A refusal's own phrase (the next step), as hyper writes it for every other answer.
    let phrase = parts.extensions.get::<hyper::ext::ReasonPhrase>();
    out.extend_from_slice(phrase.map_or(
        status.canonical_reason().unwrap_or("").as_bytes(),
        hyper::ext::ReasonPhrase::as_bytes,
    ));
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&body);
    out
}

/// Half-closes `stream`: the peer reads its end of file, and may still answer.
pub(super) fn shutdown_write(stream: &TcpStream) {
    use std::os::fd::AsRawFd as _;
    let _ = nix::sys::socket::shutdown(stream.as_raw_fd(), nix::sys::socket::Shutdown::Write);
}
