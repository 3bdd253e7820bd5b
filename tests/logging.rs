//! Logs for log shippers: with `--log-format json` every line on stderr is one JSON object,
//! and the proxy's canonical decision line carries its fields as JSON keys, never a secret.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::Value;
use support::decisions::*;
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
    let e = serve_failure(&["--log-format", "xml"], &dir.path().join("data"));
    assert!(
        e.contains("--log-format \"xml\": expected text or json"),
        "{e}"
    );
    assert!(!dir.path().join("data").exists(), "nothing was written");
}

const OTHER: &str = "other.example.com";

const SLOW: &str = "slow.example.com";

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
    let wrong = t1.forged("not-the-secret");
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
