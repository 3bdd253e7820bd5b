//! The review's hole 2 (issue 12) and its family: a tunnel carries traffic for its CONNECT
//! host only, on every port, whatever shape the first bytes take (plain HTTP naming another
//! virtual host, bytes after the server-first allowance, a split request line, an HTTP/2
//! preface, an Encrypted Client Hello's outer name).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::hello::ech_client_hello;
use support::relay::{OTHER, origin_relay, relay_gate};
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// Hole 2: a tunnel carries traffic for its CONNECT host only, on every port.
// ---------------------------------------------------------------------------------------------

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
    let (g, api, turn, o) = origin_relay().await;
    let port = o.port();
    let authority = format!("{FILES}:{port}");
    // (what the first request inside the tunnel names, the request)
    for (trick, raw) in [
        (
            "another virtual host",
            format!("GET /secret HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n"),
        ),
        (
            "the right name with another port (another authority)",
            format!("GET / HTTP/1.1\r\nhost: {FILES}:1\r\n\r\n"),
        ),
        (
            "an absolute URI for another host",
            format!("GET http://{OTHER}:{port}/ HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\n"),
        ),
        (
            "a nested CONNECT",
            format!("CONNECT {OTHER}:{port} HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n"),
        ),
    ] {
        // Refused, recorded and closed; the origin sees nothing.
        let (r, mut s) = connect(g.proxy(), &turn, &authority).await;
        assert_eq!(r.status, 200, "{trick}");
        assert_host_mismatch(&send_over(&mut s, &raw).await.unwrap());
        let closed = wait_closed(&mut s, 5).await;
        assert!(closed.is_ok(), "{trick}: the tunnel must close");
    }
    assert_recorded(&api, &turn, "host_mismatch").await;
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
    let (g, api, turn) = relay_gate(&[tls.addr.port(), plain.addr.port()]).await;
    // TLS with another SNI, sent after the client waited past the allowance.
    let (r, s) = connect(g.proxy(), &turn, &format!("{FILES}:{}", tls.addr.port())).await;
    assert_eq!(r.status, 200);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        tls_get(s, pki.client(), OTHER).await.is_err(),
        "fronted TLS must not get through"
    );
    assert_recorded(&api, &turn, "sni_mismatch").await;
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
    let (g, api, turn) = relay_gate(&[port]).await;
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
    assert_recorded(&api, &turn, "host_mismatch").await;
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
    let (g, api, turn) = relay_gate(&[port]).await;
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
    assert_recorded(&api, &turn, "sni_mismatch").await;
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

/// The family of hole 2: whatever shape the first bytes take, a request for another host
/// never reaches the origin through a tunnel.
#[tokio::test]
async fn split_request_lines_and_http2_prefaces_in_a_tunnel_are_judged_too() {
    let (g, api, turn, o) = origin_relay().await;
    let port = o.port();
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
    assert_recorded(&api, &turn, "host_mismatch").await;
}
