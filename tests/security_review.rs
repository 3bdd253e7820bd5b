//! Holes an outside review found in the data plane (issue 12), one test per hole and per
//! sibling found while looking for its family: the upstream pool answering one tenant with
//! another's bytes, fronting inside non-443 tunnels, cached allows outliving their grant, and
//! the per-turn connection limit across a turn extension.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

const FILES: &str = "files.example.com";

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

/// An origin like Python's `http.server`: it never reads a `GET` body, so bytes sent as one
/// are read as the next request. It answers `answer for PATH`. To make the desync
/// deterministic, the answer to `/smuggled` is held back until the next request on the same
/// connection has arrived (what a slow origin does by timing), so that request gets it.
/// Returns the address and the number of connections accepted.
async fn body_ignoring_origin() -> (SocketAddr, Arc<Mutex<usize>>) {
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

async fn pool_gate(port: u16) -> (Gate, Api) {
    let gate = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &port.to_string()])
        .start();
    let api = gate.api();
    api.admin_site(FILES).await;
    (gate, api)
}

/// One absolute-form GET on an open proxy connection.
async fn get_on(s: &mut TcpStream, turn: &Turn, port: u16, path: &str, extra: &str) -> Resp {
    let req = format!(
        "GET http://{FILES}:{port}{path} HTTP/1.1\r\nhost: {FILES}:{port}\r\nproxy-authorization: {}\r\n{extra}",
        turn.auth_header()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), read_response(s))
        .await
        .expect("proxy answered in time")
        .unwrap()
}

#[tokio::test]
async fn a_get_body_smuggled_past_an_origin_never_answers_another_tenant() {
    let (origin, _) = body_ignoring_origin().await;
    let port = origin.port();
    let (gate, api) = pool_gate(port).await;
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
    let (origin, conns) = body_ignoring_origin().await;
    let port = origin.port();
    let (gate, api) = pool_gate(port).await;
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
    let mut b = TcpStream::connect(gate.proxy()).await.unwrap();
    let r = get_on(&mut b, &alice, port, "/next", "\r\n").await;
    assert_eq!(r.text(), "answer for /next");
    assert_eq!(
        *conns.lock().unwrap(),
        2,
        "the switched connection was reused"
    );
}

#[tokio::test]
async fn upstream_connections_are_reused_within_a_turn_and_never_across_turns() {
    let (origin, conns) = body_ignoring_origin().await;
    let port = origin.port();
    let (gate, api) = pool_gate(port).await;
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
    let mut b = TcpStream::connect(gate.proxy()).await.unwrap();
    let r = get_on(&mut b, &bob, port, "/b", "\r\n").await;
    assert_eq!(r.text(), "answer for /b");
    assert_eq!(
        *conns.lock().unwrap(),
        2,
        "bob must not reuse alice's connection"
    );
    let mut a2 = TcpStream::connect(gate.proxy()).await.unwrap();
    let r = get_on(&mut a2, &alice2, port, "/a", "\r\n").await;
    assert_eq!(r.text(), "answer for /a");
    assert_eq!(
        *conns.lock().unwrap(),
        3,
        "a new turn must not reuse an old turn's connection"
    );
}

// ---------------------------------------------------------------------------------------------
// Hole 4: a cached allow ends with the grant behind it.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_cached_approval_ends_at_its_own_expiry_without_the_janitor() {
    let o = origin().await;
    let port = o.addr.port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &port.to_string()])
        .args(&["--approval-ttl", "3s"])
        .start();
    let api = g.api();
    let turn = api.turn("dora", "c1", &[]).await;
    let url = format!("http://{FILES}:{port}/data.csv");
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
    let (id, secret) = ask(&api, &turn, &[]).await;
    approve_card(&api, &id, &secret).await;
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
    let r = proxy_get(g.proxy(), &turn, &url).await;
    assert_eq!(
        r.status,
        403,
        "an expired approval must not keep working: {}",
        r.text()
    );
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
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
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--max-connections-per-turn", "2"])
        .args(&["--client-hello-timeout", "60s"])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
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

