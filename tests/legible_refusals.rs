//! Refusals every client can read, through the proxy on the real binary: the HTTP/1.1 reason
//! phrase names the next step (curl, pip, npm and Java show it or the status); a `CONNECT`
//! marked as a captured connection's gets its refusal inside the stream (plain HTTP, or inside
//! TLS under a leaf for the refused name, normalised), is never dialled and gains nothing; a
//! request inside that refusal is bounded in size and time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::inspect::{client_trusting, handshake};
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const ASK: &str = "Forbidden by egressgate: not approved, ask with request_egress_approval";
const IP: &str = "Forbidden by egressgate: IP address, cannot be approved";
const OTHER: &str = "other.example.net";

/// Runs `cmd` on a blocking thread (the gate keeps serving); its output.
async fn run(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null());
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Reads until the peer closes (bounded); what arrived, and whether it ended by a reset.
async fn until_closed<S: tokio::io::AsyncRead + Unpin>(s: &mut S, secs: u64) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(secs), s.read_to_end(&mut got)).await;
    let reset = matches!(read, Ok(Err(_)));
    assert!(read.is_ok(), "still open after {secs}s: {got:?}");
    (got, reset)
}

#[tokio::test]
async fn curl_shows_the_reason_phrase_of_forwarded_tunnelled_and_connect_refusals() {
    let (g, o) = reachable(&[FILES, OTHER]).await;
    let turn = g.turn("u", "c").await;
    let proxy = g.proxy_url(&turn);
    let curl = |url: String| {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-v", "--max-time", "20", "-w", "code=%{http_code}\n"])
            .args(["--proxy", &proxy, &url]);
        cmd
    };
    // Plain HTTP, forwarded: the status line names the next step, the rest is as before.
    let got = run(curl(o.url(FILES, "/data.csv"))).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&got.stdout),
        String::from_utf8_lossy(&got.stderr),
    );
    assert!(
        stderr.contains(&format!("< HTTP/1.1 403 {ASK}\r\n")),
        "{}",
        explain(&got)
    );
    assert!(
        stdout.contains("egressgate refused files.example.com") && stdout.ends_with("code=403\n"),
        "{}",
        explain(&got)
    );
    assert!(
        stderr.contains("< x-egress-refused: not_approved"),
        "{stderr}"
    );
    // An IP literal: a phrase that says no approval helps.
    let got = run(curl(format!("http://127.0.0.1:{}/", o.port()))).await;
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(
        stderr.contains(&format!("< HTTP/1.1 403 {IP}\r\n")),
        "{}",
        explain(&got)
    );
    // CONNECT: curl's failure carries the status and -v the whole line.
    let got = run(curl(format!("https://{}/", o.at(FILES)))).await;
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert_eq!(got.status.code(), Some(56), "{}", explain(&got));
    assert!(
        stderr.contains(&format!("< HTTP/1.1 403 {ASK}\r\n")),
        "{}",
        explain(&got)
    );
    assert!(
        stderr.contains("CONNECT tunnel failed, response 403"),
        "{stderr}"
    );
    // Inside an allowed plain-HTTP tunnel, a request for another host: the relay's own answer.
    g.api().admin_site(FILES).await;
    let (r, mut s) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(r.status, 200);
    let req = format!("GET / HTTP/1.1\r\nHost: {OTHER}:{}\r\n\r\n", o.port());
    s.write_all(req.as_bytes()).await.unwrap();
    let (got, _) = until_closed(&mut s, 10).await;
    let text = String::from_utf8_lossy(&got);
    let phrase = "Forbidden by egressgate: Host header differs from target, cannot be approved";
    assert!(
        text.starts_with(&format!("HTTP/1.1 403 {phrase}\r\n")),
        "{text}"
    );
    assert!(text.contains("x-egress-refused: host_mismatch"), "{text}");
    assert_eq!(
        o.connection_count(),
        0,
        "a refused request reached the origin"
    );
}

#[tokio::test]
async fn pip_prints_the_tunnel_failure_with_the_next_step() {
    let (g, o) = reachable(&[FILES]).await;
    let turn = g.turn("u", "c").await;
    let index = format!("https://{}/simple/", o.at(FILES));
    let mut cmd = Command::new("pip");
    // One retry: pip reports each failed try as a warning (with the proxy's status line) and
    // only the last one at `-v`.
    cmd.args(["download", "--no-deps", "--no-cache-dir", "--retries", "1"])
        .args(["--disable-pip-version-check", "--timeout", "20"])
        .args(["--proxy", &g.proxy_url(&turn), "--index-url", &index])
        .args(["-d", "/nonexistent-never-written", "sampleproject"])
        .env("PIP_CONFIG_FILE", "/dev/null")
        .env_remove("PIP_FIND_LINKS");
    let got = run(cmd).await;
    let text = explain(&got);
    assert_ne!(got.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("Tunnel connection failed: 403 {ASK}")),
        "{text}"
    );
    assert_eq!(o.connection_count(), 0);
}

