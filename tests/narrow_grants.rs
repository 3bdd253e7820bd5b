//! Narrow grants end to end on the real binary (SQLite, and PostgreSQL when the suite is given
//! one): a counted grant admits exactly its uses (a forwarded request or a tunnel each) and
//! is then a `not_approved` refusal again; a `turn` grant does not reach the chat's next
//! turn; a `user` grant reaches the user's other chats, no other user's, and only where the
//! administrator allows it; a `paths` grant admits its prefix and no spelling that escapes
//! it; each kind of row is revoked (refused from the proxy's next read of the cache epoch);
//! every bad payload is a `422` with nothing written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::*;

/// A plain origin and a gate that reaches it as [`FILES`], inspecting it (so `paths` and
/// `read` can be kept), with `extra` flags.
async fn bench(extra: &[&str]) -> (Gate, Origin) {
    reachable_with(&[FILES], &[&["--inspect", FILES], extra].concat()).await
}

/// Refuses the turn once, asks, and answers the card with `payload`: the resume's answer.
async fn decide(g: &Gate, o: &Origin, turn: &Turn, payload: Value) -> (Resp, String) {
    let url = o.url(FILES, "/org/data.csv");
    assert_refused(&g.get(turn, &url).await, "not_approved");
    let (r, id, _) = ask_and_answer(&g.api(), turn, &[], payload).await;
    (r, id)
}

/// [`decide`] with a decision the gate takes: the resume answers `200`.
async fn granted(g: &Gate, o: &Origin, turn: &Turn, payload: Value) {
    let (r, _) = decide(g, o, turn, payload).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Asserts a refused, approvable answer for `reason`.
fn assert_refused(r: &Resp, reason: &str) {
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some(reason), "{}", r.text());
    assert_eq!(r.header("x-egress-approvable"), Some("true"));
}