// ---------------------------------------------------------------------------------------------
// Hole 2: a tunnel carries traffic for its CONNECT host only, on every port.
// ---------------------------------------------------------------------------------------------

const OTHER: &str = "unapproved.example.com";

/// A gate where `files.example.com` is approved and `unapproved.example.com` is not, both on
/// the same loopback address (two virtual hosts of one server), with `ports` allowed.
async fn fronting_gate(ports: &[u16]) -> (Gate, Api, Turn) {
    let mut b = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve(OTHER, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"]);
    for p in ports {
        b = b.args(&["--allow-port", &p.to_string()]);
    }
    let g = b.start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = api.turn("frank", "c1", &[]).await;
    (g, api, turn)
}

/// Sends one raw request over a tunnel and reads the answer.
async fn send_over(s: &mut TcpStream, raw: &str) -> std::io::Result<Resp> {
    s.write_all(raw.as_bytes()).await?;
    tokio::time::timeout(Duration::from_secs(5), read_response(s))
        .await
        .map_err(std::io::Error::other)?
}

/// The turn's egress summary, once the recorder has flushed `host`'s row.
async fn egress_after_flush(api: &Api, turn: &Turn, host: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let e = api
            .get(&format!("/v1/turns/{}/egress", turn.id), RUNTIME)
            .await
            .json();
        let hosts: Vec<&str> = e["egress"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["host"].as_str()).collect())
            .unwrap_or_default();
        if hosts.contains(&host) || tokio::time::Instant::now() >= deadline {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn assert_host_mismatch(r: &Resp) {
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("host_mismatch"));
    assert_eq!(r.header("x-egress-approvable"), Some("false"));
}

#[tokio::test]
async fn plain_http_in_a_tunnel_cannot_name_another_virtual_host() {
    let o = origin().await;
    let port = o.addr.port();
    let (g, api, turn) = fronting_gate(&[port]).await;
    let authority = format!("{FILES}:{port}");
    // The first request names another host: refused, recorded, closed; the origin saw nothing.
    let (r, mut s) = connect(g.proxy(), &turn, &authority).await;
    assert_eq!(r.status, 200);
    let r = send_over(
        &mut s,
        &format!("GET /secret HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n"),
    )
    .await
    .unwrap();
    assert_host_mismatch(&r);
    assert!(
        wait_closed(&mut s, 5).await.is_ok(),
        "the tunnel must close"
    );
    assert!(
        wait_for_refusal(&api, &turn, "host_mismatch", 5)
            .await
            .is_some()
    );
    // Port-aware: the right name with another port is another authority.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    let r = send_over(
        &mut s,
        &format!("GET / HTTP/1.1\r\nhost: {FILES}:1\r\n\r\n"),
    )
    .await
    .unwrap();
    assert_host_mismatch(&r);
    // An absolute URI for another host inside the tunnel: the same.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    let raw = format!("GET http://{OTHER}:{port}/ HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\n");
    assert_host_mismatch(&send_over(&mut s, &raw).await.unwrap());
    // A nested CONNECT.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    let raw = format!("CONNECT {OTHER}:{port} HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n");
    assert_host_mismatch(&send_over(&mut s, &raw).await.unwrap());
    assert!(o.requests().is_empty(), "{:?}", o.requests());
    // Keep-alive: the first request is right and served; the second names another host.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    let ok = send_over(
        &mut s,
        &format!("GET /a HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\n"),
    )
    .await
    .unwrap();
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.text(), "origin says hi");
    let r = send_over(
        &mut s,
        &format!("GET /b HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n"),
    )
    .await
    .unwrap();
    assert_host_mismatch(&r);
    assert!(wait_closed(&mut s, 5).await.is_ok());
    let seen = o.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].starts_with("GET /a "), "{seen:?}");
    assert!(!seen[0].contains(OTHER), "{seen:?}");
    // The egress summary names only the CONNECT host.
    let e = egress_after_flush(&api, &turn, FILES).await;
    let hosts: Vec<&str> = e["egress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["host"].as_str())
        .collect();
    assert_eq!(hosts, [FILES], "{e}");
}

