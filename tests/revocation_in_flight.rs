//! A forwarded request caught by a revocation while it waits for the origin's answer gets the
//! answer its retry would get, not a bare close: `403 not_approved`, recorded against its turn
//! for a person to approve again, when its approval is revoked; `407` when its chat is hidden
//! (which ends the turn); in shadow mode, a record with `shadow: true` and `503` asking for
//! the retry that shadow mode lets through; a `503` asking for the retry, too, for a request
//! to a host still allowed on a keep-alive connection that the revocation closes. A response
//! whose head already went out is cut, as before: its body is what the revocation withdraws.
//! The origin here holds each request until the test has revoked, so the order is fixed, not
//! timed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::held::{FILES, approve};
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// What the holding origin does once it has read a request's head.
#[derive(Clone, Copy)]
enum Holds {
    /// Says nothing: the request waits for its head.
    Head,
    /// Sends a head promising 1 MiB and ten bytes of it: the body is streaming.
    Body,
}

/// A loopback origin that reads each request's head, reports it on the channel, then holds
/// the connection open as `holds` says until the test ends.
async fn holding_origin(holds: Holds) -> (u16, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(hold(s, holds, tx.clone()));
        }
    });
    (port, rx)
}

/// Holds the first request on `s` whose path is not `/ok` (`/ok` is answered at once).
async fn hold(mut s: TcpStream, holds: Holds, seen: mpsc::UnboundedSender<String>) {
    let mut byte = [0u8; 1];
    let head = loop {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        if !head.starts_with(b"GET /ok ") {
            break head;
        }
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        if s.write_all(ok).await.is_err() {
            return;
        }
    };
    if let Holds::Body = holds {
        let start = b"HTTP/1.1 200 OK\r\ncontent-length: 1048576\r\n\r\n0123456789";
        if s.write_all(start).await.is_err() {
            return;
        }
    }
    let _ = seen.send(String::from_utf8_lossy(&head).into_owned());
    // Hold until the proxy lets go of this connection.
    let _ = s.read(&mut byte).await;
}

/// A gate that reaches the holding origin as [`FILES`], and a turn of alice in chat c1 whose
/// approval of [`FILES`] a person gave; the origin's channel of request heads.
async fn approved(holds: Holds) -> (Gate, Api, Turn, u16, mpsc::UnboundedReceiver<String>) {
    let (port, seen) = holding_origin(holds).await;
    let g = gate()
        .loopback()
        .ports(&[port])
        .names(&[FILES])
        .args(&["--epoch-poll", "1h"])
        .start();
    let api = g.api();
    let turn = api.turn("alice", "c1", &[]).await;
    approve(&api, &turn, port).await;
    (g, api, turn, port, seen)
}

/// Sends `GET http://FILES:port/data.csv` with the turn's credential on a new connection and
/// waits until the origin has the request: it is now in flight, its head not yet answered.
async fn in_flight(
    g: &Gate,
    turn: &Turn,
    port: u16,
    seen: &mut mpsc::UnboundedReceiver<String>,
) -> TcpStream {
    let mut s = TcpStream::connect(g.proxy()).await.unwrap();
    send_held(&mut s, turn, FILES, port, seen).await;
    s
}

/// Sends `GET http://host:port/data.csv` on `s` and waits until the origin holds it.
async fn send_held(
    s: &mut TcpStream,
    turn: &Turn,
    host: &str,
    port: u16,
    seen: &mut mpsc::UnboundedReceiver<String>,
) {
    let head = format!(
        "GET http://{host}:{port}/data.csv HTTP/1.1\r\nhost: {host}:{port}\r\nproxy-authorization: {}\r\n\r\n",
        turn.auth_header()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let asked = tokio::time::timeout(Duration::from_secs(10), seen.recv()).await;
    let asked = asked.expect("the request at the origin in time").unwrap();
    assert!(asked.starts_with("GET /data.csv "), "{asked}");
}

/// Alice revokes her chat's approval of [`FILES`] (2xx asserted); returns when it answered.
async fn revoke_files(api: &Api) -> Instant {
    let r = api.revoke("alice", "c1", "site", FILES).await;
    assert!(r.status < 300, "revoke: {} {}", r.status, r.text());
    Instant::now()
}

/// Revokes as [`revoke_files`], then the proxy's answer on `s` ([`answered_then_closed`]).
async fn revoked_under(api: &Api, s: &mut TcpStream, what: &str) -> Resp {
    let since = revoke_files(api).await;
    answered_then_closed(s, since, what).await
}

/// The answer is the `503` that asks the client to send the request again.
#[track_caller]
fn assert_sent_to_retry(r: &Resp) {
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("retry it"), "{}", r.text());
}

/// The proxy's answer on `s` (read within a second of `since`), and that it then closes `s`.
async fn answered_then_closed(s: &mut TcpStream, since: Instant, what: &str) -> Resp {
    let r = within(1, what, read_response(s)).await.unwrap();
    let took = since.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "{what}: answered after {took:?}"
    );
    assert!(wait_closed(s, 3).await.is_ok(), "{what}: left open");
    r
}

/// The turn's refusal row for [`FILES`], if there is one.
async fn files_refusal(api: &Api, turn: &Turn) -> Option<serde_json::Value> {
    let refusals = api.refusals(turn).await;
    let rows = refusals["refusals"].as_array().unwrap();
    rows.iter().find(|r| r["host"] == FILES).cloned()
}