/// Asserts that `url` is refused `not_approved` for `turn` within a second of a revocation:
/// every proxy drops what it remembered at its next read of the cache epoch (see
/// docs/approval-flow.md), so the first request after that is refused. Until then a request
/// may still be admitted, or admitted and then cut with its connection when the proxy closes
/// the revoked grant's connections (closed before any answer): both are the window, not a
/// refusal, so the loop goes on.
async fn refused_after_revocation(g: &Gate, turn: &Turn, url: &str) {
    let since = std::time::Instant::now();
    loop {
        let seen = match try_proxy_get(g.proxy(), turn, url).await {
            Ok(r) if r.status == 403 => return assert_refused(&r, "not_approved"),
            Ok(r) => r.text(),
            Err(e) if is_cut(&e) => format!("cut before an answer: {e}"),
            Err(e) => panic!("GET {url} through the proxy: {e}"),
        };
        assert!(
            since.elapsed() < std::time::Duration::from_secs(1),
            "still admitted a second after the revocation: {seen}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_counted_grant_admits_exactly_its_uses_then_is_not_approved_again() {
    let (g, o) = bench(&[]).await;
    let turn = g.turn("u", "c").await;
    granted(&g, &o, &turn, json!({"approved": true, "max_uses": 2})).await;
    let rows = g.api().chat_approvals("u", "c").await;
    let row = &rows["approvals"][0];
    assert_eq!(
        (
            &row["scope"],
            &row["uses_left"],
            &row["paths"],
            &row["access"]
        ),
        (&json!("chat"), &json!(2), &Value::Null, &json!("full")),
        "{rows}"
    );
    let before = o.requests().len();
    // One forwarded request and one tunnel: two connections, two uses.
    assert_eq!(g.get(&turn, &o.url(FILES, "/org/a")).await.status, 200);
    let authority = format!("{FILES}:{}", o.port());
    let (c, _tunnel) = connect(g.proxy(), &turn, &authority).await;
    assert_eq!(c.status, 200, "{}", c.text());
    let rows = g.api().chat_approvals("u", "c").await;
    assert_eq!(rows["approvals"][0]["uses_left"], 0, "spent: {rows}");
    // Spent: the next request and the next tunnel are `not_approved` again, approvable.
    assert_refused(&g.get(&turn, &o.url(FILES, "/org/b")).await, "not_approved");
    let (c, _) = connect(g.proxy(), &turn, &authority).await;
    assert_refused(&c, "not_approved");
    assert_eq!(
        o.requests().len(),
        before + 1,
        "only the one request arrived"
    );
    let row = assert_recorded(&g.api(), &turn, "not_approved").await;
    assert_eq!(row["approvable"], true, "{row}");
    // A spent row is still listed until it expires, and revoking it works like any other.
    let path = format!("/v1/chats/c/approvals/site/{FILES}");
    assert_eq!(g.api().as_user("DELETE", &path, "u").await.status, 200);
    assert_eq!(
        g.api().chat_approvals("u", "c").await["approvals"],
        json!([])
    );
}

#[tokio::test]
async fn a_turn_grant_does_not_admit_the_same_chats_next_turn_and_is_revocable() {
    let (g, o) = bench(&[]).await;
    let turn = g.turn("u", "c").await;
    granted(&g, &o, &turn, json!({"approved": true, "scope": "turn"})).await;
    let url = o.url(FILES, "/org/a");
    // The card's turn, which the resumed run keeps using, is admitted.
    assert_eq!(g.get(&turn, &url).await.status, 200);
    let rows = g.api().chat_approvals("u", "c").await;
    assert_eq!(rows["approvals"][0]["scope"], "turn", "{rows}");
    assert_eq!(rows["approvals"][0]["turn_id"], json!(turn.id), "{rows}");
    // The chat's next turn is not.
    let next = g.turn("u", "c").await;
    assert_refused(&g.get(&next, &url).await, "not_approved");
    assert_eq!(g.get(&turn, &url).await.status, 200, "still the old turn's");
    // Revoked through the chat's listing: the old turn is refused on its very next request.
    let path = format!("/v1/chats/c/approvals/site/{FILES}");
    assert_eq!(g.api().as_user("DELETE", &path, "u").await.status, 200);
    refused_after_revocation(&g, &turn, &url).await;
}

#[tokio::test]
async fn a_user_grant_is_refused_unless_the_administrator_allows_it() {
    let (g, o) = bench(&[]).await;
    let turn = g.turn("u", "c").await;
    let (r, id) = decide(&g, &o, &turn, json!({"approved": true, "scope": "user"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INVALID_DECISION");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("--allow-user-scope"), "{msg}");
    assert_eq!(g.api().outcome(&id).await["state"], "pending");
    assert_eq!(
        g.api().chat_approvals("u", "c").await["approvals"],
        json!([])
    );
    let listed = g.api().as_user("GET", "/v1/users/u/approvals", "u").await;
    assert_eq!(listed.json()["approvals"], json!([]), "{}", listed.text());
}

#[tokio::test]
async fn a_user_grant_reaches_the_users_other_chats_and_no_other_user() {
    let (g, o) = bench(&["--allow-user-scope", "--user-grant-ttl", "2h"]).await;
    let turn = g.turn("u", "c").await;
    granted(&g, &o, &turn, json!({"approved": true, "scope": "user"})).await;
    let url = o.url(FILES, "/org/a");
    let other_chat = g.turn("u", "c2").await;
    assert_eq!(g.get(&other_chat, &url).await.status, 200);
    let other_user = g.turn("v", "c").await;
    assert_refused(&g.get(&other_user, &url).await, "not_approved");
    // Listed for the user, not under the chat; another user's list is empty.
    let listed = g
        .api()
        .as_user("GET", "/v1/users/u/approvals", "u")
        .await
        .json();
    let row = &listed["approvals"][0];
    assert_eq!(
        (&row["scope"], &row["value"]),
        (&json!("user"), &json!(FILES))
    );
    let expires = row["expires_at"].as_str().unwrap();
    let expires = egressgate_store::Timestamp::parse_rfc3339(expires).unwrap();
    let left = expires.millis() - now_millis();
    assert!(left <= 2 * 3600 * 1000, "capped by --user-grant-ttl: {row}");
    assert_eq!(
        g.api().chat_approvals("u", "c").await["approvals"],
        json!([])
    );
    let theirs = g.api().as_user("GET", "/v1/users/u/approvals", "v").await;
    assert_eq!(theirs.json()["approvals"], json!([]));
    let path = format!("/v1/users/u/approvals/site/{FILES}");
    assert_eq!(g.api().as_user("DELETE", &path, "v").await.status, 404);
    // Revoked: every chat of the user is refused on its very next request.
    assert_eq!(g.api().as_user("DELETE", &path, "u").await.status, 200);
    refused_after_revocation(&g, &other_chat, &url).await;
    refused_after_revocation(&g, &turn, &url).await;
}

#[tokio::test]
async fn a_paths_grant_admits_its_prefix_and_refuses_every_escape() {
    let (g, o) = bench(&[]).await;
    let turn = g.turn("u", "c").await;
    let payload = json!({"approved": true, "paths": ["/org/"], "access": "read"});
    granted(&g, &o, &turn, payload).await;
    let rows = g.api().chat_approvals("u", "c").await;
    assert_eq!(rows["approvals"][0]["paths"], json!(["/org/"]), "{rows}");
    assert_eq!(rows["approvals"][0]["access"], "read", "{rows}");
    for inside in [
        "/org/",
        "/org/a.csv",
        "/org//a",
        "/org/./a",
        "/%6frg/a",
        "/org/x/../a",
    ] {
        let r = g.get(&turn, &o.url(FILES, inside)).await;
        assert_eq!(r.status, 200, "{inside}: {}", r.text());
    }
    let reached = o.requests().len();
    for escape in [
        "/other/",
        "/org",
        "/organisation/x",
        "/ORG/a",
        "/org/../other/",
        "/org/%2e%2e/other/",
        "/org/%2E%2E/other/",
        "/org/.%2E/other/",
        "/org%2F..%2Fother/",
        "/org/..%2fother/",
        "/org/%252e%252e/other/",
        "/org/..;/other/",
        "/org;x/../other/",
        "/org/%5C../other/",
        "/org/%3B/../../other/",
        "/org/x/../../other/",
        "//org/../other/",
    ] {
        let r = g.get(&turn, &o.url(FILES, escape)).await;
        assert_refused(&r, "path_not_allowed");
    }
    assert_eq!(o.requests().len(), reached, "no escape reached the origin");
    let row = assert_recorded(&g.api(), &turn, "path_not_allowed").await;
    assert_eq!(row["approvable"], true, "{row}");
    // `read` still holds under the prefix.
    let raw = format!(
        "POST {} HTTP/1.1\r\nhost: {FILES}:{}\r\nproxy-authorization: {}\r\ncontent-length: 1\r\nconnection: close\r\n\r\nx",
        o.url(FILES, "/org/up"),
        o.port(),
        turn.auth_header()
    );
    assert_refused(&proxy_raw(g.proxy(), &raw).await, "method_not_allowed");
    // Revoked: the prefix is refused on the very next request.
    let path = format!("/v1/chats/c/approvals/site/{FILES}");
    assert_eq!(g.api().as_user("DELETE", &path, "u").await.status, 200);
    refused_after_revocation(&g, &turn, &o.url(FILES, "/org/a")).await;
}

#[tokio::test]
async fn every_bad_payload_is_a_422_and_nothing_is_written() {
    // Not inspected here, and user scope not allowed.
    let (g, o) = reachable(&[FILES]).await;
    let turn = g.turn("u", "c").await;
    assert_refused(&g.get(&turn, &o.url(FILES, "/org/a")).await, "not_approved");
    let (id, secret) = ask(&g.api(), &turn, &[]).await;
    for bad in [
        json!({"approved": true, "note": "x"}),
        json!({"approved": true, "scope": "forever"}),
        json!({"approved": true, "scope": "user"}),
        json!({"approved": true, "scope": ["chat"]}),
        json!({"approved": true, "max_uses": 0}),
        json!({"approved": true, "max_uses": 1.5}),
        json!({"approved": true, "max_uses": "2"}),
        json!({"approved": true, "max_uses": 10_000_000_000_i64}),
        json!({"approved": true, "paths": []}),
        json!({"approved": true, "paths": ["org/"]}),
        json!({"approved": true, "paths": ["/org/../x/"]}),
        json!({"approved": true, "paths": ["/org%2F"]}),
        json!({"approved": true, "paths": ["/org//"]}),
        // Well formed, but the proxy does not inspect the host: it could not keep them.
        json!({"approved": true, "paths": ["/org/"]}),
        json!({"approved": true, "access": "read"}),
    ] {
        let r = answer_card(&g.api(), &id, &secret, bad.clone()).await;
        assert_eq!(r.status, 422, "{bad}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "INVALID_DECISION", "{bad}");
    }
    assert_eq!(g.api().outcome(&id).await["state"], "pending");
    assert_eq!(
        g.api().chat_approvals("u", "c").await["approvals"],
        json!([])
    );
    assert_refused(&g.get(&turn, &o.url(FILES, "/org/a")).await, "not_approved");
    // The card still answers a good decision.
    let r = answer_card(
        &g.api(),
        &id,
        &secret,
        json!({"approved": true, "scope": "turn"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

fn now_millis() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(d.as_millis()).unwrap()
}
