//! What the logs tell an operator, checked on the real binary: a tunnel's line says what its
//! client got (a `200` then a cut when its origin cannot be reached, not a `502` nobody saw),
//! a tunnel still open when the drain time runs out has its line with `end: shutdown`, every
//! control-API request leaves one access line without a secret, and with `--log-format json`
//! the first start's generated tokens never reach the (JSON-only) log stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const HOST: &str = "files.example.com";

/// A JSON-logging gate allowed to reach `HOST` on loopback at `port`.
fn json_gate(port: u16, extra: &[&str]) -> Gate {
    gate()
        .resolve(HOST, "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &port.to_string()])
        .args(extra)
        .start()
}

/// The JSON objects logged so far (every line must be one).
fn lines(log: &std::sync::Mutex<Vec<String>>) -> Vec<Value> {
    log.lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Waits (bounded) for a logged object that `pick` accepts.
async fn logged(g: &Gate, pick: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        if let Some(v) = lines(&g.log).into_iter().find(&pick) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no such line in {:?}", g.log.lock().unwrap());
}

fn tunnel_line(v: &Value) -> bool {
    v["message"] == "proxy decision" && v["kind"] == "connect"
}

/// TLS or opaque bytes to an origin that cannot be reached: the client already holds its
/// `200` (a tunnel is dialled only once its first bytes are judged) and is cut; the line
/// says `200`, the failure, and how the tunnel ended, and the cut is counted.
#[tokio::test]
async fn a_tunnel_cut_because_its_origin_is_down_is_logged_as_what_the_client_got() {
    let port = free_port(); // nothing listens here
    let g = json_gate(port, &[]);
    let api = g.api();
    api.admin_site(HOST).await;
    let turn = api.turn("alice", "c-cut", &[]).await;
    let (head, mut t) = connect(g.proxy(), &turn, &format!("{HOST}:{port}")).await;
    assert_eq!(head.status, 200, "{}", head.text());
    // Binary bytes (a NUL among the first four): relayed opaque, so the origin is dialled.
    t.write_all(b"\x00\x01\x02\x03binary").await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), t.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the tunnel is cut: {read:?} {rest:?}"
    );
    let line = logged(&g, |v| tunnel_line(v) && v["decision"] == "fail").await;
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["reason"], "connect", "{line}");
    assert_eq!(line["end"], "upstream_failed", "{line}");
    assert_eq!(line["turn_id"], turn.id.as_str(), "{line}");
    let metrics = api.get("/metrics", ADMIN).await.text();
    assert!(
        metrics.contains("egressgate_proxy_tunnel_upstream_failures_total 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("egressgate_proxy_failures_total{status=\"502\"}"),
        "no 502 was answered: {metrics}"
    );
}

