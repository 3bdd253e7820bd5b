//! Holes an outside review found in the data plane (issue 12), one test per hole and per
//! sibling found while looking for its family: the upstream pool answering one tenant with
//! another's bytes, cached allows outliving their grant, and the per-turn connection limit
//! across a turn extension. Fronting inside tunnels is `security_review_tunnels.rs`; the
//! control plane's and database's addresses `security_review_control.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// Hole 1: the upstream pool.
// ---------------------------------------------------------------------------------------------

/// Reads one request head (up to the blank line), `None` at EOF.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte).await {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn path_of(head: &str) -> String {
    head.split(' ').nth(1).unwrap_or("?").to_owned()
}

/// How many connections an origin has accepted.
type Conns = Arc<Mutex<usize>>;

/// An origin like Python's `http.server`: it never reads a `GET` body, so bytes sent as one
/// are read as the next request. It answers `answer for PATH`. To make the desync
/// deterministic, the answer to `/smuggled` is held back until the next request on the same
/// connection has arrived (what a slow origin does by timing), so that request gets it.
/// Returns the address and the number of connections accepted.
async fn body_ignoring_origin() -> (SocketAddr, Conns) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(Mutex::new(0));
    let conns2 = conns.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            *conns2.lock().unwrap() += 1;
            tokio::spawn(async move {
                let answer = |path: &str| {
                    let body = format!("answer for {path}");
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    )
                };
                while let Some(head) = read_head(&mut s).await {
                    let path = path_of(&head);
                    if path == "/switch" {
                        // Switches protocols unasked; what it sends next is not HTTP framing
                        // the proxy could vouch for.
                        let _ = s
                            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n")
                            .await;
                        let Some(next) = read_head(&mut s).await else {
                            return;
                        };
                        let _ = s
                            .write_all(
                                answer(&format!("{} after a switch", path_of(&next))).as_bytes(),
                            )
                            .await;
                        continue;
                    }
                    if path == "/smuggled" {
                        let next = read_head(&mut s).await;
                        if s.write_all(answer(&path).as_bytes()).await.is_err() {
                            return;
                        }
                        let Some(next) = next else { return };
                        let _ = s.write_all(answer(&path_of(&next)).as_bytes()).await;
                        continue;
                    }
                    if s.write_all(answer(&path).as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, conns)
}

/// The pool's bench: a [`body_ignoring_origin`] and a gate with it approved (as [`FILES`]) for
/// every turn. Returns the origin's port, its connection count, the gate and its API.
async fn pool_bench() -> (u16, Conns, Gate, Api) {
    let (origin, conns) = body_ignoring_origin().await;
    let port = origin.port();
    let gate = gate()
        .loopback()
        .ports(&[port])
        .names(&[FILES])
        .sites(&[FILES])
        .ready()
        .await;
    let api = gate.api();
    (port, conns, gate, api)
}

/// One absolute-form GET of `path` on an open proxy connection to [`FILES`].
async fn get_on(s: &mut TcpStream, turn: &Turn, port: u16, path: &str, extra: &str) -> Resp {
    support::get_on(s, turn, &format!("{FILES}:{port}"), path, extra).await
}

/// `path` on a new proxy connection as `turn` answers with its own bytes, and then the origin
/// has seen `conns` connections in all (`why` the count must be so).
async fn fresh_get(gate: &Gate, turn: &Turn, port: u16, path: &str, seen: (&Conns, usize, &str)) {
    let (conns, expected, why) = seen;
    let mut s = TcpStream::connect(gate.proxy()).await.unwrap();
    let r = get_on(&mut s, turn, port, path, "\r\n").await;
    assert_eq!(r.text(), format!("answer for {path}"));
    assert_eq!(*conns.lock().unwrap(), expected, "{why}");
}

#[tokio::test]
async fn a_get_body_smuggled_past_an_origin_never_answers_another_tenant() {
    let (port, _, gate, api) = pool_bench().await;
    let alice = api.turn("alice", "c1", &[]).await;
    let bob = api.turn("bob", "c2", &[]).await;
    for round in 0..3 {
        let smuggled = format!("GET /smuggled HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\n");
        let mut a = TcpStream::connect(gate.proxy()).await.unwrap();
        let extra = format!("content-length: {}\r\n\r\n{smuggled}", smuggled.len());
        let r = get_on(&mut a, &alice, port, "/a", &extra).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.text(), "answer for /a");
        let mut b = TcpStream::connect(gate.proxy()).await.unwrap();
        let r = get_on(&mut b, &bob, port, &format!("/b{round}"), "\r\n").await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.text(),
            format!("answer for /b{round}"),
            "bob got bytes alice smuggled (round {round})"
        );
        // Alice's own next request is not answered with her smuggled request's bytes either:
        // the connection that carried a body was never reused.
        let r = get_on(&mut a, &alice, port, &format!("/a{round}"), "\r\n").await;
        assert_eq!(r.text(), format!("answer for /a{round}"));
    }
}