#[tokio::test]
async fn npm_view_prints_the_next_step() {
    let (g, o) = reachable(&[FILES]).await;
    let turn = g.turn("u", "c").await;
    let cache = tempfile::tempdir().unwrap();
    let registry = format!("https://{}/", o.at(FILES));
    let proxy = g.proxy_url(&turn);
    let mut cmd = Command::new("npm");
    cmd.args(["view", "left-pad", "version", "--registry", &registry])
        .args(["--proxy", &proxy, "--https-proxy", &proxy])
        .args(["--fetch-retries", "0", "--cache"])
        .arg(cache.path())
        .env("npm_config_userconfig", "/dev/null")
        .env("npm_config_update_notifier", "false");
    let got = run(cmd).await;
    let text = explain(&got);
    assert_ne!(got.status.code(), Some(0), "{text}");
    assert!(text.contains(&format!("403 {ASK}")), "{text}");
    assert_eq!(o.connection_count(), 0);
}

/// `CONNECT authority` marked as a captured connection's, with the turn's credential.
async fn marked_connect(g: &Gate, turn: &Turn, authority: &str) -> (Resp, TcpStream) {
    let head = connect_head(turn, authority).replace("\r\n\r\n", "\r\negress-capture: 1\r\n\r\n");
    let mut s = TcpStream::connect(g.proxy()).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let r = read_head(&mut s).await.unwrap();
    (r, s)
}

/// Sends a request for `host` inside a refused marked tunnel and asserts the answer is the
/// `not_approved` refusal, then the close; its text.
async fn refusal_inside<S>(s: &mut S, host: &str) -> String
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let req = format!("GET /data.csv HTTP/1.1\r\nHost: {host}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let (got, _) = until_closed(s, 10).await;
    let text = String::from_utf8_lossy(&got).into_owned();
    let status_line = format!("HTTP/1.1 403 {ASK}\r\n");
    assert!(text.starts_with(&status_line), "{host}: {text}");
    assert!(
        text.contains("x-egress-refused: not_approved\r\n"),
        "{host}: {text}"
    );
    text
}

