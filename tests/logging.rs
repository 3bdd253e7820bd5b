//! Logs for log shippers: with `--log-format json` every line on stderr is one JSON object,
//! and the proxy's canonical decision line carries its fields as JSON keys, never a secret.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

#[tokio::test]
async fn json_log_lines_carry_the_decision_fields() {
    let g = gate()
        .resolve("files.example.com", "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .start();
    let turn = g.turn("alice", "c-json").await;
    let r = g.get(&turn, "http://files.example.com/data.csv").await;
    assert_eq!(r.status, 403);
    // The line is written as the refusal is answered; stderr is read on another thread.
    let found = g
        .log_line(&["proxy decision", "\"decision\":\"refuse\""])
        .await;
    assert!(found.is_some(), "no decision line");
    let lines = g.log.lock().unwrap().clone();
    assert!(!lines.is_empty());
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{line}"
        );
        let secret = turn.credential.split_once(":").map_or("", |(_, s)| s);
        assert!(!line.contains(secret), "the turn secret was logged: {line}");
    }
    let decision = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["message"] == "proxy decision" && v["decision"] == "refuse")
        .unwrap_or_else(|| panic!("no decision line: {lines:?}"));
    assert_eq!(decision["reason"], "not_approved");
    assert_eq!(decision["turn_id"], turn.id.as_str());
    assert_eq!(decision["chat_id"], "c-json");
    assert_eq!(decision["host"], "files.example.com");
    assert_eq!(decision["port"], 80);
}

#[test]
fn an_unknown_log_format_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(["serve", "--log-format", "xml", "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--log-format \"xml\": expected text or json"),
        "{e}"
    );
    assert!(!dir.path().join("data").exists(), "nothing was written");
}

// ---------------------------------------------------------------------------------------------
// The canonical decision line: one per request and per tunnel, for every status.
// ---------------------------------------------------------------------------------------------

use std::time::Duration;

use serde_json::Value;

const FILES: &str = "files.example.com";
const OTHER: &str = "other.example.com";
const SLOW: &str = "slow.example.com";

/// The `proxy decision` lines logged so far, as JSON.
fn decisions(g: &Gate) -> Vec<Value> {
    g.log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "proxy decision")
        .collect()
}

