//! The command as the sandbox's evidence (issue 25), with the real gate and a real client in
//! the sandbox: a captured `curl` that is refused shows on the card's evidence as `command`
//! (`curl` and its first arguments); a `CONNECT` of a client that asked for the proxy itself
//! (unmarked) gets no command recorded whatever it sends; and a marked `CONNECT`'s over-long,
//! non-ASCII command is cut and cleaned before it is kept.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::capture::*;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const CAPTURED: &str = "asked.example.com";
const PROXIED: &str = "proxied.example.com";
const MARKED: &str = "marked.example.com";

/// Sends `CONNECT authority` with `extra` header lines (raw bytes) and returns the answer's
/// status; the refusal is on the record before any answer goes out.
async fn connect_with(g: &Gate, turn: &Turn, authority: &str, extra: &[u8]) -> u16 {
    let mut s = TcpStream::connect(g.proxy()).await.unwrap();
    let head = format!(
        "CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\nproxy-authorization: {}\r\n",
        turn.auth_header()
    );
    let request = [head.as_bytes(), extra, b"\r\n"].concat();
    s.write_all(&request).await.unwrap();
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "the proxy closed before answering");
        got.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&got);
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The card's evidence entry about `host`.
fn entry<'a>(card: &'a Value, host: &str) -> &'a Value {
    card["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["host"] == host)
        .unwrap_or_else(|| panic!("no evidence about {host}: {card}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_shows_the_command_the_sandbox_reported_and_only_from_the_sandbox() {
    let Some((o, g)) = capture_bench("curl", &[CAPTURED, PROXIED, MARKED]).await else {
        return;
    };
    let port = o.port();
    let api = g.api();
    let turn = api.turn("u-command", "c1", &[]).await;
    let proxy_url = g.proxy_url(&turn);

    // A client that reads no proxy settings: captured, refused inside its stream.
    let url = format!("http://{CAPTURED}:{port}/data.csv");
    let argv = [
        "curl".to_owned(),
        "--noproxy".to_owned(),
        "*".to_owned(),
        "-sS".to_owned(),
        "--max-time".to_owned(),
        "20".to_owned(),
        url.clone(),
    ];
    let got = sandbox(&proxy_url, &[], &argv).await;
    assert!(
        out(&got).starts_with(&format!("egressgate refused {CAPTURED}:{port}\n")),
        "{}",
        explain(&got)
    );

    // A client that asked for the proxy: its `CONNECT` is unmarked, its claim never read.
    let forged = b"Egress-Command: curl forged\r\n";
    let status = connect_with(&g, &turn, &format!("{PROXIED}:{port}"), forged).await;
    assert_eq!(status, 403);

    // Marked, from outside the sandbox: over-long and not ASCII, cut and cleaned.
    let mut odd = b"Egress-Capture: 1\r\nEgress-Command: python3 caf\xc3\xa9 ".to_vec();
    odd.extend_from_slice(&[b'a'; 300]);
    odd.extend_from_slice(b"\r\n");
    let status = connect_with(&g, &turn, &format!("{MARKED}:{port}"), &odd).await;
    assert_eq!(status, 200, "a marked refusal is shown inside the stream");
    assert_eq!(o.connection_count(), 0, "a refused host was dialled");

    let urls = [
        url.clone(),
        format!("https://{PROXIED}:{port}/"),
        format!("https://{MARKED}:{port}/"),
    ];
    let r = approval_request(&api, &turn, json!({"reason": "fetch data", "urls": urls})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let card = r.json()["card"].clone();

    let captured = entry(&card, CAPTURED);
    let command = captured["command"].as_str().unwrap_or_default();
    assert!(
        command.starts_with("curl --noproxy * -sS"),
        "{captured}: the sandbox's command"
    );
    assert!(command.len() <= 200, "{command}");
    assert!(
        entry(&card, PROXIED).get("command").is_none(),
        "an unmarked CONNECT's claim is not read: {card}"
    );
    let cleaned = format!("python3 caf?? {}", "a".repeat(200 - "python3 caf?? ".len()));
    assert_eq!(entry(&card, MARKED)["command"], cleaned.as_str(), "{card}");
}
