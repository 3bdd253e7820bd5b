//! `/mcp` on the control listener: behind the runtime token like the REST API, the turn named
//! by `X-Egressgate-Turn` (never by a tool argument), and rmcp's Host check configured for
//! the listener and the public URL (other hosts are refused, against DNS rebinding).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

async fn post_mcp(api: Api, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut req = "POST /mcp HTTP/1.1\r\nconnection: close\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n".to_owned();
    if !headers.iter().any(|(k, _)| *k == "host") {
        req.push_str(&format!("host: {}\r\n", api.addr));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    let mut s = TcpStream::connect(api.addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

#[tokio::test]
async fn mcp_needs_the_runtime_token_and_a_turn() {
    let (_g, api, turn) = gate_and_turn(&[], "alice", "c1").await;
    let bearer_rt = format!("Bearer {RUNTIME}");
    let bearer_admin = format!("Bearer {ADMIN}");

    let r = post_mcp(api, &[("x-egressgate-turn", &turn.id)], INIT).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "UNAUTHORIZED");

    let r = post_mcp(
        api,
        &[
            ("authorization", &bearer_admin),
            ("x-egressgate-turn", &turn.id),
        ],
        INIT,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "FORBIDDEN");

    for bad in [None, Some("not a turn id"), Some("")] {
        let mut h = vec![("authorization", bearer_rt.as_str())];
        if let Some(b) = bad {
            h.push(("x-egressgate-turn", b));
        }
        let r = post_mcp(api, &h, INIT).await;
        assert_eq!(r.status, 400, "{bad:?}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "MISSING_TURN");
    }

    let ok = [
        ("authorization", bearer_rt.as_str()),
        ("x-egressgate-turn", turn.id.as_str()),
    ];
    let r = post_mcp(api, &ok, INIT).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("egressgate"), "{}", r.text());
}

#[tokio::test]
async fn mcp_refuses_foreign_hosts_and_accepts_the_public_one() {
    let public = ["--control-public-url", "https://gate.example.com"];
    let (_g, api, turn) = gate_and_turn(&public, "alice", "c1").await;
    let bearer = format!("Bearer {RUNTIME}");
    let base = [
        ("authorization", bearer.as_str()),
        ("x-egressgate-turn", turn.id.as_str()),
    ];
    for (host, accepted) in [
        ("evil.example.com", false),
        ("gate.example.com", true),
        ("localhost", true),
    ] {
        let mut h = base.to_vec();
        h.push(("host", host));
        let r = post_mcp(api, &h, INIT).await;
        assert_eq!(
            r.status == 200,
            accepted,
            "{host}: {} {}",
            r.status,
            r.text()
        );
    }
}

/// `egressgate mcp` refuses to start without the runtime token or with a malformed turn,
/// in one line on stderr, and writes nothing but JSON-RPC to stdout.
#[tokio::test]
async fn stdio_server_start_errors_and_a_clean_stdout() {
    let bin = env!("CARGO_BIN_EXE_egressgate");
    let run = |env_token: Option<&str>, turn: &str, stdin: &str| {
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["mcp", "--control-url", "http://127.0.0.1:9", "--turn", turn])
            .env_remove("EGRESSGATE_RUNTIME_TOKEN")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(t) = env_token {
            cmd.env("EGRESSGATE_RUNTIME_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(None, "t_AAAAAAAAAAAAAAAAAAAAAA", "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("EGRESSGATE_RUNTIME_TOKEN"));
    assert!(out.stdout.is_empty());
    let out = run(Some(RUNTIME), "not-a-turn", "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--turn"));
    assert!(out.stdout.is_empty());
    // A real exchange: every stdout line is a JSON-RPC message (logs go to stderr).
    let init = format!(
        "{INIT}\n{}\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    ) + r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#
        + "\n";
    let turn = gate().start().api().turn("alice", "c1", &[]).await;
    let out = run(Some(RUNTIME), &turn.id, &init);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.len() >= 2,
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON-RPC: {l}"));
        assert_eq!(v["jsonrpc"], "2.0", "{l}");
    }
    assert!(stdout.contains("request_egress_approval"), "{stdout}");
}
