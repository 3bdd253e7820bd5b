//! Revocation closes what is open: an open tunnel and a keep-alive forwarded connection that
//! relied on a grant are closed within one second of each kind of revocation (an approval
//! revoked, an admin site removed, a chat hidden, a user losing `can_approve`, a card past its
//! claim cap), the next request is refused as usual, and another chat's connections to the
//! same host stay open. Every gate here polls the cache epoch only once an hour
//! ([`NO_POLL`]): each revocation is pushed to the proxy as it commits, or the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::held::{FILES, Held, approve, assert_closed_in_a_second, revoke_closes};
use support::*;

/// The poll of the cache epoch, set out of the tests' reach: what closes a connection within
/// their second is the push.
const NO_POLL: [&str; 2] = ["--epoch-poll", "1h"];

/// A gate that may reach the origin as [`FILES`], with nothing listed (and [`NO_POLL`]): the
/// gate, its API (every row revokes through it), the origin and its port.
async fn setup() -> (Gate, Api, Origin, u16) {
    setup_with(&[]).await
}

/// [`setup`] with the gate's flags `args` besides [`NO_POLL`].
async fn setup_with(args: &[&str]) -> (Gate, Api, Origin, u16) {
    let (g, o) = reachable_with(&[FILES], &[args, &NO_POLL[..]].concat()).await;
    let port = o.port();
    let api = g.api();
    (g, api, o, port)
}

fn url(port: u16) -> String {
    format!("http://{FILES}:{port}/data.csv")
}

/// The user revokes their chat's approval of [`FILES`] (2xx asserted).
async fn revoke_files(api: &Api, user: &str, chat: &str) {
    let r = api.revoke(user, chat, "site", FILES).await;
    assert!(r.status < 300, "revoke: {} {}", r.status, r.text());
}

/// Turns for (user, chat) pairs, each of whose chats a person approved [`FILES`] for.
async fn approved_turns<const N: usize>(g: &Gate, port: u16, who: [(&str, &str); N]) -> [Turn; N] {
    let mut turns = Vec::new();
    for (user, chat) in who {
        let turn = g.turn(user, chat).await;
        approve(&g.api(), &turn, port).await;
        turns.push(turn);
    }
    turns.try_into().unwrap()
}

/// A row's check: the first turn's tunnel and keep-alive connection close within a second of
/// `revoke` (which withdraws what they relied on, `what`), the second turn's stay open (`kept`).
/// Returns what `revoke` answered.
async fn closes_only_the_first<R>(
    g: &Gate,
    port: u16,
    (first, second): (&Turn, &Turn),
    (what, kept): (&str, &str),
    revoke: impl AsyncFnOnce() -> R,
) -> R {
    let gone = Held::open(g.proxy(), first, port).await;
    let mut stays = Held::open(g.proxy(), second, port).await;
    let r = revoke_closes(vec![(gone, what)], revoke).await;
    stays.assert_open(second, port, kept).await;
    r
}

#[tokio::test]
async fn revoking_an_approval_closes_that_chats_connections_only() {
    let (g, api, _o, port) = setup().await;
    let [c1, c2] = approved_turns(&g, port, [("alice", "c1"), ("alice", "c2")]).await;
    let why = ("revoked approval", "another chat's approval");
    closes_only_the_first(&g, port, (&c1, &c2), why, async || {
        revoke_files(&api, "alice", "c1").await
    })
    .await;
    assert_refused(&g.get(&c1, &url(port)).await, "not_approved");
    assert_eq!(g.get(&c2, &url(port)).await.status, 200);
    g.assert_logged(&["revoked: closing an open connection"], "the closing")
        .await;
}

#[tokio::test]
async fn revoking_closes_a_tunnel_whose_client_never_spoke() {
    // Off 443 a silent client may be a server-first protocol's: after the first-bytes wait the
    // proxy dials the origin and waits for either side to speak. A revocation must close the
    // tunnel in that wait too, not only once bytes move.
    let (g, api, o, port) = setup().await;
    let [turn] = approved_turns(&g, port, [("alice", "c1")]).await;
    let (r, mut silent) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(r.status, 200, "CONNECT: {}", r.text());
    o.assert_dialled().await;
    revoke_files(&api, "alice", "c1").await;
    assert_closed_in_a_second(&mut silent, Instant::now(), "the silent tunnel").await;
    g.assert_logged(&["revoked: closing an open connection"], "the closing")
        .await;
}

