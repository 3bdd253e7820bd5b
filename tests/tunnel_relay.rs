//! Plain HTTP inside a tunnel on a `full` grant is relayed as bytes, with every request head
//! still found and judged: pipelined requests, bodies that look like requests, ambiguous
//! framing, proxy credentials and protocol switches, each tried against the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::relay::*;
use support::*;
use tokio::io::AsyncWriteExt as _;

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_and_a_foreign_one_refused() {
    let (g, api, turn, o) = origin_relay().await;
    let port = o.port();
    // Both requests in one write: the first is served, the second names another host.
    let raw = format!(
        "GET /a HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\nGET /b HTTP/1.1\r\nhost: {OTHER}:{port}\r\n\r\n"
    );
    let mut s = send(&g, &turn, port, &raw).await;
    let first = answer(&mut s).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "origin says hi");
    let second = answer(&mut s).await;
    assert_eq!(second.status, 403, "{}", second.text());
    assert_eq!(second.header("x-egress-refused"), Some("host_mismatch"));
    assert!(
        wait_closed(&mut s, 5).await.is_ok(),
        "the tunnel must close"
    );
    assert!(
        wait_for_refusal(&api, &turn, "host_mismatch", 5)
            .await
            .is_some()
    );
    let seen = o.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].starts_with("GET /a HTTP/1.1\r\n"), "{seen:?}");
    // Each request has its own decision line; the tunnel's closes its account.
    let line = g.log_line(&["kind=\"tunnel_http\"", "bytes_down=14"]).await;
    let line = line.expect("a tunnel_http line for the first request");
    assert!(line.contains(&format!("addr=127.0.0.1:{port}")), "{line}");
    assert!(line.contains("status=200"), "{line}");
}

#[tokio::test]
async fn a_request_inside_a_chunked_body_is_body_and_the_next_head_is_judged_and_cleaned() {
    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nokay";
    let (g, api, turn, port, seen) = raw_relay(b"GET /after", reply).await;
    let mut s = open(&g, &turn, port).await;
    let hidden = format!("GET /evil HTTP/1.1\r\nhost: {OTHER}\r\n\r\n");
    let body = format!("{:x}\r\n{hidden}\r\n0\r\n\r\n", hidden.len());
    let raw = format!(
        "POST /up HTTP/1.1\r\nHost: FILES.example.com.:{port}\r\ntransfer-encoding: chunked\r\n\r\n{body}\
         GET /after HTTP/1.1\r\nhost: {FILES}:{port}\r\nproxy-authorization: Basic c2VjcmV0\r\n\
         upgrade: h2c\r\nconnection: keep-alive\r\n\r\n"
    );
    // Split mid-way through the hidden request, so the body crosses reads.
    let (a, b) = raw
        .as_bytes()
        .split_at(raw.find("host: unapproved").unwrap() + 4);
    s.write_all(a).await.unwrap();
    s.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(b).await.unwrap();
    assert_eq!(answer(&mut s).await.text(), "ok");
    assert_eq!(answer(&mut s).await.text(), "okay");
    let got = text(&seen);
    // The heads were written afresh, the body's chunks again (the split read makes two of
    // them): the same data, the hidden request still inside it, the next head after it.
    let head =
        format!("POST /up HTTP/1.1\r\nhost: {FILES}:{port}\r\ntransfer-encoding: chunked\r\n\r\n");
    assert!(got.starts_with(&head), "{got}");
    let (data, rest) = dechunk(&got[head.len()..]);
    assert_eq!(data, hidden, "{got}");
    assert!(
        rest.starts_with(&format!("GET /after HTTP/1.1\r\nhost: {FILES}:{port}\r\n")),
        "{got}"
    );
    let lower = got.to_ascii_lowercase();
    assert!(!lower.contains("proxy-authorization"), "{got}");
    assert!(!lower.contains("upgrade:"), "{got}");
    // Connection options are the client's hop's, never the origin's.
    assert!(!lower.contains("connection:"), "{got}");
    assert_no_refusals(&api, &turn).await;
}

#[tokio::test]
async fn ambiguous_framing_is_a_400_and_never_reaches_the_origin() {
    let (g, api, turn, o) = origin_relay().await;
    let port = o.port();
    let host = format!("host: {FILES}:{port}\r\n");
    for framing in [
        "content-length: 5\r\ntransfer-encoding: chunked\r\n",
        "transfer-encoding: chunked\r\ncontent-length: 5\r\n",
        "content-length: 5\r\ncontent-length: 6\r\n",
        "content-length: 5, 6\r\n",
        "content-length: -5\r\n",
        "transfer-encoding: gzip\r\n",
        "transfer-encoding: chunked, chunked\r\n",
        "transfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n",
    ] {
        let raw = format!("POST / HTTP/1.1\r\n{host}{framing}\r\nhello");
        let mut s = send(&g, &turn, port, &raw).await;
        let r = answer(&mut s).await;
        assert_eq!(r.status, 400, "{framing:?}: {}", r.text());
        assert!(
            r.text().contains("ambiguous request body framing"),
            "{}",
            r.text()
        );
        assert!(
            wait_closed(&mut s, 5).await.is_ok(),
            "{framing:?}: must close"
        );
    }
    // HTTP/1.0 has no transfer codings: a chunked 1.0 body is faulty framing too.
    let raw = format!("POST / HTTP/1.0\r\n{host}transfer-encoding: chunked\r\n\r\n0\r\n\r\n");
    let mut s = send(&g, &turn, port, &raw).await;
    let r = answer(&mut s).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(wait_closed(&mut s, 5).await.is_ok());
    // Junk where a head should be, and a head past the size limit.
    for raw in [
        "GET / HTTP/1.1\r\nbad header\r\n\r\n".to_owned(),
        format!(
            "GET / HTTP/1.1\r\n{host}x-big: {}\r\n\r\n",
            "a".repeat(70 * 1024)
        ),
    ] {
        let mut s = send(&g, &turn, port, &raw).await;
        let r = answer(&mut s).await;
        assert!([400, 431].contains(&r.status), "{}", r.text());
        assert!(wait_closed(&mut s, 5).await.is_ok());
    }
    assert_eq!(o.connection_count(), 0, "the origin must never be dialled");
    assert_no_refusals(&api, &turn).await;
}

