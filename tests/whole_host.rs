//! Path-style multi-tenant hosts (one host, many tenants told apart by path:
//! `storage.googleapis.com`, `raw.githubusercontent.com`, ...) are no whole-host grants: an
//! administrator's site, a launch-time site and a host the approval tool is asked for all
//! answer `422 INVALID_INPUT` saying why and what to do, unless the administrator opted the
//! host in (`--allow-whole-host`). Per-tenant names below them stay grants.
//! On both stores (`EGRESSGATE_TEST_POSTGRES_URL` runs the gate on PostgreSQL).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::*;

/// `(status, error code, message)` of an answer.
fn outcome(r: &Resp) -> (u16, String, String) {
    let e = &r.json()["error"];
    let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
    (r.status, text("code"), text("message"))
}

/// Asserts a `422 INVALID_INPUT` that names `host`, says why and says what to do.
fn refused_whole_host(what: &str, r: &Resp, host: &str) {
    let (status, code, message) = outcome(r);
    assert_eq!(
        (status, code.as_str()),
        (422, "INVALID_INPUT"),
        "{what}: {}",
        r.text()
    );
    for part in [host, "many tenants", "allow-whole-host", "path prefix"] {
        assert!(
            message.contains(part),
            "{what}: {part:?} missing in {message}"
        );
    }
}

async fn add_site(api: &Api, pattern: &str) -> Resp {
    api.post("/v1/admin/sites", ADMIN, json!({"pattern": pattern}))
        .await
}

async fn open_turn(api: &Api, sites: &[&str]) -> Resp {
    let body = json!({"user_id": "alice", "chat_id": "c1", "can_ask_human": true, "sites": sites});
    api.post("/v1/turns", RUNTIME, body).await
}

async fn tool(api: &Api, turn: &Turn, url: &str) -> Resp {
    let body = json!({"reason": "the analysis needs the data file", "urls": [url]});
    approval_request(api, turn, body).await
}

#[tokio::test]
async fn path_multi_tenant_hosts_are_refused_as_whole_host_grants() {
    let g = gate().start();
    let api = g.api();
    for (pattern, named) in [
        ("storage.googleapis.com", "storage.googleapis.com"),
        ("raw.githubusercontent.com", "raw.githubusercontent.com"),
        ("Codeload.GitHub.com.", "codeload.github.com"),
        ("f000.backblazeb2.com", "f000.backblazeb2.com"),
        // A wildcard over a listed host is the same grant by another spelling.
        ("*.jsdelivr.net", "cdn.jsdelivr.net"),
        ("*.backblazeb2.com", "backblazeb2.com"),
    ] {
        refused_whole_host(
            &format!("admin {pattern}"),
            &add_site(&api, pattern).await,
            named,
        );
        refused_whole_host(
            &format!("launch {pattern}"),
            &open_turn(&api, &[pattern]).await,
            named,
        );
    }
    let sites = api
        .call("GET", "/v1/admin/sites", Some(ADMIN), None, None)
        .await;
    assert!(!sites.text().contains("googleapis"), "{}", sites.text());

    // The approval tool: naming such a host is a 422 that says why and what to do.
    let turn = api.turn("alice", "c1", &[]).await;
    let r = tool(
        &api,
        &turn,
        "https://storage.googleapis.com/some-bucket/data.csv",
    )
    .await;
    refused_whole_host("tool", &r, "storage.googleapis.com");
    assert!(
        outcome(&r)
            .2
            .starts_with("urls[0] (storage.googleapis.com)"),
        "{}",
        r.text()
    );

    // Per-tenant names below or beside them stay grants.
    for pattern in ["my-bucket.storage.googleapis.com", "api.github.com"] {
        let r = add_site(&api, pattern).await;
        assert_eq!(r.status, 201, "{pattern}: {}", r.text());
    }
    let r = tool(&api, &turn, "https://files.example.com/data.csv").await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn an_opted_in_host_is_a_whole_host_grant_again() {
    let opted_in = ["--allow-whole-host", "raw.githubusercontent.com"];
    let (_g, api, turn) = gate_and_turn(&opted_in, "alice", "c2").await;
    let r = tool(
        &api,
        &turn,
        "https://raw.githubusercontent.com/o/r/main/data.csv",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["outcome"], "ask", "{}", r.text());
    let r = add_site(&api, "raw.githubusercontent.com").await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = open_turn(&api, &["raw.githubusercontent.com"]).await;
    assert_eq!(r.status, 201, "{}", r.text());
    // Only the host opted in.
    let r = add_site(&api, "gist.githubusercontent.com").await;
    refused_whole_host("not opted in", &r, "gist.githubusercontent.com");
}