#[tokio::test]
async fn a_connection_that_switched_protocols_is_never_reused() {
    let (port, conns, gate, api) = pool_bench().await;
    let alice = api.turn("alice", "c1", &[]).await;
    let mut a = TcpStream::connect(gate.proxy()).await.unwrap();
    let req = format!(
        "GET http://{FILES}:{port}/switch HTTP/1.1\r\nhost: {FILES}:{port}\r\nproxy-authorization: {}\r\n\r\n",
        alice.auth_header()
    );
    a.write_all(req.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    let _ = tokio::time::timeout(Duration::from_secs(5), a.read_exact(&mut head)).await;
    drop(a);
    fresh_get(
        &gate,
        &alice,
        port,
        "/next",
        (&conns, 2, "the switched connection was reused"),
    )
    .await;
}

#[tokio::test]
async fn upstream_connections_are_reused_within_a_turn_and_never_across_turns() {
    let (port, conns, gate, api) = pool_bench().await;
    let alice = api.turn("alice", "c1", &[]).await;
    let alice2 = api.turn("alice", "c1", &[]).await;
    let bob = api.turn("bob", "c2", &[]).await;
    let mut a = TcpStream::connect(gate.proxy()).await.unwrap();
    for i in 0..3 {
        let r = get_on(&mut a, &alice, port, &format!("/a{i}"), "\r\n").await;
        assert_eq!(r.text(), format!("answer for /a{i}"));
    }
    assert_eq!(
        *conns.lock().unwrap(),
        1,
        "one turn's keep-alive GETs share one connection"
    );
    // Another user, and another turn of the same chat: each gets its own connection.
    fresh_get(
        &gate,
        &bob,
        port,
        "/b",
        (&conns, 2, "bob must not reuse alice's connection"),
    )
    .await;
    fresh_get(
        &gate,
        &alice2,
        port,
        "/a",
        (
            &conns,
            3,
            "a new turn must not reuse an old turn's connection",
        ),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Hole 4: a cached allow ends with the grant behind it.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_cached_approval_ends_at_its_own_expiry_without_the_janitor() {
    let (g, o) = reachable_with(&[FILES], &["--approval-ttl", "3s"]).await;
    let port = o.port();
    let api = g.api();
    let turn = g.turn("dora", "c1").await;
    let url = o.url(FILES, "/data.csv");
    assert_refused(&g.get(&turn, &url).await, "not_approved");
    approved(&api, &turn, &[]).await;
    let approved_at = tokio::time::Instant::now();
    // The approval row is the only grant; the next request caches it for the turn.
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 200);
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 200);
    // A tunnel opened under the approval ends with it too.
    let (r, mut tunnel) = connect(g.proxy(), &turn, &format!("{FILES}:{port}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        get_over(&mut tunnel, &format!("{FILES}:{port}"))
            .await
            .unwrap()
            .status,
        200
    );
    // Just past the row's expiry (the janitor, every 60 s, has not deleted it): refused.
    tokio::time::sleep_until(approved_at + Duration::from_millis(3_300)).await;
    // An expired approval must not keep working.
    assert_refused(&g.get(&turn, &url).await, "not_approved");
    assert!(
        wait_closed(&mut tunnel, 2).await.is_ok(),
        "a tunnel must not outlive the approval that allowed it"
    );
}

// ---------------------------------------------------------------------------------------------
// The per-turn connection limit across a turn extension.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_per_turn_limit_holds_across_a_claim_that_extends_the_turn() {
    let g = gate()
        .loopback()
        .names(&[FILES])
        .args(&["--max-connections-per-turn", "2"])
        .args(&["--client-hello-timeout", "60s"])
        .sites(&[FILES])
        .ready()
        .await;
    let api = g.api();
    let turn = turn_with(
        &api,
        serde_json::json!({"user_id": "erin", "chat_id": "c1", "can_ask_human": true, "ttl_seconds": 2}),
    )
    .await;
    let opened_at = tokio::time::Instant::now();
    // Two tunnels that stay open: the client never sends its ClientHello.
    let mut held = Vec::new();
    for _ in 0..2 {
        let (r, s) = connect(g.proxy(), &turn, &format!("{FILES}:443")).await;
        assert_eq!(r.status, 200);
        held.push(s);
    }
    let (r, _) = connect(g.proxy(), &turn, &format!("{FILES}:443")).await;
    assert_eq!(r.status, 429, "the limit holds before the extension");
    // A claim extends the turn past its first expiry.
    let (id, secret) = ask(&api, &turn, &["http://other.example.org/"]).await;
    approve_card(&api, &id, &secret).await;
    tokio::time::sleep_until(opened_at + Duration::from_millis(2_300)).await;
    // The proxy reloads the extended turn; its two open tunnels still count.
    let (r, _) = connect(g.proxy(), &turn, &format!("{FILES}:443")).await;
    assert_eq!(
        r.status, 429,
        "the extension must not reset the turn's connection count"
    );
    assert_eq!(r.header("x-egress-refused"), Some("limit_exceeded"));
    // Closing one frees its place (the count is one counter, not two).
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (r, _) = connect(g.proxy(), &turn, &format!("{FILES}:443")).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 429);
        assert!(
            tokio::time::Instant::now() < deadline,
            "a closed tunnel never freed its place"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
