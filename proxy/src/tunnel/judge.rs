//! Judging a tunnel's first client bytes against its CONNECT host, whenever they arrive: a
//! TLS ClientHello must name the host in its SNI (`sni_mismatch`), plain HTTP is served
//! request by request so each `Host` is checked (`host_mismatch`), and only bytes that name no
//! host at all (an opaque protocol) are relayed unjudged. A server-first protocol gets the
//! origin's banner first, but the client's first bytes are judged all the same.

use std::io;
use std::pin::Pin;
use std::time::Duration;

use egressgate_store::{Host, RefusalReason};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::first_bytes::{self, FirstBytes};
use crate::relay::End;
use crate::sni::Hello;
use crate::target::Target;

/// Most origin bytes copied at once while waiting for a server-first protocol's client.
const BANNER_CHUNK: usize = 16 * 1024;

/// What the tunnel does with its client.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Relay bytes both ways (TLS for the right name, or an opaque protocol).
    Relay,
    /// Serve it as HTTP, each request checked.
    Http,
    /// Close it and record this reason.
    Refuse(RefusalReason),
    /// The client went away.
    Gone,
}

/// The verdict on classified (complete) first bytes.
fn judge(first: FirstBytes, target: &Target, sni_required: bool) -> Verdict {
    let nameless = if sni_required {
        Verdict::Refuse(RefusalReason::SniMismatch)
    } else {
        Verdict::Relay
    };
    match first {
        FirstBytes::Tls(Hello::Sni(name)) => match Host::parse(&name) {
            Ok(h) if h == target.host => Verdict::Relay,
            _ => Verdict::Refuse(RefusalReason::SniMismatch),
        },
        FirstBytes::Tls(Hello::Malformed) | FirstBytes::Incomplete => {
            Verdict::Refuse(RefusalReason::SniMismatch)
        }
        FirstBytes::Tls(Hello::NoSni | Hello::NotTls | Hello::Incomplete) | FirstBytes::Opaque => {
            nameless
        }
        FirstBytes::Http if sni_required => Verdict::Refuse(RefusalReason::SniMismatch),
        FirstBytes::Http => Verdict::Http,
    }
}

/// Reads more of the client's first bytes (`buf`, not empty) until they can be judged, or
/// refuses them at `deadline`: a ClientHello or request line that started but never finished
/// is never let through, since a real server might still accept it.
pub(crate) async fn read_and_judge<C: AsyncRead + Unpin>(
    client: &mut C,
    buf: &mut Vec<u8>,
    target: &Target,
    sni_required: bool,
    deadline: Instant,
) -> Verdict {
    loop {
        match first_bytes::classify(buf) {
            FirstBytes::Incomplete => {}
            first => return judge(first, target, sni_required),
        }
        buf.reserve(4096);
        match tokio::time::timeout_at(deadline, client.read_buf(buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Verdict::Gone,
            Ok(Ok(_)) => {}
            Err(_) if buf.first() == Some(&0x16) => {
                return Verdict::Refuse(RefusalReason::SniMismatch);
            }
            Err(_) => return Verdict::Refuse(RefusalReason::HostMismatch),
        }
    }
}

/// A tunnel's client whose readiness can be awaited without a buffer, so a tunnel whose
/// client has not spoken yet holds no read buffer while it waits.
pub(crate) trait Readable {
    /// Resolves when a read would not block (at once where the transport cannot tell).
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
}

/// Through `poll_read_ready`, the slot a read's waker takes, not `TcpStream::readable`'s
/// waiter list: the connection task that read the CONNECT left its waker in that slot, and
/// until it is replaced that finished task's memory (about 4 KiB) cannot be freed.
impl Readable for TcpStream {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        std::future::poll_fn(|cx| self.poll_read_ready(cx))
    }
}

/// A client of the TLS listener: its readiness is the TLS layer's, so the read itself waits.
impl Readable for TokioIo<Upgraded> {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        std::future::ready(Ok(()))
    }
}

/// A server-first protocol: copies what the origin says to the client until the client
/// speaks (its first byte lands in `buf`, for judging) and returns how many bytes went down.
/// Otherwise how it ended, with the bytes that went down: either side closed or failed,
/// nothing moved for `idle`, `ends` passed, or `stop` resolved (a revocation, the drain). A
/// silent tunnel waits here, so the wait holds no buffer: one byte is read from either side,
/// and a buffer exists only while the origin's bytes are being copied.
pub(crate) async fn banner<C>(
    client: &mut C,
    origin: &mut TcpStream,
    buf: &mut Vec<u8>,
    idle: Duration,
    ends: Instant,
    mut stop: Pin<&mut impl Future<Output = ()>>,
) -> Result<u64, (End, u64)>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let mut down = 0u64;
    loop {
        let (mut from_client, mut from_origin) = ([0u8; 1], [0u8; 1]);
        let wake = (Instant::now() + idle).min(ends);
        tokio::select! {
            r = client.read(&mut from_client) => {
                return match r {
                    Ok(1) => {
                        buf.extend_from_slice(&from_client);
                        Ok(down)
                    }
                    r => Err((ended(&r), down)),
                };
            }
            r = origin.read(&mut from_origin) => {
                if !matches!(r, Ok(1)) {
                    return Err((ended(&r), down));
                }
                let mut chunk = vec![0u8; BANNER_CHUNK];
                chunk[0] = from_origin[0];
                let more = origin.try_read(&mut chunk[1..]).unwrap_or(0);
                let n = 1 + more;
                let sent = chunk.get(..n).unwrap_or(&chunk);
                if client.write_all(sent).await.is_err() {
                    return Err((End::Error, down));
                }
                down += n as u64;
            }
            () = tokio::time::sleep_until(wake) => {
                let end = if wake == ends { End::TurnExpired } else { End::Idle };
                return Err((end, down));
            }
            () = stop.as_mut() => return Err((End::Shutdown, down)),
        }
    }
}

/// How a one-byte read that brought no byte ended the wait.
fn ended(read: &io::Result<usize>) -> End {
    match read {
        Ok(_) => End::Closed,
        Err(_) => End::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::test_authority as target;

    #[test]
    fn verdicts() {
        let t = target("files.example.com:80");
        let sni = |n: &str| FirstBytes::Tls(Hello::Sni(n.into()));
        assert_eq!(judge(sni("FILES.example.com."), &t, false), Verdict::Relay);
        assert_eq!(
            judge(sni("other.example.com"), &t, false),
            Verdict::Refuse(RefusalReason::SniMismatch)
        );
        assert_eq!(judge(FirstBytes::Http, &t, false), Verdict::Http);
        assert_eq!(
            judge(FirstBytes::Http, &t, true),
            Verdict::Refuse(RefusalReason::SniMismatch)
        );
        assert_eq!(judge(FirstBytes::Opaque, &t, false), Verdict::Relay);
        assert_eq!(
            judge(FirstBytes::Tls(Hello::Malformed), &t, false),
            Verdict::Refuse(RefusalReason::SniMismatch)
        );
        assert_eq!(
            judge(FirstBytes::Tls(Hello::NoSni), &t, true),
            Verdict::Refuse(RefusalReason::SniMismatch)
        );
    }
}