/// The gate's deployment CA, as the sandbox's bundle carries it.
async fn deployment_ca(g: &Gate) -> String {
    let r = g.api().open_get("/v1/ca.pem").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

/// A loopback origin and a gate that reaches it under [`FILES`] and [`OTHER`] (listed), with
/// short waits for the refusal inside the stream; the CA it mints under.
async fn marked_bench() -> (Gate, Origin, String) {
    let o = origin().await;
    let g = gate()
        .reach_as(&o, &[FILES, OTHER])
        .args(&[
            "--client-hello-timeout",
            "2s",
            "--header-read-timeout",
            "2s",
        ])
        .sites(&[OTHER])
        .ready()
        .await;
    let ca = deployment_ca(&g).await;
    (g, o, ca)
}

#[tokio::test]
async fn a_marked_connect_gets_its_refusal_inside_the_stream_never_dialled_and_gains_nothing() {
    let (g, o, _) = marked_bench().await;
    let turn = g.turn("u", "c").await;
    // Refused: `200` naming the refusal, then the `403` to the request inside.
    let (r, mut s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
    assert_eq!(r.header("x-egress-approvable"), Some("true"));
    // Recorded before the `200`: on the record at once.
    let rec = g.api().refusals(&turn).await;
    assert_eq!(rec["refusals"][0]["host"], FILES, "{rec}");
    assert_eq!(rec["refusals"][0]["reason"], "not_approved", "{rec}");
    let text = refusal_inside(&mut s, &o.at(FILES)).await;
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(
        text.contains("egressgate refused files.example.com") && text.contains("approval tool"),
        "{text}"
    );
    // The request inside names another host, even an allowed one: still only the refusal.
    let (_, mut s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    let req = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", o.at(OTHER));
    s.write_all(req.as_bytes()).await.unwrap();
    let (got, _) = until_closed(&mut s, 10).await;
    assert!(
        got.starts_with(b"HTTP/1.1 403 "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // Silence, and an opaque protocol: closed without a byte.
    let (_, mut s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    assert_eq!(until_closed(&mut s, 10).await.0, b"");
    let (_, mut s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n").await.unwrap();
    assert_eq!(until_closed(&mut s, 10).await.0, b"");
    assert_eq!(o.connection_count(), 0, "a refused connection was dialled");
    // Allowed: the mark changes nothing.
    let (r, mut s) = marked_connect(&g, &turn, &o.at(OTHER)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-egress-refused"), None);
    let req = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", o.at(OTHER));
    s.write_all(req.as_bytes()).await.unwrap();
    let r = read_response(&mut s).await.unwrap();
    assert_eq!(r.text(), "origin says hi");
    // A limit or a bad credential is still the `CONNECT` answer (the capture resets).
    let forged = turn.forged("not-the-secret");
    let (r, _) = marked_connect(&g, &forged, &o.at(FILES)).await;
    assert_eq!(r.status, 407);
}

#[tokio::test]
async fn a_marked_tls_connect_is_refused_inside_tls_under_a_leaf_for_the_normalised_name() {
    let (g, o, ca) = marked_bench().await;
    let turn = g.turn("u", "c").await;
    let client = client_trusting(&ca, &[b"h2", b"http/1.1"]);
    for sni in [FILES, "FILES.Example.COM", "files.example.com."] {
        let (r, s) = marked_connect(&g, &turn, &o.at(FILES)).await;
        assert_eq!(r.status, 200);
        // The client checks the leaf against the name it asked for.
        let mut tls = handshake(s, client.clone(), sni).await.unwrap();
        assert_eq!(
            tls.get_ref().1.alpn_protocol(),
            Some(&b"http/1.1"[..]),
            "{sni}"
        );
        let leaf = &support::ca::presented(&tls)[0];
        support::ca::webpki_verify(&ca, leaf, FILES).unwrap();
        refusal_inside(&mut tls, sni).await;
    }
    // Another name in the SNI, or an address: no leaf, the stream just closes.
    for (authority, sni) in [
        (o.at(FILES), OTHER.to_owned()),
        (format!("127.0.0.1:{}", o.port()), "127.0.0.1".to_owned()),
    ] {
        let (r, s) = marked_connect(&g, &turn, &authority).await;
        assert_eq!(r.status, 200, "{authority}");
        assert!(
            handshake(s, client.clone(), &sni).await.is_err(),
            "{authority} {sni}"
        );
    }
    assert_eq!(o.connection_count(), 0, "a refused connection was dialled");
}

/// Sends an oversized request head `big`: the stream closes with a `431` at most, never the
/// refusal's text.
async fn assert_cut_at_the_head_bound<S>(s: &mut S, big: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let _ = s.write_all(big.as_bytes()).await;
    let (got, _) = until_closed(s, 10).await;
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431 "),
        "{text}"
    );
}

#[tokio::test]
async fn an_oversized_or_slow_request_inside_the_refusal_is_cut_at_the_bound() {
    let (g, o, ca) = marked_bench().await;
    let turn = g.turn("u", "c").await;
    let client = client_trusting(&ca, &[b"http/1.1"]);
    // A head past `max-header-bytes` (64 KiB): `431` at most, never the refusal's text.
    let (_, s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    let mut tls = handshake(s, client.clone(), FILES).await.unwrap();
    let big = format!(
        "GET / HTTP/1.1\r\nHost: {FILES}\r\nx-fill: {}\r\n",
        "a".repeat(128 * 1024)
    );
    assert_cut_at_the_head_bound(&mut tls, &big).await;
    // A head that never ends: closed once `header-read-timeout` (2 s) has passed.
    let (_, s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    let mut tls = handshake(s, client, FILES).await.unwrap();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: files")
        .await
        .unwrap();
    let begun = std::time::Instant::now();
    let (got, _) = until_closed(&mut tls, 10).await;
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains(" 403 "), "{text}");
    assert!(
        begun.elapsed() < Duration::from_secs(8),
        "{:?}",
        begun.elapsed()
    );
    // A plain request head that is too large is cut the same way.
    let (_, mut s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    assert_cut_at_the_head_bound(&mut s, &big).await;
    assert_eq!(o.connection_count(), 0);
}

#[tokio::test]
async fn without_a_deployment_ca_a_marked_tls_connect_is_closed_and_plain_http_still_answered() {
    // Only a proxy on PostgreSQL without the CA's seal key has no CA to mint under.
    if std::env::var("EGRESSGATE_TEST_POSTGRES_URL").is_err() {
        return eprintln!("skipped: runs on PostgreSQL only (EGRESSGATE_TEST_POSTGRES_URL)");
    }
    let o = origin().await;
    let g = gate()
        .reach_as(&o, &[FILES])
        .env("EGRESSGATE_CA_SEAL_KEY", "")
        .start();
    let turn = g.turn("u", "c").await;
    let (r, s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    assert_eq!(r.status, 200);
    let client = client_trusting(&pki(&[FILES]).ca_pem(), &[b"http/1.1"]);
    assert!(handshake(s, client, FILES).await.is_err());
    let (_, mut s) = marked_connect(&g, &turn, &o.at(FILES)).await;
    let req = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", o.at(FILES));
    s.write_all(req.as_bytes()).await.unwrap();
    let (got, _) = until_closed(&mut s, 10).await;
    assert!(got.starts_with(format!("HTTP/1.1 403 {ASK}").as_bytes()));
    assert_eq!(o.connection_count(), 0);
}
