//! Hostile clients against the real binary, with real slow clients: slow-loris heads, oversized
//! heads, connection floods per turn and in total. Each test also proves the proxy keeps
//! serving a well-behaved client. Every wait is bounded. Tunnels that idle, outlive their turn
//! or meet a drain are `limits_tunnels.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::hostile::*;
use support::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_heads_are_closed_while_others_are_served() {
    let (o, g, turn) = listed_gate(&["--header-read-timeout", "1s"]).await;
    let p = o.port();
    let started = Instant::now();

    // Partial heads that stall.
    let mut stalled = Vec::new();
    for i in 0..4 {
        let mut s = TcpStream::connect(g.proxy()).await.unwrap();
        s.write_all(format!("GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nproxy-authorization: {}\r\nx-slow-{i}: ", turn.auth_header()).as_bytes())
            .await
            .unwrap();
        stalled.push(s);
    }
    // A connection that never sends a byte.
    stalled.push(TcpStream::connect(g.proxy()).await.unwrap());
    // A trickler: one byte every 200 ms, always "making progress", never finishing.
    let trickle = TcpStream::connect(g.proxy()).await.unwrap();
    let (mut trickle_rd, mut trickle_wr) = trickle.into_split();
    let head = format!(
        "GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nx-padding: {}",
        "a".repeat(200)
    );
    let writer = tokio::spawn(async move {
        for b in head.bytes() {
            if trickle_wr.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    // Meanwhile a normal client is served promptly.
    served_promptly(&g, &turn, &o).await;

    for (i, mut s) in stalled.into_iter().enumerate() {
        let closed = wait_closed(&mut s, 5).await;
        assert!(
            closed.is_ok(),
            "slow client {i} was not closed (got {closed:?})"
        );
    }
    let closed = wait_closed(&mut trickle_rd, 5).await;
    assert!(
        closed.is_ok(),
        "the trickling client was not closed (got {closed:?})"
    );
    writer.abort();
    let total = started.elapsed();
    assert!(
        total >= Duration::from_millis(900),
        "closed before the 1 s header timeout: {total:?}"
    );
    assert!(
        total < Duration::from_secs(5),
        "slow clients held on for {total:?} with a 1 s header timeout"
    );
    assert!(o.requests().len() == 1, "no slow head reached the origin");
    served_promptly(&g, &turn, &o).await;
}

#[tokio::test]
async fn oversized_request_head_is_431_and_the_proxy_keeps_serving() {
    let (o, g, turn) = listed_gate(&["--max-header-bytes", "8192"]).await;
    let p = o.port();
    let big = format!(
        "GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nproxy-authorization: {}\r\nx-big: {}\r\n\r\n",
        turn.auth_header(),
        "b".repeat(20 * 1024)
    );
    let r = try_proxy_raw(g.proxy(), big.as_bytes(), 10)
        .await
        .expect("an answer, not a reset");
    assert_eq!(r.status, 431, "{}", r.text());
    // Many headers that add up past the limit, each one small.
    let mut many = format!(
        "GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nproxy-authorization: {}\r\n",
        turn.auth_header()
    );
    for i in 0..400 {
        many.push_str(&format!("x-h{i}: {}\r\n", "c".repeat(40)));
    }
    many.push_str("\r\n");
    let r = try_proxy_raw(g.proxy(), many.as_bytes(), 10)
        .await
        .expect("an answer, not a reset");
    assert_eq!(r.status, 431, "{}", r.text());
    assert!(
        o.requests().is_empty(),
        "an oversized head must not be forwarded"
    );
    // Just under the limit is fine.
    let ok = format!(
        "GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nproxy-authorization: {}\r\nconnection: close\r\nx-ok: {}\r\n\r\n",
        turn.auth_header(),
        "d".repeat(4 * 1024)
    );
    let r = try_proxy_raw(g.proxy(), ok.as_bytes(), 10).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    served_promptly(&g, &turn, &o).await;
}

#[tokio::test]
async fn per_turn_connection_limit_is_429_limit_exceeded_and_frees_up() {
    let (o, g, turn) = listed_gate(&["--max-connections-per-turn", "2"]).await;
    let api = g.api();
    let t1 = open_tunnel(g.proxy(), &turn, &o).await;
    let _t2 = open_tunnel(g.proxy(), &turn, &o).await;

    let (third, _s) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(third.status, 429, "{:?}", third.text());
    assert_eq!(third.header("x-egress-refused"), Some("limit_exceeded"));
    assert_eq!(third.header("x-egress-approvable"), Some("false"));
    // A forwarded request of the same turn counts too while both tunnels are open.
    let fwd = g.get(&turn, &files_url(&o)).await;
    assert_eq!(
        (fwd.status, fwd.header("x-egress-refused")),
        (429, Some("limit_exceeded"))
    );
    let row = assert_recorded(&api, &turn, "limit_exceeded").await;
    assert_eq!(row["host"], FILES);
    assert_eq!(row["approvable"], false);
    assert!(row["count"].as_i64().unwrap() >= 2, "{row}");

    // Another turn is not limited by this one's connections.
    let other = g.turn("u2", "c2").await;
    let _o1 = open_tunnel(g.proxy(), &other, &o).await;

    // Closing one tunnel frees a slot.
    drop(t1);
    let _t3 = tunnel_eventually(g.proxy(), &turn, &o, Duration::from_secs(5)).await;
}

/// A keep-alive client connection that has been served once and stays open.
async fn keep_alive_conn(proxy: SocketAddr, turn: &Turn, o: &Origin) -> TcpStream {
    let p = o.port();
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(format!("GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nproxy-authorization: {}\r\n\r\n", turn.auth_header()).as_bytes())
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), read_response(&mut s))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, 200);
    s
}

