//! The relay forwards only what it judged. Each test tries to get a request for another
//! virtual host past the judge inside a tunnel to an approved one, against the real binary and
//! a real origin that would serve it: Node's strict parser for hop-by-hop framing options,
//! Python's lenient one for odd request-line whitespace and for bodies on methods that define
//! none. In every case the answer is the proxy's own, the tunnel closes, and the origin never
//! sees the other host's name.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::relay::*;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A relay gate in front of a script origin, and the request to the other virtual host that
/// each row hides where the origin might read it as a request.
struct Bench {
    origin: ScriptOrigin,
    port: u16,
    g: Gate,
    api: Api,
    turn: Turn,
    /// `GET /secret` for [`OTHER`], as a body would carry it.
    hidden: String,
}

impl Bench {
    async fn on(origin: ScriptOrigin) -> Self {
        let port = origin.port;
        let (g, api, turn) = relay_gate(&[port]).await;
        let hidden = format!("GET /secret HTTP/1.1\r\nHost: {OTHER}:{port}\r\n\r\n");
        Self {
            origin,
            port,
            g,
            api,
            turn,
            hidden,
        }
    }

    /// Sends `raw` in a fresh tunnel and expects the proxy's `status` naming `why`, then the
    /// tunnel's close.
    async fn refused(&self, raw: &[u8], status: u16, why: &str) {
        let mut s = open(&self.g, &self.turn, self.port).await;
        s.write_all(raw).await.unwrap();
        let r = answer(&mut s).await;
        let shown = String::from_utf8_lossy(raw);
        assert_eq!(r.status, status, "{shown:?}: {}", r.text());
        assert!(r.text().contains(why), "{shown:?}: {}", r.text());
        assert!(
            !r.text().contains("vhost="),
            "{shown:?} reached the origin: {}",
            r.text()
        );
        assert!(
            wait_closed(&mut s, 5).await.is_ok(),
            "{shown:?}: must close"
        );
    }

    /// Sends `raw` in a fresh tunnel that stays open for the answers.
    async fn send(&self, raw: &str) -> tokio::net::TcpStream {
        send(&self.g, &self.turn, self.port, raw).await
    }
}