#[tokio::test]
async fn a_malformed_chunk_after_a_good_head_closes_the_tunnel() {
    let (g, _api, turn, port, seen) = raw_relay(b"never", b"").await;
    let raw = format!(
        "POST / HTTP/1.1\r\nhost: {FILES}:{port}\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nGET /x HTTP/1.1\r\nhost: {OTHER}\r\n\r\n"
    );
    let mut s = send(&g, &turn, port, &raw).await;
    // Its request is still unanswered, so the tunnel closes without an answer of its own.
    assert!(wait_closed(&mut s, 5).await.is_ok());
    let mut got = text(&seen);
    for _ in 0..100 {
        if got.contains("chunked\r\n\r\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        got = text(&seen);
    }
    assert!(got.starts_with("POST / HTTP/1.1\r\n"), "{got}");
    assert!(!got.contains("zz") && !got.contains(OTHER), "{got}");
}

#[tokio::test]
async fn an_origin_that_switches_protocols_is_cut_off() {
    let reply =
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\nRAW BYTES";
    let (g, _api, turn, port, _seen) = raw_relay(b"\r\n\r\n", reply).await;
    let raw = format!("GET / HTTP/1.1\r\nhost: {FILES}:{port}\r\nupgrade: h2c\r\n\r\n");
    let mut s = send(&g, &turn, port, &raw).await;
    // The switch is never relayed: the tunnel closes without a byte of it.
    assert_eq!(wait_closed(&mut s, 5).await.map(|_| ()), Ok(()));
}

#[tokio::test]
async fn a_clean_origin_connection_serves_the_turns_next_tunnel_only() {
    let (g, api, turn, o) = origin_relay().await;
    let port = o.port();
    let authority = format!("{FILES}:{port}");
    // One tunnel, to its end (its line is written after its connection was kept).
    let get_once = async |turn: Turn, nth: usize| {
        let mut s = open_at(g.proxy(), &turn, &authority).await;
        assert_eq!(get_over(&mut s, &authority).await.unwrap().status, 200);
        drop(s);
        tunnels_ended(&g, nth).await;
    };
    // Two tunnels of one turn, one after the other: one origin connection.
    get_once(turn.clone(), 1).await;
    get_once(turn.clone(), 2).await;
    assert_eq!(o.connection_count(), 1);
    // Another turn never gets it.
    let other = api.turn("sam", "c2", &[]).await;
    get_once(other, 3).await;
    assert_eq!(o.connection_count(), 2);
    // A request with a body leaves a connection nobody can vouch for: not kept.
    let mut s = open_at(g.proxy(), &turn, &authority).await;
    let post = format!("POST / HTTP/1.1\r\nhost: {authority}\r\ncontent-length: 2\r\n\r\nhi");
    s.write_all(post.as_bytes()).await.unwrap();
    assert_eq!(answer(&mut s).await.status, 200);
    drop(s);
    tunnels_ended(&g, 4).await;
    get_once(turn.clone(), 5).await;
    assert_eq!(o.requests().len(), 5);
    assert_eq!(o.connection_count(), 3, "{:?}", o.requests());
    // A client that asks to close gets its answer and the tunnel closes; the origin never
    // hears of it, so its connection serves the next tunnel.
    let mut s = open_at(g.proxy(), &turn, &authority).await;
    let last = format!("GET /last HTTP/1.1\r\nhost: {authority}\r\nConnection: close\r\n\r\n");
    s.write_all(last.as_bytes()).await.unwrap();
    assert_eq!(answer(&mut s).await.status, 200);
    assert!(
        wait_closed(&mut s, 5).await.is_ok(),
        "the proxy closes the tunnel"
    );
    tunnels_ended(&g, 6).await;
    get_once(turn.clone(), 7).await;
    let seen = o.requests();
    assert!(
        !seen[5].to_ascii_lowercase().contains("connection"),
        "{seen:?}"
    );
    assert_eq!(o.connection_count(), 3, "{seen:?}");
}

#[tokio::test]
async fn a_long_body_moves_whole_and_the_next_answer_still_follows_it() {
    // 3 MiB and a bit, in a pattern that shows any lost or repeated byte.
    const N: usize = 3 * 1024 * 1024 + 7;
    let mut reply = format!("HTTP/1.1 200 OK\r\ncontent-length: {N}\r\n\r\n").into_bytes();
    reply.extend((0..N).map(|i| (i % 251) as u8));
    reply.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nnext");
    let (g, _api, turn, port, _seen) =
        raw_relay(b"GET /second", Box::leak(reply.into_boxed_slice())).await;
    let raw = format!(
        "GET /big HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\nGET /second HTTP/1.1\r\nhost: {FILES}:{port}\r\n\r\n"
    );
    let mut s = send(&g, &turn, port, &raw).await;
    let big = answer(&mut s).await;
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), N);
    assert!(
        big.body
            .iter()
            .enumerate()
            .all(|(i, b)| *b == (i % 251) as u8),
        "the body arrived altered"
    );
    assert_eq!(answer(&mut s).await.text(), "next");
    let line = g
        .log_line(&["kind=\"tunnel_http\"", &format!("bytes_down={N}")])
        .await;
    assert!(
        line.is_some(),
        "the long answer's line counts all of its body"
    );
}
