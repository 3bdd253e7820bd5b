//! The whole loop with the real binary: refused download → approval tool → interrupt →
//! resume → the same turn's next download. Also: decline and malformed decisions stay
//! refused, the allow cache never hides a fresh approval, and a revocation reaches the proxy
//! within one cache-epoch poll.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

/// A gate that may reach the origin as [`FILES`], with nothing listed.
async fn setup() -> (Gate, Origin) {
    let o = origin().await;
    (gate().reach_as(&o, &[FILES]).ready().await, o)
}

/// [`setup`], and a turn of (user, `c1`) whose first download was refused: (gate, its API,
/// the turn, the download's URL).
async fn refused_at_first(user: &str) -> (Gate, Api, Turn, String) {
    let (g, o) = setup().await;
    let url = o.url(FILES, "/data.csv");
    let turn = refused_turn(&g, user, "c1", &url).await;
    let api = g.api();
    (g, api, turn, url)
}

/// A turn of (user, chat) whose request for `url` was just refused as `not_approved`.
async fn refused_turn(g: &Gate, user: &str, chat: &str, url: &str) -> Turn {
    let turn = g.turn(user, chat).await;
    assert_refused(&g.get(&turn, url).await, "not_approved");
    turn
}

#[tokio::test]
async fn approve_then_the_same_turn_downloads() {
    let (g, api, turn, url) = refused_at_first("alice").await;
    // Nothing named: the refused host is merged from the turn's record.
    let (id, secret) = ask(&api, &turn, &[]).await;
    let outcome = api.outcome(&id).await;
    assert_eq!(outcome["state"], "pending");
    assert_eq!(outcome["card"]["sites"], json!([FILES]));
    let r = answer_card(&api, &id, &secret, json!({"approved": true})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"]["outcome"], "approved");
    // The very next request of the same turn passes: no cache hides a fresh approval.
    let got = g.get(&turn, &url).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let approvals = api.chat_approvals("alice", "c1").await;
    assert_eq!(approvals["approvals"][0]["value"], FILES);
    assert_eq!(approvals["approvals"][0]["card_id"], id.as_str());
    // Another chat of the same user does not see it.
    refused_turn(&g, "alice", "c2", &url).await;
}

#[tokio::test]
async fn decline_and_malformed_decisions_stay_refused() {
    let (g, o) = setup().await;
    let api = g.api();
    let url = o.url(FILES, "/data.csv");
    for (chat, status, payload) in [
        ("declined", "resolved", json!({"approved": false})),
        ("string-true", "resolved", json!({"approved": "true"})),
        ("cancelled", "cancelled", json!({"approved": true})),
        ("missing", "resolved", json!({})),
    ] {
        let turn = refused_turn(&g, "bob", chat, &url).await;
        let (id, secret) = ask(&api, &turn, &[&url]).await;
        let r = resume(&api, &id, &secret, status, payload).await;
        assert_eq!(r.status, 200, "{chat}: {}", r.text());
        let v = r.json();
        assert_ne!(v["decision"]["outcome"], "approved", "{chat}");
        // Finish the resumed run, which frees the user's resume slot.
        let done = complete(&api, &id, &v["claim"]).await;
        assert_eq!(done.status, 200, "{}", done.text());
        assert_eq!(
            g.get(&turn, &url).await.status,
            403,
            "{chat} must stay refused"
        );
    }
    assert!(o.requests().is_empty());
}

#[tokio::test]
async fn cached_allow_never_outlives_a_revocation_or_its_turn() {
    let (g, api, turn, url) = refused_at_first("carol").await;
    approved(&api, &turn, &[]).await;
    assert_eq!(g.get(&turn, &url).await.status, 200); // now cached for the turn
    let r = api.revoke("carol", "c1", "site", FILES).await;
    assert!(r.status == 200 || r.status == 204, "{}", r.text());
    let revoked_at = Instant::now();
    let refused = eventually(Duration::from_secs(5), async || {
        g.status_or_cut(&turn, &url).await == Some(403)
    })
    .await;
    let delay = revoked_at.elapsed();
    eprintln!("revocation reached the proxy's cache after {delay:?}");
    assert!(
        refused,
        "a revocation must stop the cached allow well before the next turn; log: {:#?}",
        g.log_lines("")
    );
    // A new turn of the chat is refused at once.
    refused_turn(&g, "carol", "c1", &url).await;
}

/// A resume sent from `source`, a loopback address of the test's choosing, so two callers
/// can be told apart by address.
async fn resume_from(api: &Api, source: &str, id: &str, secret: &str) -> Resp {
    use tokio::io::AsyncWriteExt as _;
    let body = json!({"secret": secret, "resume": [
        {"interruptId": id, "status": "resolved", "payload": {"approved": true}}]})
    .to_string();
    let req = format!(
        "POST /v1/interrupts/{id}/resume HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        api.addr,
        body.len()
    );
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(api.addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

#[tokio::test]
async fn a_guessing_address_is_429_while_the_holder_elsewhere_answers() {
    let g = gate()
        .args(&[
            "--resume-failures-per-client",
            "3",
            "--resume-failure-window",
            "1h",
        ])
        .start();
    let api = g.api();
    let turn = g.turn("alice", "c1").await;
    let (id, secret) = ask(&api, &turn, &["https://files.example.com/data.csv"]).await;
    for i in 0..3 {
        let r = resume_from(&api, "127.0.0.1", &id, &format!("guess-{i}")).await;
        assert_eq!(r.status, 404, "{}", r.text());
    }
    let r = resume_from(&api, "127.0.0.1", &id, &secret).await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "TOO_MANY_ATTEMPTS");
    assert!(
        r.header("retry-after")
            .is_some_and(|s| s.parse::<u64>().is_ok_and(|n| n >= 1))
    );
    // The limit is the guessing address's, not the card's holder's.
    let r = resume_from(&api, "127.0.0.2", &id, &secret).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"]["outcome"], "approved");
}