#[tokio::test]
async fn a_request_in_flight_when_its_approval_is_revoked_is_refused_and_recorded() {
    let (g, api, turn, port, mut seen) = approved(Holds::Head).await;
    let count =
        |row: &Option<serde_json::Value>| row.as_ref().map_or(0, |r| r["count"].as_i64().unwrap());
    let before = count(&files_refusal(&api, &turn).await);
    let mut s = in_flight(&g, &turn, port, &mut seen).await;
    let r = revoked_under(&api, &mut s, "the request in flight").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
    assert_eq!(r.header("x-egress-approvable"), Some("true"));
    // Recorded like any refusal, so the agent can ask a person again.
    let row = files_refusal(&api, &turn).await;
    assert_eq!(count(&row), before + 1, "{row:?}");
    let row = row.unwrap();
    assert_eq!(row["reason"], "not_approved", "{row}");
    assert_eq!(row["method"], "GET", "{row}");
    assert_eq!(
        row["url"],
        format!("http://{FILES}:{port}/data.csv"),
        "{row}"
    );
    // The retry gets the same answer, and never reaches the origin.
    let r = g
        .get(&turn, &format!("http://{FILES}:{port}/data.csv"))
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(count(&files_refusal(&api, &turn).await), before + 2);
    assert!(seen.try_recv().is_err(), "the retry reached the origin");
}

#[tokio::test]
async fn a_request_in_flight_when_its_chat_is_hidden_is_answered_407() {
    let (g, api, turn, port, mut seen) = approved(Holds::Head).await;
    let mut s = in_flight(&g, &turn, port, &mut seen).await;
    let r = api.hide_chat("alice", "c1").await;
    assert!(r.status < 300, "hide: {} {}", r.status, r.text());
    let since = Instant::now();
    let r = answered_then_closed(&mut s, since, "the request in flight").await;
    assert_eq!(r.status, 407, "{}", r.text());
    assert!(r.header("proxy-authenticate").is_some());
}

#[tokio::test]
async fn a_body_streaming_when_its_approval_is_revoked_is_cut() {
    let (g, api, turn, port, mut seen) = approved(Holds::Body).await;
    let mut s = in_flight(&g, &turn, port, &mut seen).await;
    // The head and the first bytes are through: the response is streaming.
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"0123456789") {
        let n = within(5, "the streaming body", s.read(&mut buf))
            .await
            .unwrap();
        assert!(n > 0, "closed before the body started");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200 "));
    let since = revoke_files(&api).await;
    // Cut: the connection closes with the body short of its content-length.
    let took = wait_closed(&mut s, 3).await;
    assert!(took.is_ok(), "the streaming response was not cut");
    assert!(since.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn in_shadow_mode_a_request_overtaken_by_a_revocation_is_recorded_and_sent_to_retry() {
    let (g, api, turn, port, mut seen) = approved(Holds::Head).await;
    let r = api
        .set_user("alice", serde_json::json!({"mode": "shadow"}))
        .await;
    assert!(r.status < 300, "shadow: {} {}", r.status, r.text());
    let mut s = in_flight(&g, &turn, port, &mut seen).await;
    // The proxy cannot send the overtaken request again: it records the would-be refusal
    // in shadow and asks for the retry, which shadow mode lets through.
    assert_sent_to_retry(&revoked_under(&api, &mut s, "the request in flight").await);
    let row = files_refusal(&api, &turn).await.expect("a shadow record");
    assert_eq!(row["reason"], "not_approved", "{row}");
    assert_eq!(row["shadow"], true, "{row}");
    let retry = in_flight(&g, &turn, port, &mut seen).await;
    drop(retry);
}

#[tokio::test]
async fn a_request_to_another_host_on_a_connection_a_revocation_closes_is_sent_to_retry() {
    const LISTED: &str = "listed.example.com";
    let (port, mut seen) = holding_origin(Holds::Head).await;
    let g = gate()
        .loopback()
        .ports(&[port])
        .names(&[FILES, LISTED])
        .args(&["--epoch-poll", "1h"])
        .start();
    let api = g.api();
    api.admin_site(LISTED).await;
    let turn = api.turn("alice", "c1", &[]).await;
    approve(&api, &turn, port).await;
    // The keep-alive connection reached FILES under the approval, so revoking it closes the
    // connection; meanwhile it carries a request to the listed host, held at the origin.
    let mut s = TcpStream::connect(g.proxy()).await.unwrap();
    let r = get_on(&mut s, &turn, &format!("{FILES}:{port}"), "/ok", "\r\n").await;
    assert_eq!(r.status, 200, "{}", r.text());
    send_held(&mut s, &turn, LISTED, port, &mut seen).await;
    // The listed host is still allowed: no refusal, a 503 that asks for the retry.
    assert_sent_to_retry(&revoked_under(&api, &mut s, "the request to the listed host").await);
    let refusals = api.refusals(&turn).await;
    let rows = refusals["refusals"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["host"] != LISTED), "{refusals}");
    // The retry, on a new connection, reaches the origin.
    let mut retry = TcpStream::connect(g.proxy()).await.unwrap();
    send_held(&mut retry, &turn, LISTED, port, &mut seen).await;
}