/// A plain request in a tunnel whose origin is down is answered `502` inside the tunnel, and
/// its line says `502`.
#[tokio::test]
async fn a_plain_request_in_a_tunnel_to_a_down_origin_is_answered_and_logged_502() {
    let port = free_port();
    let g = json_gate(port, &[]);
    let api = g.api();
    api.admin_site(HOST).await;
    let turn = api.turn("alice", "c-502", &[]).await;
    let (head, mut t) = connect(g.proxy(), &turn, &format!("{HOST}:{port}")).await;
    assert_eq!(head.status, 200);
    t.write_all(format!("GET /x HTTP/1.1\r\nhost: {HOST}:{port}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let r = read_response(&mut t).await.unwrap();
    assert_eq!(r.status, 502, "{}", r.text());
    let line = logged(&g, |v| {
        v["message"] == "proxy decision" && v["decision"] == "fail" && v["reason"] == "connect"
    })
    .await;
    assert_eq!(line["status"], 502, "{line}");
}

/// A tunnel still open when the drain time runs out is closed by the proxy, and its line is
/// written before the process exits, with `end: shutdown`: one that carried a request, and
/// one whose client never spoke (the proxy dialled its origin and waited for either side).
#[tokio::test]
async fn a_tunnel_closed_at_shutdown_has_its_line() {
    drained_tunnel_line(true).await;
}

#[tokio::test]
async fn a_silent_tunnel_closed_at_shutdown_has_its_line() {
    drained_tunnel_line(false).await;
}

async fn drained_tunnel_line(speaks: bool) {
    let o = origin().await;
    let port = o.addr.port();
    let g = json_gate(port, &["--drain-timeout", "1s"]);
    let api = g.api();
    api.admin_site(HOST).await;
    let turn = api.turn("alice", "c-drain", &[]).await;
    let (head, mut t) = connect(g.proxy(), &turn, &format!("{HOST}:{port}")).await;
    assert_eq!(head.status, 200);
    if speaks {
        let get = format!("GET /one HTTP/1.1\r\nhost: {HOST}:{port}\r\n\r\n");
        t.write_all(get.as_bytes()).await.unwrap();
        assert_eq!(read_response(&mut t).await.unwrap().status, 200);
    } else {
        let mut waited = 0;
        while o.connection_count() == 0 {
            assert!(
                waited < 100,
                "the proxy never dialled the silent tunnel's origin"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += 1;
        }
    }
    let log = g.log.clone();
    let status = tokio::task::spawn_blocking(move || g.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    // The process has exited: its stderr is read to the end on another thread.
    let mut found = None;
    for _ in 0..100 {
        found = lines(&log).into_iter().find(tunnel_line);
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let line = found.unwrap_or_else(|| panic!("no tunnel line: {:?}", log.lock().unwrap()));
    assert_eq!(line["end"], "shutdown", "{line}");
    assert_eq!(line["status"], 200, "{line}");
    if speaks {
        assert!(line["bytes_down"].as_u64().unwrap() > 0, "{line}");
    }
}

/// One access line per API request: route template, status, error code, duration and whose
/// request it was; never the bearer token, nor the raw path.
#[tokio::test]
async fn every_api_request_leaves_one_access_line_without_a_secret() {
    let g = json_gate(80, &[]);
    let api = g.api();
    let turn = api.turn("alice", "c-access", &[]).await;
    let r = api
        .get(&format!("/v1/turns/{}/refusals", turn.id), RUNTIME)
        .await;
    assert_eq!(r.status, 200);
    let unknown = api.get("/v1/turns/t_nosuchturn/refusals", RUNTIME).await;
    assert_eq!(unknown.status, 404);
    let refusals = logged(&g, |v| {
        v["message"] == "api request" && v["turn_id"] == turn.id.as_str()
    })
    .await;
    assert_eq!(refusals["route"], "/v1/turns/{turn_id}/refusals");
    assert_eq!(refusals["method"], "GET");
    assert_eq!(refusals["status"], 200);
    assert_eq!(
        refusals["user_id"],
        Value::Null,
        "no user named on this call"
    );
    assert!(refusals["duration_ms"].is_u64(), "{refusals}");
    let opened = logged(&g, |v| {
        v["message"] == "api request" && v["route"] == "/v1/turns"
    })
    .await;
    assert_eq!(opened["status"], 201, "{opened}");
    let missing = logged(&g, |v| v["message"] == "api request" && v["status"] == 404).await;
    assert_eq!(missing["code"], "TURN_NOT_FOUND", "{missing}");
    for l in g.log.lock().unwrap().iter() {
        assert!(!l.contains(RUNTIME), "a token was logged: {l}");
        assert!(!l.contains(ADMIN), "a token was logged: {l}");
        assert!(
            !l.contains("t_nosuchturn"),
            "a raw path or malformed id was logged: {l}"
        );
    }
}

/// First start with no token in the environment and JSON logs: stderr holds JSON lines only,
/// one of them names the tokens file, and neither generated token is in any of them.
#[tokio::test]
async fn generated_tokens_stay_out_of_a_json_log() {
    let g = gate()
        .env("EGRESSGATE_ADMIN_TOKEN", "")
        .env("EGRESSGATE_RUNTIME_TOKEN", "")
        .args(&["--log-format", "json"])
        .start();
    let file = g.data_dir.path().join("data").join("tokens");
    let saved = std::fs::read_to_string(&file).unwrap();
    let secrets: Vec<&str> = saved
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(_, s)| s)
        .collect();
    assert_eq!(secrets.len(), 2, "{saved}");
    let note = logged(&g, |v| v["tokens_file"].is_string()).await;
    assert_eq!(note["level"], "WARN", "{note}");
    assert_eq!(note["tokens_file"], file.display().to_string(), "{note}");
    for l in g.log.lock().unwrap().iter() {
        for s in &secrets {
            assert!(!l.contains(s), "a generated token reached the log: {l}");
        }
    }
    lines(&g.log); // every line is one JSON object
}