#[tokio::test]
async fn fronting_after_the_server_first_allowance_is_still_judged() {
    let pki = pki(&[FILES, OTHER]);
    let tls = tls_origin(&pki).await;
    let plain = origin().await;
    let (g, api, turn) = fronting_gate(&[tls.addr.port(), plain.addr.port()]).await;
    // TLS with another SNI, sent after the client waited past the allowance.
    let (r, s) = connect(g.proxy(), &turn, &format!("{FILES}:{}", tls.addr.port())).await;
    assert_eq!(r.status, 200);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        tls_get(s, pki.client(), OTHER).await.is_err(),
        "fronted TLS must not get through"
    );
    assert!(
        wait_for_refusal(&api, &turn, "sni_mismatch", 5)
            .await
            .is_some()
    );
    assert!(tls.requests().is_empty(), "{:?}", tls.requests());
    // The right SNI after the same wait works end to end.
    let (_, s) = connect(g.proxy(), &turn, &format!("{FILES}:{}", tls.addr.port())).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r = tls_get(s, pki.client(), FILES).await.unwrap();
    assert_eq!(r.status, 200);
    // Plain HTTP after the wait: judged request by request, like any other tunnel.
    let authority = format!("{FILES}:{}", plain.addr.port());
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let raw = format!(
        "GET / HTTP/1.1\r\nhost: {OTHER}:{}\r\n\r\n",
        plain.addr.port()
    );
    assert_host_mismatch(&send_over(&mut s, &raw).await.unwrap());
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r = get_over(&mut s, &authority).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(plain.requests().len(), 1);
}

#[tokio::test]
async fn a_server_first_protocol_still_works_and_its_client_bytes_are_judged() {
    // An origin that speaks first (an SSH-like banner) and then echoes a line back.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(b"SSH-2.0-TestServer\r\n").await;
                let mut buf = [0u8; 256];
                if let Ok(n) = s.read(&mut buf).await {
                    let _ = s.write_all(&buf[..n]).await;
                }
            });
        }
    });
    let (g, api, turn) = fronting_gate(&[port]).await;
    let (r, mut s) = connect(g.proxy(), &turn, &format!("{FILES}:{port}")).await;
    assert_eq!(r.status, 200);
    let mut banner = [0u8; 20];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut banner))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&banner, b"SSH-2.0-TestServer\r\n");
    s.write_all(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n")
        .await
        .unwrap();
    let mut echo = [0u8; 42];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut echo))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&echo[..], b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n");
    // After the same banner, a request for another virtual host is judged and refused.
    let (_, mut s) = connect(g.proxy(), &turn, &format!("{FILES}:{port}")).await;
    let mut banner = [0u8; 20];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut banner))
        .await
        .unwrap()
        .unwrap();
    let raw = format!("GET / HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n");
    assert_host_mismatch(&send_over(&mut s, &raw).await.unwrap());
    assert!(
        wait_for_refusal(&api, &turn, "host_mismatch", 5)
            .await
            .is_some()
    );
}

// ---------------------------------------------------------------------------------------------
// Encrypted Client Hello: the outer SNI is judged like any SNI.
// ---------------------------------------------------------------------------------------------

fn u16be(n: usize) -> [u8; 2] {
    u16::try_from(n).unwrap().to_be_bytes()
}

fn extension(kind: u16, body: &[u8]) -> Vec<u8> {
    let mut e = kind.to_be_bytes().to_vec();
    e.extend(u16be(body.len()));
    e.extend(body);
    e
}

