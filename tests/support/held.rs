//! Connections held open across a revocation: a CONNECT tunnel and a keep-alive forwarded
//! connection of one turn to [`FILES`], with the checks the revocation tests make on them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::*;

/// The host the revocation tests reach (resolved to the loopback origin).
pub use super::FILES;

async fn get_on(s: &mut TcpStream, turn: &Turn, port: u16) -> Resp {
    super::get_on(s, turn, &format!("{FILES}:{port}"), "/data.csv", "\r\n").await
}

/// A person approves [`FILES`] for the turn's chat (through the card flow).
pub async fn approve(api: &Api, turn: &Turn, port: u16) {
    approved(api, turn, &[&format!("http://{FILES}:{port}/data.csv")]).await;
}

/// An open tunnel and an open keep-alive client connection of one turn to [`FILES`].
pub struct Held {
    tunnel: TcpStream,
    keepalive: TcpStream,
}

impl Held {
    pub async fn open(proxy: SocketAddr, turn: &Turn, port: u16) -> Self {
        let authority = format!("{FILES}:{port}");
        let (r, mut tunnel) = connect(proxy, turn, &authority).await;
        assert_eq!(r.status, 200, "CONNECT: {}", r.text());
        assert_eq!(get_over(&mut tunnel, &authority).await.unwrap().status, 200);
        let mut keepalive = TcpStream::connect(proxy).await.unwrap();
        let r = get_on(&mut keepalive, turn, port).await;
        assert_eq!(r.status, 200, "forward: {}", r.text());
        Self { tunnel, keepalive }
    }

    /// Both connections still carry traffic.
    pub async fn assert_open(&mut self, turn: &Turn, port: u16, what: &str) {
        let authority = format!("{FILES}:{port}");
        let r = get_over(&mut self.tunnel, &authority).await;
        assert_eq!(
            r.map(|r| r.status).ok(),
            Some(200),
            "{what}: the tunnel must stay open"
        );
        let r = get_on(&mut self.keepalive, turn, port).await;
        assert_eq!(
            r.status, 200,
            "{what}: the keep-alive connection must stay open"
        );
    }

    /// Both connections are closed by the proxy within one second of `since`.
    pub async fn assert_closed_within_a_second(&mut self, since: Instant, what: &str) {
        let tunnel = format!("{what}: the tunnel");
        assert_closed_in_a_second(&mut self.tunnel, since, &tunnel).await;
        let keepalive = format!("{what}: the keep-alive connection");
        assert_closed_in_a_second(&mut self.keepalive, since, &keepalive).await;
    }
}

/// Runs `revoke` (which withdraws what the `held` connections relied on), then asserts each
/// of them, named by its `what`, is closed by the proxy within one second of the answer: the
/// check every revocation row makes, timed the same way everywhere. Returns what `revoke`
/// answered (a row that checks the answer does so inside `revoke`, before the timing starts).
pub async fn revoke_closes<R>(held: Vec<(Held, &str)>, revoke: impl AsyncFnOnce() -> R) -> R {
    let r = revoke().await;
    let since = Instant::now();
    for (mut h, what) in held {
        h.assert_closed_within_a_second(since, what).await;
    }
    r
}

/// The proxy closes `s` within one second of `since`.
pub async fn assert_closed_in_a_second(s: &mut TcpStream, since: Instant, what: &str) {
    assert!(wait_closed(s, 3).await.is_ok(), "{what} was not closed");
    let took = since.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "{what} was closed only after {took:?}"
    );
}
