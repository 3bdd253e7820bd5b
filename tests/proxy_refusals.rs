//! End-to-end refusals on the real binary: an unapproved host is refused with a clear 403,
//! recorded once against the turn before the answer and counted; refusals are kept per turn;
//! wildcards match subdomains only on normalised hosts; malformed proxy requests are 400 and
//! never recorded; the API refuses missing, unknown and wrong-role tokens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

/// How many rows the turn's refusal record has.
async fn refusal_rows(api: &Api, turn: &Turn) -> usize {
    api.refusals(turn).await["refusals"]
        .as_array()
        .unwrap()
        .len()
}

async fn setup() -> (Gate, Origin) {
    reachable(&[
        FILES,
        "a.wild.example.org",
        "wild.example.org",
        "badexample.com",
        "example.com",
        "other.example.net",
    ])
    .await
}

#[tokio::test]
async fn unapproved_host_is_refused_clearly_recorded_once_and_counted() {
    let (g, o) = setup().await;
    let api = g.api();
    let turn = g.turn("u1", "c1").await;
    let url = o.url(FILES, "/secret.csv?token=abc#frag");
    let r = g.get(&turn, &url).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
    assert_eq!(r.header("x-egress-approvable"), Some("true"));
    let body = r.text();
    assert!(
        body.contains(FILES) && body.contains("not_approved"),
        "{body}"
    );
    assert!(
        body.contains("approval tool") && body.contains("do not try to get around the proxy"),
        "{body}"
    );
    // Recorded before the 403 was written: visible immediately.
    let rec = api.refusals(&turn).await;
    let rows = rec["refusals"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["host"], FILES);
    assert_eq!(rows[0]["reason"], "not_approved");
    assert_eq!(rows[0]["approvable"], true);
    assert_eq!(rows[0]["count"], 1);
    assert_eq!(
        rows[0]["url"],
        o.url(FILES, "/secret.csv"),
        "query and fragment stripped"
    );
    let (head, _s) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(head.status, 403);
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let rec = api.refusals(&turn).await;
    assert_eq!(
        rec["refusals"].as_array().unwrap().len(),
        1,
        "one row per (host, port, reason)"
    );
    assert_eq!(rec["refusals"][0]["count"], 3);
    assert_eq!(rec["overflow"], 0);
    assert!(
        o.requests().is_empty() && o.connection_count() == 0,
        "the origin must never be touched"
    );
    let line = g
        .log_line(&["decision=\"refuse\"", &turn.id, "reason=\"not_approved\""])
        .await;
    assert!(
        line.is_some(),
        "canonical decision log line: {:?}",
        g.log_lines("decision=\"refuse\"")
    );
}

#[tokio::test]
async fn refusals_are_kept_per_turn_and_launch_sites_only_for_their_turn() {
    let (g, o) = setup().await;
    let api = g.api();
    let with_launch = api.turn("u1", "c1", &[FILES]).await;
    let plain = g.turn("u1", "c1").await;
    let url = o.url(FILES, "/");
    assert_eq!(g.get(&with_launch, &url).await.status, 200);
    assert_eq!(g.get(&plain, &url).await.status, 403);
    assert_eq!(refusal_rows(&api, &with_launch).await, 0);
    assert_eq!(refusal_rows(&api, &plain).await, 1);
}

#[tokio::test]
async fn wildcards_match_subdomains_only_and_hosts_are_normalised() {
    let (g, o) = setup().await;
    let api = g.api();
    api.admin_site("*.wild.example.org").await;
    api.admin_site("EXAMPLE.com.").await;
    let turn = g.turn("u1", "c1").await;
    let p = o.port();
    for (host, status) in [
        ("a.wild.example.org", 200),
        ("A.WILD.Example.ORG.", 200),
        ("wild.example.org", 403),
        ("example.com", 200),
        ("Example.COM.", 200),
        ("badexample.com", 403),
    ] {
        let r = g.get(&turn, &format!("http://{host}:{p}/")).await;
        assert_eq!(r.status, status, "{host}: {}", r.text());
    }
    let rows = api.refusals(&turn).await;
    let hosts: Vec<_> = rows["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        hosts.contains(&"wild.example.org".to_owned())
            && hosts.contains(&"badexample.com".to_owned()),
        "{hosts:?}"
    );
}

#[tokio::test]
async fn malformed_proxy_requests_are_400_and_not_recorded() {
    let (g, _o) = setup().await;
    let api = g.api();
    let turn = g.turn("u1", "c1").await;
    let auth = turn.auth_header();
    for raw in [
        format!(
            "GET /not/a/proxy/request HTTP/1.1\r\nhost: x\r\nproxy-authorization: {auth}\r\n\r\n"
        ),
        format!("CONNECT nohostport HTTP/1.1\r\nproxy-authorization: {auth}\r\n\r\n"),
        format!("CONNECT files.example.com:99999 HTTP/1.1\r\nproxy-authorization: {auth}\r\n\r\n"),
        format!("GET https://files.example.com/ HTTP/1.1\r\nproxy-authorization: {auth}\r\n\r\n"),
        format!("GET http://exa%zzmple.com/ HTTP/1.1\r\nproxy-authorization: {auth}\r\n\r\n"),
        "NONSENSE\r\n\r\n".to_owned(),
    ] {
        let r = proxy_raw(g.proxy(), &raw).await;
        assert_eq!(r.status, 400, "{raw:?} → {} {}", r.status, r.text());
    }
    assert_eq!(refusal_rows(&api, &turn).await, 0);
}

#[tokio::test]
async fn api_refuses_missing_unknown_and_wrong_role_tokens() {
    let (g, _o) = setup().await;
    let api = g.api();
    let body =
        serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true}).to_string();
    assert_eq!(
        api.call("POST", "/v1/turns", None, None, Some(&body))
            .await
            .status,
        401
    );
    assert_eq!(
        api.call(
            "POST",
            "/v1/turns",
            Some("nope-nope-nope-nope"),
            None,
            Some(&body)
        )
        .await
        .status,
        401
    );
    let wrong_role = api
        .call("POST", "/v1/turns", Some(ADMIN), None, Some(&body))
        .await;
    assert_eq!(wrong_role.status, 403);
    assert_eq!(wrong_role.json()["error"]["code"], "FORBIDDEN");
    assert_eq!(api.get("/v1/admin/sites", RUNTIME).await.status, 403);
    assert_eq!(api.get("/v1/admin/sites", ADMIN).await.status, 200);
}
