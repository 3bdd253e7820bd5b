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
    let api = g.api();
    let turn = api.turn("alice", "c-json", &[]).await;
    let r = proxy_get(g.proxy(), &turn, "http://files.example.com/data.csv").await;
    assert_eq!(r.status, 403);
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