#[tokio::test]
async fn removing_an_admin_site_closes_what_it_let_through() {
    let (g, api, _o, port) = setup().await;
    api.admin_site(FILES).await;
    let c1 = g.turn("alice", "c1").await;
    // Another chat reaches the same host through its launch-time sites, which stay.
    let c2 = api.turn("alice", "c2", &[FILES]).await;
    let why = ("removed admin site", "a launch-time site");
    let r = closes_only_the_first(&g, port, (&c1, &c2), why, async || {
        api.remove_site(FILES).await
    })
    .await;
    assert!(r.status < 300, "remove: {} {}", r.status, r.text());
    assert_eq!(g.get(&c1, &url(port)).await.status, 403);
}

#[tokio::test]
async fn hiding_a_chat_ends_its_turns_and_closes_their_connections() {
    let (g, api, _o, port) = setup().await;
    let c1 = api.turn("alice", "c1", &[FILES]).await;
    let c2 = api.turn("alice", "c2", &[FILES]).await;
    let why = ("hidden chat", "another chat");
    let r = closes_only_the_first(&g, port, (&c1, &c2), why, async || {
        api.hide_chat("alice", "c1").await
    })
    .await;
    assert!(r.status < 300, "hide: {} {}", r.status, r.text());
    // The hidden chat's turn credential no longer works: 407, like an expired one.
    let r = g.get(&c1, &url(port)).await;
    assert_eq!(r.status, 407, "{}", r.text());
    let (r, _) = connect(g.proxy(), &c1, &format!("{FILES}:{port}")).await;
    assert_eq!(r.status, 407);
    let r = api
        .get(&format!("/v1/turns/{}/refusals", c1.id), RUNTIME)
        .await;
    assert_eq!(r.status, 410, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "TURN_EXPIRED");
    assert_eq!(g.get(&c2, &url(port)).await.status, 200);
}

#[tokio::test]
async fn a_user_losing_can_approve_loses_what_they_approved() {
    let (g, api, _o, port) = setup().await;
    let [alice, bob] = approved_turns(&g, port, [("alice", "c1"), ("bob", "c1")]).await;
    let why = ("can_approve lost", "another user's approval");
    let r = closes_only_the_first(&g, port, (&alice, &bob), why, async || {
        api.set_can_approve("alice", false).await
    })
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(g.get(&alice, &url(port)).await.status, 403);
    let audit = api.audit("admin_change").await.text();
    let what = "the audit says what was withdrawn";
    assert!(audit.contains("approvals_revoked"), "{what}: {audit}");
}

/// A card expired past its claim cap withdraws what it approved (its rows are deleted), the
/// path by which a card's decision is undone; its tunnel closes like any other revocation.
#[tokio::test]
async fn a_card_expired_past_its_claim_cap_closes_what_it_approved() {
    let (g, api, _o, port) = setup_with(&["--claim-cap", "1", "--lease", "1s"]).await;
    let c1 = g.turn("alice", "c1").await;
    let [c2] = approved_turns(&g, port, [("alice", "c2")]).await;
    let (id, secret) = approved(&api, &c1, &[&url(port)]).await;
    let claimed = tokio::time::Instant::now();
    let why = ("card past its claim cap", "another chat's card");
    let r = closes_only_the_first(&g, port, (&c1, &c2), why, async || {
        // The worker never completes; after its lease the next click is past the cap.
        tokio::time::sleep_until(claimed + Duration::from_millis(1_200)).await;
        answer_card(&api, &id, &secret, json!({"approved": true})).await
    })
    .await;
    assert_ne!(
        r.status,
        200,
        "past the cap the card is expired: {}",
        r.text()
    );
    assert_eq!(g.get(&c1, &url(port)).await.status, 403);
}

/// A user-scope grant (all of a person's chats) revoked closes every chat's connections that
/// relied on it, and no other user's.
#[tokio::test]
async fn revoking_a_user_grant_closes_every_chat_it_let_through() {
    let (g, api, _o, port) = setup_with(&["--allow-user-scope"]).await;
    let c1 = g.turn("alice", "c1").await;
    let user_scope = json!({"approved": true, "scope": "user"});
    let (r, _, _) = ask_and_answer(&api, &c1, &[&url(port)], user_scope).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let c2 = g.turn("alice", "c2").await;
    let [bob] = approved_turns(&g, port, [("bob", "c1")]).await;
    let first = Held::open(g.proxy(), &c1, port).await;
    let second = Held::open(g.proxy(), &c2, port).await;
    let mut stays = Held::open(g.proxy(), &bob, port).await;
    let held = vec![
        (first, "the user grant's first chat"),
        (second, "the user grant's other chat"),
    ];
    revoke_closes(held, async || {
        let path = format!("/v1/users/alice/approvals/site/{FILES}");
        let r = api.as_user("DELETE", &path, "alice").await;
        assert_eq!(r.status, 200, "{}", r.text());
    })
    .await;
    stays
        .assert_open(&bob, port, "another user's approval")
        .await;
}
