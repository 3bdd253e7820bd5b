//! The capture listener: each redirected connection's original destination becomes
//! `CONNECT name:port` (or the IP literal, for an address outside the pool) to the proxy,
//! through the same Unix socket the forwarder uses, with the turn's credential.
//!
//! When the proxy answers 200 the two connections are spliced. The `CONNECT` is marked
//! (`Egress-Capture: 1`), so a refusal (which the proxy records before it answers) comes back
//! as a `200` carrying `X-Egress-Refused`, and the proxy then answers the client's own request
//! with its `403` inside the stream: over plain HTTP, or inside TLS where it can mint a leaf
//! for the name (the sandbox trusts the deployment CA). Where the proxy cannot show it (TLS
//! with no CA or no usable name, an opaque protocol, silence) it closes without a byte, and
//! the client's connection is reset; so is it on any other answer (a limit, a failure). Either
//! way the client sees its refusal only once it is on the turn's record.

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::Semaphore;

use super::ACCEPT_BACKOFF;
use super::pool::Pool;

/// How long the proxy may take to answer a `CONNECT` (dial included).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest proxy answer head read before giving up on it.
const MAX_HEAD: usize = 16 * 1024;
/// How long the client's last bytes are taken after a refusal shown inside the stream.
const LINGER: Duration = Duration::from_secs(2);
/// The header that marks the `CONNECT` as a captured connection's, whose refusal the proxy
/// then shows inside the stream. It changes how a refusal is shown, never what is allowed.
const CAPTURE_MARK: &str = "Egress-Capture";
/// The header naming the command that opened the captured connection, when the capture can
/// tell (see [`super::owner`]): evidence from the sandbox's side, sent only with the mark.
const COMMAND_HEADER: &str = "Egress-Command";

/// What every captured connection needs.
pub(crate) struct Redirect {
    /// The names behind the pool addresses.
    pub(crate) pool: Arc<Mutex<Pool>>,
    /// The Unix socket to the proxy (through the launcher outside).
    pub(crate) socket: PathBuf,
    /// `Proxy-Authorization` value, when the proxy URL carries a credential.
    pub(crate) authorization: Option<String>,
    /// The places the lookups of each connection's command share (see [`super::owner`]).
    pub(crate) lookups: Arc<Semaphore>,
}

/// Which original-destination call a listener's connections need.
#[derive(Clone, Copy)]
pub(crate) enum Family {
    /// `SO_ORIGINAL_DST`.
    V4,
    /// `IP6T_SO_ORIGINAL_DST`.
    V6,
}

/// Accepts until the process ends. A failed accept (out of file descriptors, say) pauses and
/// tries again: the loop never ends on an error.
pub(crate) async fn serve(listener: TcpListener, family: Family, redirect: Arc<Redirect>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let redirect = Arc::clone(&redirect);
                tokio::spawn(async move { carry(stream, family, &redirect).await });
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

/// One captured connection, start to end.
async fn carry(mut client: TcpStream, family: Family, redirect: &Redirect) {
    let _ = client.set_nodelay(true);
    let spliced = match original_destination(&client, family) {
        Ok(dest) => {
            let target = target(dest, &redirect.pool);
            let command = match client.peer_addr() {
                Ok(peer) => super::owner::command_within(&redirect.lookups, peer, dest).await,
                Err(_) => None,
            };
            match open_tunnel(&target, command.as_deref(), redirect).await {
                Ok(Opened {
                    proxy,
                    early,
                    refused: true,
                }) => refusal(&mut client, proxy, &early).await,
                Ok(Opened {
                    mut proxy, early, ..
                }) => {
                    if client.write_all(&early).await.is_ok() {
                        let _ = copy_bidirectional(&mut client, &mut proxy).await;
                    }
                    true
                }
                Err(_) => false,
            }
        }
        Err(_) => false,
    };
    if !spliced {
        // Reset, not a clean close: the client must not take the refusal for an empty reply.
        let _ = client.set_zero_linger();
    }
}

/// Where the client meant to connect, before the ruleset's redirect.
fn original_destination(client: &TcpStream, family: Family) -> io::Result<SocketAddr> {
    match family {
        Family::V4 => {
            let raw = getsockopt(client, sockopt::OriginalDst)?;
            let ip = std::net::Ipv4Addr::from(u32::from_be(raw.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(raw.sin_port),
            )))
        }
        Family::V6 => {
            let raw = getsockopt(client, sockopt::Ip6tOriginalDst)?;
            let ip = std::net::Ipv6Addr::from(raw.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(raw.sin6_port),
                0,
                0,
            )))
        }
    }
}

/// The `CONNECT` authority for a destination: the pool name, or the address as a literal
/// (which the proxy refuses as `ip_literal` and records).
pub(crate) fn target(dest: SocketAddr, pool: &Mutex<Pool>) -> String {
    let name = pool
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .name(dest.ip())
        .map(str::to_owned);
    match (name, dest.ip()) {
        (Some(name), _) => format!("{name}:{}", dest.port()),
        (None, IpAddr::V4(ip)) => format!("{ip}:{}", dest.port()),
        (None, IpAddr::V6(ip)) => format!("[{ip}]:{}", dest.port()),
    }
}

