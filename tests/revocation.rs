//! Revocation closes what is open: an open tunnel and a keep-alive forwarded connection that
//! relied on a grant are closed within one second of each kind of revocation (an approval
//! revoked, an admin site removed, a chat hidden, a user losing `can_approve`), the next
//! request is refused as usual, and another chat's connections to the same host stay open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::held::{FILES, Held};
use support::*;

async fn setup() -> (Gate, Origin, u16) {
    let o = origin().await;
    let port = o.addr.port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &port.to_string()])
        .start();
    (g, o, port)
}

fn url(port: u16) -> String {
    format!("http://{FILES}:{port}/data.csv")
}

#[tokio::test]
async fn revoking_an_approval_closes_that_chats_connections_only() {
    let (g, _o, port) = setup().await;
    let api = g.api();
    let c1 = api.turn("alice", "c1", &[]).await;
    let c2 = api.turn("alice", "c2", &[]).await;
    support::held::approve(&api, &c1, port).await;
    support::held::approve(&api, &c2, port).await;
    let mut held1 = Held::open(g.proxy(), &c1, port).await;
    let mut held2 = Held::open(g.proxy(), &c2, port).await;

    let r = api
        .call(
            "DELETE",
            &format!("/v1/chats/c1/approvals/site/{FILES}"),
            Some(RUNTIME),
            Some("alice"),
            None,
        )
        .await;
    assert!(r.status < 300, "revoke: {} {}", r.status, r.text());
    let revoked = Instant::now();
    held1
        .assert_closed_within_a_second(revoked, "revoked approval")
        .await;
    held2
        .assert_open(&c2, port, "another chat's approval")
        .await;
    let r = proxy_get(g.proxy(), &c1, &url(port)).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
    assert_eq!(proxy_get(g.proxy(), &c2, &url(port)).await.status, 200);
    assert!(
        g.log_line(&["revoked: closing an open connection"])
            .await
            .is_some(),
        "the closing is logged"
    );
}

