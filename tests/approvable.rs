//! `X-Egress-Approvable` agrees with the approval tool: a host refused as `not_approved` that
//! no person can approve as a whole (a public suffix such as `github.io`, a path-style
//! multi-tenant host such as `storage.googleapis.com` the administrator did not opt in) is
//! answered `false` with a sentence saying why, the refusal record says `approvable: false`,
//! and the tool answers `NOT_APPROVABLE` naming it instead of `ask`. An opted-in host is
//! approvable everywhere. On both stores (`EGRESSGATE_TEST_POSTGRES_URL`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::*;

/// The proxy's `X-Egress-Approvable` for `host`, and the refusal body.
async fn refused(g: &Gate, turn: &Turn, host: &str) -> (String, String) {
    let r = proxy_get(g.proxy(), turn, &format!("http://{host}/data.csv")).await;
    assert_eq!(r.status, 403, "{host}: {}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"), "{host}");
    let approvable = r
        .header("x-egress-approvable")
        .unwrap_or_default()
        .to_owned();
    (approvable, r.text())
}

/// The record's `approvable` per host.
async fn record(api: &Api, turn: &Turn) -> Vec<(String, bool)> {
    let path = format!("/v1/turns/{}/refusals", turn.id);
    let r = api.call("GET", &path, Some(RUNTIME), None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut out: Vec<(String, bool)> = r.json()["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["host"].as_str().unwrap().to_owned(),
                x["approvable"].as_bool().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn tool(api: &Api, turn: &Turn) -> Resp {
    let body = json!({"reason": "the analysis needs the data file"});
    approval_request(api, turn, body).await
}

#[tokio::test]
async fn hosts_nobody_can_approve_are_not_approvable_anywhere() {
    let (g, api, turn) = gate_and_turn(&[], "alice", "c1").await;
    for host in ["github.io", "storage.googleapis.com"] {
        let (approvable, body) = refused(&g, &turn, host).await;
        assert_eq!(approvable, "false", "{host}: {body}");
        assert!(body.contains("approvable: false"), "{body}");
        assert!(
            body.contains(&format!("nobody can approve {host} as a whole")),
            "{body}"
        );
        assert!(body.contains("No approval can allow this"), "{body}");
    }
    assert_eq!(
        record(&api, &turn).await,
        [
            ("github.io".to_owned(), false),
            ("storage.googleapis.com".to_owned(), false)
        ]
    );
    // The tool has nothing it could put on a card: it names them instead of asking.
    let r = tool(&api, &turn).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["outcome"].as_str(), v["code"].as_str()),
        (Some("denied"), Some("NOT_APPROVABLE")),
        "{v}"
    );
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("github.io") && message.contains("storage.googleapis.com"),
        "{message}"
    );

    // An ordinary host beside them is approvable, and only it goes on the card.
    let (approvable, body) = refused(&g, &turn, "files.example.com").await;
    assert_eq!(approvable, "true", "{body}");
    let r = tool(&api, &turn).await;
    assert_eq!(r.json()["outcome"], "ask", "{}", r.text());
    let sites = r.json()["card"]["sites"].to_string();
    assert!(
        sites.contains("files.example.com") && !sites.contains("github.io"),
        "{sites}"
    );
}

#[tokio::test]
async fn an_opted_in_host_is_approvable_everywhere() {
    let opted_in = ["--allow-whole-host", "storage.googleapis.com"];
    let (g, api, turn) = gate_and_turn(&opted_in, "alice", "c1").await;
    let (approvable, body) = refused(&g, &turn, "storage.googleapis.com").await;
    assert_eq!(approvable, "true", "{body}");
    assert_eq!(
        record(&api, &turn).await,
        [("storage.googleapis.com".to_owned(), true)]
    );
    let r = tool(&api, &turn).await;
    assert_eq!(r.json()["outcome"], "ask", "{}", r.text());
}