/// A TLS 1.3 ClientHello naming `sni`, carrying an `encrypted_client_hello` (0xfe0d) outer
/// extension: HPKE suite, config id, a 32-byte encapsulated key and a payload (random-looking,
/// as in a GREASE ECH extension, which has the same shape as a real one).
fn ech_client_hello(sni: &str) -> Vec<u8> {
    let mut name = vec![0u8]; // host_name
    name.extend(u16be(sni.len()));
    name.extend(sni.as_bytes());
    let mut server_name = u16be(name.len()).to_vec();
    server_name.extend(name);
    let mut key_share = u16be(36).to_vec();
    key_share.extend([0x00, 0x1d, 0x00, 0x20]);
    key_share.extend([0x42; 32]);
    let mut ech = vec![0x00, 0x00, 0x01, 0x00, 0x01, 0x07]; // outer, HKDF-SHA256, AES-128-GCM, config 7
    ech.extend(u16be(32));
    ech.extend([0x11; 32]);
    ech.extend(u16be(144));
    ech.extend([0x5a; 144]);
    let exts = [
        extension(0x0000, &server_name),
        extension(0x000a, &[0x00, 0x02, 0x00, 0x1d]),
        extension(0x000d, &[0x00, 0x04, 0x08, 0x04, 0x04, 0x03]),
        extension(0x002b, &[0x02, 0x03, 0x04]),
        extension(0x0033, &key_share),
        extension(0xfe0d, &ech),
    ]
    .concat();
    let mut body = vec![0x03, 0x03];
    body.extend([0x24; 32]); // random
    body.push(32);
    body.extend([0x33; 32]); // legacy session id
    body.extend([0x00, 0x02, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
    body.extend([0x01, 0x00]); // no compression
    body.extend(u16be(exts.len()));
    body.extend(exts);
    let mut hs = vec![0x01, 0x00];
    hs.extend(u16be(body.len()));
    hs.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(u16be(hs.len()));
    record.extend(hs);
    record
}

#[tokio::test]
async fn an_ech_hello_is_judged_by_its_outer_sni_and_grease_ech_passes() {
    // A raw origin that reports the first bytes it receives.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                if let Ok(n) = s.read(&mut buf).await {
                    let _ = tx.send(buf[..n].to_vec());
                }
            });
        }
    });
    let (g, api, turn) = fronting_gate(&[port]).await;
    let authority = format!("{FILES}:{port}");
    // The outer name is a provider's public front, not the CONNECT host: refused.
    let (r, mut s) = connect(g.proxy(), &turn, &authority).await;
    assert_eq!(r.status, 200);
    s.write_all(&ech_client_hello("public.front.example.net"))
        .await
        .unwrap();
    assert!(
        wait_closed(&mut s, 5).await.is_ok(),
        "an ECH hello for another outer name must be cut"
    );
    let row = wait_for_refusal(&api, &turn, "sni_mismatch", 5).await;
    assert!(row.is_some(), "{:?}", api.refusals(&turn).await);
    // GREASE ECH with the CONNECT host as SNI: an ordinary connection, relayed untouched.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    let hello = ech_client_hello(FILES);
    s.write_all(&hello).await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the origin got the hello")
        .unwrap();
    assert_eq!(
        seen, hello,
        "the only bytes the origin saw are the right-named hello"
    );
    assert!(
        rx.try_recv().is_err(),
        "the refused hello never reached the origin"
    );
}

// ---------------------------------------------------------------------------------------------
// The control plane's addresses (`--control-addr`) are never dialled, even inside --allow-cidr.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn control_addresses_are_refused_like_the_gates_own_listeners() {
    // A listener standing in for a control process elsewhere on this host.
    let control = origin().await;
    let port = control.addr.port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &port.to_string()])
        .args(&["--control-addr", &format!("127.0.0.1:{port}")])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = api.turn("gina", "c1", &[]).await;
    let r = proxy_get(g.proxy(), &turn, &format!("http://{FILES}:{port}/")).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("private_address"));
    let (r, _) = connect(g.proxy(), &turn, &format!("{FILES}:{port}")).await;
    assert_eq!(r.header("x-egress-refused"), Some("private_address"));
    assert_eq!(
        control.connection_count(),
        0,
        "the control address was dialled"
    );
}