#[tokio::test]
async fn revoking_closes_a_tunnel_whose_client_never_spoke() {
    // Off 443 a silent client may be a server-first protocol's: after the first-bytes wait the
    // proxy dials the origin and waits for either side to speak. A revocation must close the
    // tunnel in that wait too, not only once bytes move.
    let (g, o, port) = setup().await;
    let api = g.api();
    let turn = api.turn("alice", "c1", &[]).await;
    support::held::approve(&api, &turn, port).await;
    let (r, mut silent) = connect(g.proxy(), &turn, &format!("{FILES}:{port}")).await;
    assert_eq!(r.status, 200, "CONNECT: {}", r.text());
    let dialled = Instant::now() + Duration::from_secs(5);
    while o.connection_count() == 0 {
        assert!(
            Instant::now() < dialled,
            "the proxy never dialled the origin"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = api
        .call(
            "DELETE",
            &format!("/v1/chats/c1/approvals/site/{FILES}"),
            Some(RUNTIME),
            Some("alice"),
            None,
        )
        .await;
    assert!(r.status < 300, "revoke: {} {}", r.status, r.text());
    let revoked = Instant::now();
    assert!(
        wait_closed(&mut silent, 3).await.is_ok(),
        "the silent tunnel was not closed"
    );
    let took = revoked.elapsed();
    assert!(took < Duration::from_secs(1), "closed only after {took:?}");
    assert!(
        g.log_line(&["revoked: closing an open connection"])
            .await
            .is_some(),
        "the closing is logged"
    );
}

#[tokio::test]
async fn removing_an_admin_site_closes_what_it_let_through() {
    let (g, _o, port) = setup().await;
    let api = g.api();
    api.admin_site(FILES).await;
    let c1 = api.turn("alice", "c1", &[]).await;
    // Another chat reaches the same host through its launch-time sites, which stay.
    let c2 = api.turn("alice", "c2", &[FILES]).await;
    let mut held1 = Held::open(g.proxy(), &c1, port).await;
    let mut held2 = Held::open(g.proxy(), &c2, port).await;

    let r = api
        .call(
            "DELETE",
            &format!("/v1/admin/sites/{FILES}"),
            Some(ADMIN),
            None,
            None,
        )
        .await;
    assert!(r.status < 300, "remove: {} {}", r.status, r.text());
    let removed = Instant::now();
    held1
        .assert_closed_within_a_second(removed, "removed admin site")
        .await;
    held2.assert_open(&c2, port, "a launch-time site").await;
    assert_eq!(proxy_get(g.proxy(), &c1, &url(port)).await.status, 403);
}

#[tokio::test]
async fn hiding_a_chat_ends_its_turns_and_closes_their_connections() {
    let (g, _o, port) = setup().await;
    let api = g.api();
    let c1 = api.turn("alice", "c1", &[FILES]).await;
    let c2 = api.turn("alice", "c2", &[FILES]).await;
    let mut held1 = Held::open(g.proxy(), &c1, port).await;
    let mut held2 = Held::open(g.proxy(), &c2, port).await;

    let r = api
        .call("DELETE", "/v1/chats/c1", Some(RUNTIME), Some("alice"), None)
        .await;
    assert!(r.status < 300, "hide: {} {}", r.status, r.text());
    let hidden = Instant::now();
    held1
        .assert_closed_within_a_second(hidden, "hidden chat")
        .await;
    held2.assert_open(&c2, port, "another chat").await;
    // The hidden chat's turn credential no longer works: 407, like an expired one.
    let r = proxy_get(g.proxy(), &c1, &url(port)).await;
    assert_eq!(r.status, 407, "{}", r.text());
    let (r, _) = connect(g.proxy(), &c1, &format!("{FILES}:{port}")).await;
    assert_eq!(r.status, 407);
    let r = api
        .get(&format!("/v1/turns/{}/refusals", c1.id), RUNTIME)
        .await;
    assert_eq!(r.status, 410, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "TURN_EXPIRED");
    assert_eq!(proxy_get(g.proxy(), &c2, &url(port)).await.status, 200);
}

#[tokio::test]
async fn a_user_losing_can_approve_loses_what_they_approved() {
    let (g, _o, port) = setup().await;
    let api = g.api();
    let alice = api.turn("alice", "c1", &[]).await;
    let bob = api.turn("bob", "c1", &[]).await;
    support::held::approve(&api, &alice, port).await;
    support::held::approve(&api, &bob, port).await;
    let mut held_a = Held::open(g.proxy(), &alice, port).await;
    let mut held_b = Held::open(g.proxy(), &bob, port).await;

    let r = api
        .call(
            "PUT",
            "/v1/admin/users/alice",
            Some(ADMIN),
            None,
            Some(&json!({"can_approve": false}).to_string()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let changed = Instant::now();
    held_a
        .assert_closed_within_a_second(changed, "can_approve lost")
        .await;
    held_b
        .assert_open(&bob, port, "another user's approval")
        .await;
    assert_eq!(proxy_get(g.proxy(), &alice, &url(port)).await.status, 403);
    let r = api.get("/v1/admin/audit?kind=admin_change", ADMIN).await;
    assert!(
        r.text().contains("approvals_revoked"),
        "the audit says what was withdrawn: {}",
        r.text()
    );
}

/// A card expired past its claim cap withdraws what it approved (its rows are deleted), the
/// path by which a card's decision is undone; its tunnel closes like any other revocation.
#[tokio::test]
async fn a_card_expired_past_its_claim_cap_closes_what_it_approved() {
    let o = origin().await;
    let port = o.addr.port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &port.to_string()])
        .args(&["--claim-cap", "1", "--lease", "1s"])
        .start();
    let api = g.api();
    let c1 = api.turn("alice", "c1", &[]).await;
    let c2 = api.turn("alice", "c2", &[]).await;
    support::held::approve(&api, &c2, port).await;
    let (id, secret) = ask(&api, &c1, &[&url(port)]).await;
    approve_card(&api, &id, &secret).await;
    let claimed = tokio::time::Instant::now();
    let mut held1 = Held::open(g.proxy(), &c1, port).await;
    let mut held2 = Held::open(g.proxy(), &c2, port).await;
    // The worker never completes; after its lease the next click is past the cap.
    tokio::time::sleep_until(claimed + std::time::Duration::from_millis(1_200)).await;
    let r = resume(&api, &id, &secret, "resolved", json!({"approved": true})).await;
    assert_ne!(
        r.status,
        200,
        "past the cap the card is expired: {}",
        r.text()
    );
    let expired = Instant::now();
    held1
        .assert_closed_within_a_second(expired, "card past its claim cap")
        .await;
    held2.assert_open(&c2, port, "another chat's card").await;
    assert_eq!(proxy_get(g.proxy(), &c1, &url(port)).await.status, 403);
}