/// Waits (bounded) for a decision line matching `pred`; allowed lines are written when the
/// response or tunnel ends, just after the client saw it.
async fn line(g: &Gate, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = decisions(g).into_iter().find(|v| pred(v)) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no decision line for {what}: {:#?}",
            decisions(g)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn common(v: &Value, turn: &Turn, chat: &str, host: &str, port: u16) {
    assert_eq!(v["turn_id"], turn.id.as_str(), "{v}");
    assert_eq!(v["chat_id"], chat, "{v}");
    assert_eq!(v["host"], host, "{v}");
    assert_eq!(v["port"], port, "{v}");
    assert!(v["duration_ms"].is_u64(), "{v}");
    assert_eq!(v["level"], "INFO", "{v}");
}

#[tokio::test]
async fn every_status_gets_one_decision_line_with_its_fields() {
    let o = origin().await;
    let port = o.port();
    let closed = free_port();
    // A DNS server that never answers (UDP and TCP), for the 504.
    // A free UDP port is not always free for TCP (another test may hold it): try again.
    let (dns, _dns_tcp) = (0..100)
        .find_map(|_| {
            let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let port = udp.local_addr().unwrap().port();
            let tcp = std::net::TcpListener::bind(("127.0.0.1", port)).ok()?;
            Some((udp, tcp))
        })
        .expect("a port free for both UDP and TCP");
    let dns_port = dns.local_addr().unwrap().port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve(OTHER, "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &format!("{port},{closed}")])
        .args(&["--dns-server", &format!("127.0.0.1:{dns_port}")])
        .args(&["--connect-timeout", "1s", "--max-connections-per-turn", "1"])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    api.admin_site(SLOW).await;

    // 200, forwarded, through the admin list: the address dialled and the bytes.
    let t1 = g.turn("alice", "c1").await;
    let r = g.get(&t1, &format!("http://{FILES}:{port}/a")).await;
    assert_eq!(r.status, 200);
    let v = line(&g, "200 forward", |v| {
        v["status"] == 200 && v["kind"] == "forward" && v["turn_id"] == t1.id.as_str()
    })
    .await;
    common(&v, &t1, "c1", FILES, port);
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["grant"], "admin");
    assert_eq!(v["addr"], format!("127.0.0.1:{port}"));
    assert_eq!(v["bytes_down"], 14, "the body's bytes: {v}");
    assert_eq!(v["bytes_up"], 0, "{v}");
    assert_eq!(v["shadow"], false);
    assert!(
        v.get("reason").is_none() && v.get("card_id").is_none(),
        "{v}"
    );

    // 403, then 200 through a person's approval: the line names the card.
    let url = format!("http://{OTHER}:{port}/data.csv");
    assert_eq!(g.get(&t1, &url).await.status, 403);
    let v = line(&g, "403", |v| v["status"] == 403 && v["host"] == OTHER).await;
    common(&v, &t1, "c1", OTHER, port);
    assert_eq!(v["decision"], "refuse");
    assert_eq!(v["reason"], "not_approved");
    assert!(v.get("grant").is_none(), "{v}");
    let (id, secret) = ask(&api, &t1, &[&url]).await;
    approve_card(&api, &id, &secret).await;
    assert_eq!(g.get(&t1, &url).await.status, 200);
    let v = line(&g, "200 approval", |v| {
        v["status"] == 200 && v["host"] == OTHER
    })
    .await;
    assert_eq!(v["grant"], "approval");
    assert_eq!(v["card_id"], id.as_str());

    // 200, a tunnel through a launch-time site: one line when it ends, bytes both ways.
    let t2 = api.turn("bob", "c2", &[FILES]).await;
    let authority = format!("{FILES}:{port}");
    let (r, mut tunnel) = connect(g.proxy(), &t2, &authority).await;
    assert_eq!(r.status, 200);
    assert_eq!(get_over(&mut tunnel, &authority).await.unwrap().status, 200);
    // 429 while it is open (one connection per turn).
    let (r, _) = connect(g.proxy(), &t2, &authority).await;
    assert_eq!(r.status, 429);
    let v = line(&g, "429", |v| v["status"] == 429).await;
    common(&v, &t2, "c2", FILES, port);
    assert_eq!(v["decision"], "refuse");
    assert_eq!(v["reason"], "limit_exceeded");
    drop(tunnel);
    let v = line(&g, "tunnel end", |v| {
        v["kind"] == "connect" && v["decision"] == "allow" && v["turn_id"] == t2.id.as_str()
    })
    .await;
    common(&v, &t2, "c2", FILES, port);
    assert_eq!(v["status"], 200);
    assert_eq!(v["grant"], "launch");
    assert!(v["bytes_up"].as_u64().unwrap() > 0, "{v}");
    assert!(v["bytes_down"].as_u64().unwrap() >= 14, "{v}");
    assert!(v["end"].is_string(), "{v}");
    // Plain HTTP inside the tunnel is served request by request: each has its own line with
    // the address dialled.
    let v = line(&g, "request in the tunnel", |v| {
        v["kind"] == "tunnel_http" && v["turn_id"] == t2.id.as_str()
    })
    .await;
    common(&v, &t2, "c2", FILES, port);
    assert_eq!(v["status"], 200);
    assert_eq!(v["grant"], "launch");
    assert_eq!(v["addr"], format!("127.0.0.1:{port}"));
    assert_eq!(v["bytes_down"], 14);

    // 407: a wrong credential (the secret never appears).
    let wrong = Turn {
        id: t1.id.clone(),
        credential: format!("{}:not-the-secret", t1.id),
    };
    let r = g.get(&wrong, &format!("http://{FILES}:{port}/")).await;
    assert_eq!(r.status, 407);
    let v = line(&g, "407", |v| v["status"] == 407).await;
    assert_eq!(v["decision"], "fail");
    assert_eq!(v["reason"], "credentials_wrong");
    assert_eq!(v["host"], FILES);

    // 502: an allowed host whose port has no listener.
    let r = g.get(&t1, &format!("http://{FILES}:{closed}/")).await;
    assert_eq!(r.status, 502, "{}", r.text());
    let v = line(&g, "502", |v| v["status"] == 502).await;
    common(&v, &t1, "c1", FILES, closed);
    assert_eq!(v["decision"], "fail");
    assert_eq!(v["reason"], "connect");
    assert_eq!(v["grant"], "admin");

    // 504: an allowed host whose DNS never answers.
    let r = g.get(&t1, &format!("http://{SLOW}:{port}/")).await;
    assert_eq!(r.status, 504, "{}", r.text());
    let v = line(&g, "504", |v| v["status"] == 504).await;
    common(&v, &t1, "c1", SLOW, port);
    assert_eq!(v["reason"], "timeout");

    let secret = t1.credential.split_once(':').map_or("", |(_, s)| s);
    assert!(
        g.log.lock().unwrap().iter().all(|l| !l.contains(secret)),
        "a turn secret was logged"
    );
}

#[tokio::test]
async fn a_refusal_that_cannot_be_recorded_logs_its_503() {
    let pg = support::pg::PgCluster::start();
    let g = gate()
        .database(&pg.url())
        .resolve(FILES, "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .args(&["--db-statement-timeout", "1s"])
        .start();
    let turn = g.turn("u", "c").await;
    pg.down();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = g.get(&turn, &format!("http://{FILES}/")).await;
        if r.status == 503 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never 503: {}",
            r.status
        );
    }
    let v = line(&g, "503", |v| v["status"] == 503).await;
    assert!(v["decision"] == "refuse" || v["decision"] == "fail", "{v}");
    assert_eq!(v["host"], FILES);
}

async fn sampled_gate(sampling: &str) -> (Gate, Origin, Turn) {
    let o = origin().await;
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve(OTHER, "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &o.port().to_string()])
        .args(&["--log-allowed", sampling])
        .start();
    let api = g.api();
    let turn = api.turn("alice", "c1", &[FILES]).await;
    (g, o, turn)
}

fn count(g: &Gate, decision: &str) -> usize {
    decisions(g)
        .iter()
        .filter(|v| v["decision"] == decision)
        .count()
}

#[tokio::test]
async fn allowed_lines_are_sampled_and_refusals_never() {
    let (g, o, turn) = sampled_gate("none").await;
    let port = o.port();
    for i in 0..5 {
        let r = g.get(&turn, &format!("http://{FILES}:{port}/{i}")).await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(o.requests().len(), 5);
    let r = g.get(&turn, &format!("http://{OTHER}:{port}/")).await;
    assert_eq!(r.status, 403);
    line(&g, "the refusal", |v| v["decision"] == "refuse").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(&g, "allow"), 0, "none: {:#?}", decisions(&g));

    let (g, o, turn) = sampled_gate("1/3").await;
    let port = o.port();
    for i in 0..6 {
        let r = g.get(&turn, &format!("http://{FILES}:{port}/{i}")).await;
        assert_eq!(r.status, 200);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while count(&g, "allow") < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:#?}",
            decisions(&g)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Refusals are never sampled: three different hosts, three lines.
    for h in ["a", "b", "c"] {
        let url = format!("http://{h}.{OTHER}:{port}/");
        assert_eq!(g.get(&turn, &url).await.status, 403);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        count(&g, "allow"),
        2,
        "one in three of six: {:#?}",
        decisions(&g)
    );
    assert_eq!(count(&g, "refuse"), 3);
}

#[tokio::test]
async fn repeated_identical_refusals_are_limited_with_a_suppressed_count() {
    let (g, o, turn) = sampled_gate("all").await;
    let port = o.port();
    let url = format!("http://{OTHER}:{port}/retry");
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert_eq!(g.get(&turn, &url).await.status, 403);
    }
    let storm = started.elapsed();
    // A different host is not held back by the storm.
    let url2 = format!("http://x.{OTHER}:{port}/");
    assert_eq!(g.get(&turn, &url2).await.status, 403);
    line(&g, "another host", |v| v["host"] == format!("x.{OTHER}")).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let lines: Vec<Value> = decisions(&g)
            .into_iter()
            .filter(|v| v["host"] == OTHER && v["reason"] == "not_approved")
            .collect();
        let reported: u64 = lines
            .iter()
            .map(|v| 1 + v["suppressed"].as_u64().unwrap_or(0))
            .sum();
        if reported == 21 {
            // At most one line per second of storm, plus the one after it.
            let most = usize::try_from(storm.as_secs()).unwrap() + 2;
            assert!(lines.len() <= most, "{} lines: {lines:#?}", lines.len());
            assert!(
                lines.last().unwrap()["suppressed"].as_u64().unwrap_or(0) > 0,
                "the next line says how many were held back: {lines:#?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "reported {reported} of 21: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The record itself still counts every one.
    let rec = g.api().refusals(&turn).await;
    let row = rec["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["host"] == OTHER)
        .unwrap()
        .clone();
    assert_eq!(row["count"], 21);
}

#[test]
fn a_bad_log_allowed_value_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["some", "1/0", "2/3"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"))
            .args(["serve", "--log-allowed", bad, "--data-dir"])
            .arg(dir.path().join("data"))
            .env_remove("EGRESSGATE_LOG_ALLOWED")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("--log-allowed") && e.contains(bad), "{e}");
    }
    assert!(!dir.path().join("data").exists(), "nothing was written");
}