#[tokio::test]
async fn a_connection_option_naming_framing_host_upgrade_or_expect_is_a_400_before_a_strict_origin()
{
    let b = Bench::on(ScriptOrigin::node()).await;
    let (port, hidden) = (b.port, &b.hidden);
    let n = hidden.len();
    let chunked = format!("{n:x}\r\n{hidden}\r\n0\r\n\r\n");
    let why = "Connection may not name";
    for (fields, body) in [
        (
            format!("Connection: Content-Length\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
        (
            format!("connection: CONTENT-length\r\ncontent-length: {n}"),
            hidden.clone(),
        ),
        (
            format!("Connection: keep-alive , content-length\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
        (
            format!("Connection: close\r\nConnection: Content-Length\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
        (
            format!("Connection:\tContent-Length\t\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
        (
            "Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked".to_owned(),
            chunked.clone(),
        ),
        (
            format!("Connection: Host\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
        (
            format!("Connection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
        (
            format!("Connection: Expect\r\nExpect: 100-continue\r\nContent-Length: {n}"),
            hidden.clone(),
        ),
    ] {
        let raw = format!("POST /up HTTP/1.1\r\nHost: {FILES}:{port}\r\n{fields}\r\n\r\n{body}");
        b.refused(raw.as_bytes(), 400, why).await;
    }
    // On a kept-alive tunnel: the first request is served, the second is refused.
    let raw = format!(
        "GET /a HTTP/1.1\r\nHost: {FILES}:{port}\r\n\r\nPOST /b HTTP/1.1\r\nHost: {FILES}:{port}\r\n\
         Connection: Content-Length\r\nContent-Length: {n}\r\n\r\n{hidden}"
    );
    let mut s = b.send(&raw).await;
    let first = answer(&mut s).await;
    assert_eq!(first.text(), format!("vhost={FILES}:{port} path=/a"));
    let second = answer(&mut s).await;
    assert_eq!(second.status, 400, "{}", second.text());
    assert!(second.text().contains(why), "{}", second.text());
    assert!(wait_closed(&mut s, 5).await.is_ok());
    assert_eq!(
        b.origin.settled_requests().await,
        [format!("{FILES}:{port} GET /a")],
        "only the first request may reach the origin"
    );
    // A framing refusal is the proxy's own 400, not a recorded refusal.
    let refusals = b.api.refusals(&b.turn).await;
    assert_eq!(refusals["refusals"], serde_json::json!([]), "{refusals}");
}

/// A `Transfer-Encoding` field that names no coding (found by the `http_framing` fuzz target)
/// is present to an origin that checks for the field and absent to one that reads its list:
/// whatever follows could be a body to one and a request to the other, so it is a `400`.
#[tokio::test]
async fn a_transfer_encoding_naming_no_coding_is_a_400() {
    let b = Bench::on(ScriptOrigin::node()).await;
    let (port, hidden) = (b.port, &b.hidden);
    let n = hidden.len();
    for fields in [
        "Transfer-Encoding: ".to_owned(),
        "Transfer-Encoding: ,".to_owned(),
        format!("Transfer-Encoding:  , \r\nContent-Length: {n}"),
        format!("Content-Length: {n}\r\nTransfer-Encoding:"),
    ] {
        let raw = format!("POST /up HTTP/1.1\r\nHost: {FILES}:{port}\r\n{fields}\r\n\r\n{hidden}");
        b.refused(raw.as_bytes(), 400, "ambiguous request body framing")
            .await;
    }
    assert_eq!(b.origin.settled_requests().await, Vec::<String>::new());
}

#[tokio::test]
async fn odd_whitespace_in_a_request_line_is_judged_as_http_never_relayed_unjudged() {
    let b = Bench::on(ScriptOrigin::python()).await;
    let port = b.port;
    let why = "malformed HTTP/1.1 request";
    for line in [
        &b"GET\x0b/secret HTTP/1.1"[..],
        b"GET\x0c/secret HTTP/1.1",
        b"GET\x1c/secret HTTP/1.1",
        b"GET\x1d/secret HTTP/1.1",
        b"GET\x1e/secret HTTP/1.1",
        b"GET\x1f/secret HTTP/1.1",
        b"GET /secret\x0bHTTP/1.1",
        b" GET /secret HTTP/1.1",
        b"\x0cGET /secret HTTP/1.1",
        b"\x0bGET /secret HTTP/1.1",
        b"\x1cGET /secret HTTP/1.1",
        b"\x85GET /secret HTTP/1.1",
        b"\xa0GET /secret HTTP/1.1",
        b"GET  /secret HTTP/1.1",
        b"GET\t/secret\tHTTP/1.1",
    ] {
        let mut raw = line.to_vec();
        raw.extend_from_slice(format!("\r\nHost: {OTHER}:{port}\r\n\r\n").as_bytes());
        b.refused(&raw, 400, why).await;
    }
    // Text protocols that name no HTTP version are judged as HTTP too, and refused.
    for raw in [&b"EHLO client.example\r\n"[..], b"*1\r\n$4\r\nPING\r\n"] {
        b.refused(raw, 400, why).await;
    }
    // Empty lines before a request line are allowed (RFC 9112 §2.2) and the head is judged.
    let raw = format!("\r\nGET /ok HTTP/1.1\r\nHost: {FILES}:{port}\r\n\r\n");
    let mut s = b.send(&raw).await;
    assert_eq!(
        answer(&mut s).await.text(),
        format!("vhost={FILES}:{port} path=/ok")
    );
    assert_eq!(
        b.origin.settled_requests().await,
        [format!("{FILES}:{port} GET /ok")],
        "no odd line may reach the origin"
    );
}

#[tokio::test]
async fn a_body_on_a_method_that_defines_none_is_refused_before_an_origin_that_ignores_it() {
    let b = Bench::on(ScriptOrigin::python()).await;
    let (port, hidden) = (b.port, &b.hidden);
    let n = hidden.len();
    let why = "may not carry a body";
    for method in ["GET", "HEAD", "OPTIONS", "DELETE", "TRACE"] {
        for (framing, body) in [
            (format!("Content-Length: {n}"), hidden.clone()),
            (
                "Transfer-Encoding: chunked".to_owned(),
                format!("{n:x}\r\n{hidden}\r\n0\r\n\r\n"),
            ),
        ] {
            let raw =
                format!("{method} / HTTP/1.1\r\nHost: {FILES}:{port}\r\n{framing}\r\n\r\n{body}");
            b.refused(raw.as_bytes(), 400, why).await;
        }
    }
    // The neighbours that pass: an empty body, and a body where the method defines one.
    let raw = format!(
        "GET /empty HTTP/1.1\r\nHost: {FILES}:{port}\r\nContent-Length: 0\r\n\r\n\
         POST /up HTTP/1.1\r\nHost: {FILES}:{port}\r\nContent-Length: {n}\r\n\r\n{hidden}"
    );
    let mut s = b.send(&raw).await;
    assert_eq!(
        answer(&mut s).await.text(),
        format!("vhost={FILES}:{port} path=/empty")
    );
    assert_eq!(
        answer(&mut s).await.text(),
        format!("vhost={FILES}:{port} path=/up")
    );
    assert_eq!(
        b.origin.settled_requests().await,
        [
            format!("{FILES}:{port} GET /empty"),
            format!("{FILES}:{port} POST /up")
        ]
    );
}

#[tokio::test]
async fn an_answer_to_no_request_cuts_the_tunnel_and_nothing_after_a_last_request_is_passed_on() {
    // An origin that answers one request twice: the second answer is what a request smuggled
    // past the proxy would get.
    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled";
    let (g, _api, turn, port, seen) = raw_relay(b"\r\n\r\n", reply).await;
    let raw = format!("GET /a HTTP/1.1\r\nHost: {FILES}:{port}\r\n\r\n");
    let mut s = send(&g, &turn, port, &raw).await;
    // Both answers come in one read, so the cut drops the first with them: all the client
    // gets is the close.
    let mut got = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut got));
    assert!(read.await.is_ok(), "the tunnel must be cut, not left open");
    let got = String::from_utf8_lossy(&got);
    assert!(!got.contains("smuggled"), "{got}");
    assert!(
        text(&seen).starts_with("GET /a HTTP/1.1\r\n"),
        "{}",
        text(&seen)
    );

    // A request that asks to be the last ends the tunnel: a request pipelined after it never
    // reaches the origin.
    let (g, _api, turn, o) = origin_relay().await;
    let port = o.port();
    let raw = format!(
        "GET /last HTTP/1.1\r\nHost: {FILES}:{port}\r\nConnection: close\r\n\r\n\
         GET /after HTTP/1.1\r\nHost: {FILES}:{port}\r\n\r\n"
    );
    let mut s = send(&g, &turn, port, &raw).await;
    assert_eq!(answer(&mut s).await.status, 200);
    assert!(wait_closed(&mut s, 5).await.is_ok());
    let requests = o.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(requests[0].starts_with("GET /last "), "{requests:?}");
}