/// Carries a refused connection whose refusal the proxy shows inside the stream (`early`:
/// its first bytes, read with the answer's head): the client's bytes go up, the proxy's answer
/// comes down, and the proxy ends it. `false` when the proxy sent nothing (it could not show
/// the refusal): the client is then reset, not told the server closed.
async fn refusal(client: &mut TcpStream, mut proxy: UnixStream, early: &[u8]) -> bool {
    let (mut from_client, mut to_client) = client.split();
    let (mut from_proxy, mut to_proxy) = proxy.split();
    let up = tokio::io::copy(&mut from_client, &mut to_proxy);
    tokio::pin!(up);
    let mut up_done = false;
    let sent = {
        let down = async {
            to_client.write_all(early).await?;
            let n = tokio::io::copy(&mut from_proxy, &mut to_client).await?;
            io::Result::Ok(early.len() as u64 + n)
        };
        tokio::pin!(down);
        loop {
            tokio::select! {
                sent = &mut down => break sent.unwrap_or(0),
                _ = &mut up, if !up_done => up_done = true,
            }
        }
    };
    if sent == 0 {
        return false;
    }
    // The answer is out: end it cleanly, and take what the client still sends for a moment so
    // its unread bytes do not turn the close into a reset that could swallow the answer.
    let _ = to_client.shutdown().await;
    if !up_done {
        let _ = tokio::time::timeout(LINGER, up).await;
    }
    true
}

/// What `open_tunnel` got: the connection, what the proxy sent after its answer's head, and
/// whether the answer was a refusal the proxy goes on to show inside the stream.
struct Opened {
    proxy: UnixStream,
    early: Vec<u8>,
    refused: bool,
}

/// Asks the proxy for a tunnel to `target` (naming the `command` that opened the connection,
/// when known); on 200 returns the connection. Any other answer is an error.
async fn open_tunnel(
    target: &str,
    command: Option<&str>,
    redirect: &Redirect,
) -> io::Result<Opened> {
    let mut proxy = UnixStream::connect(&redirect.socket).await?;
    let mut request =
        format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{CAPTURE_MARK}: 1\r\n");
    if let Some(command) = command {
        // Printable ASCII only (see `owner`): it cannot end the header line.
        request.push_str(&format!("{COMMAND_HEADER}: {command}\r\n"));
    }
    if let Some(auth) = &redirect.authorization {
        request.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    request.push_str("\r\n");
    proxy.write_all(request.as_bytes()).await?;
    let (head, early) = tokio::time::timeout(ANSWER_TIMEOUT, read_head(&mut proxy))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    match status_code(&head) {
        Some(200) => Ok(Opened {
            proxy,
            early,
            refused: names_refusal(&head),
        }),
        status => Err(io::Error::other(format!("the proxy answered {status:?}"))),
    }
}

/// Reads an HTTP answer head; returns the head and the bytes after it.
async fn read_head(proxy: &mut UnixStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = head.split_off(end + 4);
            head.truncate(end);
            return Ok((head, rest));
        }
        if head.len() > MAX_HEAD {
            return Err(io::ErrorKind::InvalidData.into());
        }
        let n = proxy.read(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// Whether an answer head carries `X-Egress-Refused` (a field name, case-insensitive).
fn names_refusal(head: &[u8]) -> bool {
    head.split(|b| *b == b'\n').skip(1).any(|line| {
        line.split(|b| *b == b':')
            .next()
            .is_some_and(|name| name.trim_ascii().eq_ignore_ascii_case(b"x-egress-refused"))
    })
}

/// The status code of `HTTP/1.x NNN ...`.
fn status_code(head: &[u8]) -> Option<u16> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/1."))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::pool::Family as PoolFamily;

    #[test]
    fn pool_addresses_become_names_and_others_stay_literals() {
        let pool = Mutex::new(Pool::default());
        let addr = pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .address("files.example.com", PoolFamily::V6);
        let Some(addr) = addr else {
            return assert!(addr.is_some());
        };
        assert_eq!(
            target(SocketAddr::new(addr, 8443), &pool),
            "files.example.com:8443"
        );
        let v4: SocketAddr = "203.0.113.9:80".parse().unwrap_or(SocketAddr::new(addr, 0));
        assert_eq!(target(v4, &pool), "203.0.113.9:80");
        let v6: SocketAddr = "[2001:db8::1]:443"
            .parse()
            .unwrap_or(SocketAddr::new(addr, 0));
        assert_eq!(target(v6, &pool), "[2001:db8::1]:443");
    }

    #[test]
    fn reads_the_status_line() {
        assert_eq!(
            status_code(b"HTTP/1.1 200 Connection established"),
            Some(200)
        );
        assert_eq!(status_code(b"HTTP/1.0 403 Forbidden\r\nX: y"), Some(403));
        assert_eq!(status_code(b"SSH-2.0 hello"), None);
        assert_eq!(status_code(b""), None);
    }

    #[test]
    fn tells_a_refusal_shown_inside_the_stream_by_its_header() {
        let refused =
            b"HTTP/1.1 200 OK\r\nX-Egress-Refused: not_approved\r\nx-egress-approvable: true";
        assert!(names_refusal(refused));
        assert!(names_refusal(
            b"HTTP/1.1 200 OK\r\nx-egress-refused : ip_literal"
        ));
        assert!(!names_refusal(b"HTTP/1.1 200 Connection established"));
        assert!(!names_refusal(
            b"HTTP/1.1 200 x-egress-refused: no\r\nvia: x"
        ));
    }
}
