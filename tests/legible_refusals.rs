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

fn both(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The proxy URL of `turn` on `g`.
fn proxy_url(g: &Gate, turn: &Turn) -> String {
    format!("http://{}@{}", turn.credential, g.proxy())
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
    let proxy = proxy_url(&g, &turn);
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
        both(&got)
    );
    assert!(
        stdout.contains("egressgate refused files.example.com") && stdout.ends_with("code=403\n"),
        "{}",
        both(&got)
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
        both(&got)
    );
    // CONNECT: curl's failure carries the status and -v the whole line.
    let got = run(curl(format!("https://{}/", o.at(FILES)))).await;
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert_eq!(got.status.code(), Some(56), "{}", both(&got));
    assert!(
        stderr.contains(&format!("< HTTP/1.1 403 {ASK}\r\n")),
        "{}",
        both(&got)
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
        .args(["--proxy", &proxy_url(&g, &turn), "--index-url", &index])
        .args(["-d", "/nonexistent-never-written", "sampleproject"])
        .env("PIP_CONFIG_FILE", "/dev/null")
        .env_remove("PIP_FIND_LINKS");
    let got = run(cmd).await;
    let text = both(&got);
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
    let proxy = proxy_url(&g, &turn);
    let mut cmd = Command::new("npm");
    cmd.args(["view", "left-pad", "version", "--registry", &registry])
        .args(["--proxy", &proxy, "--https-proxy", &proxy])
        .args(["--fetch-retries", "0", "--cache"])
        .arg(cache.path())
        .env("npm_config_userconfig", "/dev/null")
        .env("npm_config_update_notifier", "false");
    let got = run(cmd).await;
    let text = both(&got);
    assert_ne!(got.status.code(), Some(0), "{text}");
    assert!(text.contains(&format!("403 {ASK}")), "{text}");
    assert_eq!(o.connection_count(), 0);
}