#[test]
fn a_bad_control_addr_is_one_line_and_a_non_zero_exit() {
    // The error names what the user wrote: the flag, or the environment variable.
    for (args, env, named) in [
        (vec!["--control-addr", "no-port"], None, "--control-addr"),
        (vec![], Some("127.0.0.1:80,junk"), "EGRESSGATE_CONTROL_ADDR"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"));
        cmd.arg("proxy")
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--proxy-listen", "127.0.0.1:0"])
            .args(&args)
            .env_remove("EGRESSGATE_CONTROL_ADDR");
        if let Some(v) = env {
            cmd.env("EGRESSGATE_CONTROL_ADDR", v);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// A proxy-only process told the control plane's address, on a database named only in the
/// URL's query (`?host=…&port=…`): neither is ever dialled, even inside `--allow-cidr`.
#[tokio::test]
async fn a_proxy_process_refuses_its_control_plane_and_a_query_named_database() {
    let pg = support::pg::PgCluster::start();
    let control = gate()
        .subcommand("control")
        .database(&pg.url())
        .args(&["--proxy-public-url", "127.0.0.1:3128"])
        .start();
    let control_port = control.control.unwrap().port();
    let query_url = format!(
        "postgres://postgres@localhost:1/postgres?host=127.0.0.1&port={}",
        pg.port
    );
    let proxy = gate()
        .subcommand("proxy")
        .database(&query_url)
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &control_port.to_string()])
        .args(&["--allow-port", &pg.port.to_string()])
        .args(&["--control-addr", &format!("127.0.0.1:{control_port}")])
        .start();
    let api = control.api();
    api.admin_site(FILES).await;
    let turn = api.turn("hana", "c1", &[]).await;
    for port in [control_port, pg.port] {
        let r = proxy_get(proxy.proxy(), &turn, &format!("http://{FILES}:{port}/")).await;
        assert_eq!(r.status, 403, "port {port}: {}", r.text());
        assert_eq!(r.header("x-egress-refused"), Some("private_address"));
        let (r, _) = connect(proxy.proxy(), &turn, &format!("{FILES}:{port}")).await;
        assert_eq!(
            r.header("x-egress-refused"),
            Some("private_address"),
            "port {port}"
        );
    }
}

/// The family of hole 2: whatever shape the first bytes take, a request for another host
/// never reaches the origin through a tunnel.
#[tokio::test]
async fn split_request_lines_and_http2_prefaces_in_a_tunnel_are_judged_too() {
    let o = origin().await;
    let port = o.addr.port();
    let (g, api, turn) = fronting_gate(&[port]).await;
    let authority = format!("{FILES}:{port}");
    // A request line split across a pause longer than the server-first allowance.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    s.write_all(b"G").await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let rest = format!("ET / HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n");
    assert_host_mismatch(&send_over(&mut s, &rest).await.unwrap());
    // Leading empty lines, which HTTP servers skip.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    let raw = format!("\r\n\r\nGET / HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n");
    assert_host_mismatch(&send_over(&mut s, &raw).await.unwrap());
    // An HTTP/2 prior-knowledge preface (its :authority would be invisible to an HTTP/1
    // check): never relayed raw; the tunnel closes.
    let (_, mut s) = connect(g.proxy(), &turn, &authority).await;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    assert!(
        buf.is_empty() || buf.starts_with(b"HTTP/1.1 4"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    assert!(o.requests().is_empty(), "{:?}", o.requests());
    assert_eq!(o.connection_count(), 0, "nothing was relayed to the origin");
    assert!(
        wait_for_refusal(&api, &turn, "host_mismatch", 5)
            .await
            .is_some()
    );
}