/// The connection over the limit is answered `429` right away, without being read.
async fn assert_turned_away(proxy: SocketAddr) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), read_response(&mut s))
        .await
        .expect(
            "a connection over --max-connections must be answered 429 at once, not left waiting",
        )
        .expect("a response");
    assert_eq!(r.status, 429);
}

/// After the holders close, the proxy serves again (bounded retry: slots free asynchronously).
async fn recovers(proxy: SocketAddr, turn: &Turn, o: &Origin) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            proxy_get(proxy, turn, &files_url(o)),
        )
        .await
        .unwrap();
        if r.status == 200 {
            return;
        }
        assert_eq!(r.status, 429);
        assert!(
            Instant::now() < deadline,
            "the proxy did not recover after the connections closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn total_connection_limit_is_429_and_the_proxy_recovers() {
    let (o, g, turn) = listed_gate(&["--max-connections", "3"]).await;
    let api = g.api();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(keep_alive_conn(g.proxy(), &turn, &o).await);
    }
    assert_turned_away(g.proxy()).await;
    // The control plane is unaffected.
    assert_eq!(api.get("/v1/admin/sites", ADMIN).await.status, 200);
    drop(held);
    recovers(g.proxy(), &turn, &o).await;
}

/// Open CONNECT tunnels are client connections too: `--max-connections` must count them for
/// as long as they are open, or a flood of tunnels bypasses the cap.
#[tokio::test]
async fn total_connection_limit_counts_open_tunnels() {
    let (o, g, turn) = listed_gate(&["--max-connections", "3"]).await;
    let mut tunnels = Vec::new();
    for _ in 0..3 {
        tunnels.push(open_tunnel(g.proxy(), &turn, &o).await);
    }
    assert_turned_away(g.proxy()).await;
    for t in &mut tunnels {
        assert_eq!(
            get_over(t, FILES).await.unwrap().status,
            200,
            "existing tunnels keep working"
        );
    }
    drop(tunnels);
    recovers(g.proxy(), &turn, &o).await;
}
