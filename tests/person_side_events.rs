//! The chat event stream through the real binary: events in order, resumption from the last
//! id, coalescing, keep-alive, and a subscriber too far behind getting a resync.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::person::{card, page_resume, raw, runtime_as, setup, with_turn};
use support::sse::Events;
use support::*;

#[tokio::test]
async fn a_chat_streams_its_events_and_resumes_from_the_last_id() {
    // A chat exists from its first turn: subscribe after opening it, before running anything.
    let (g, o, turn) = with_turn("alice", "c1").await;
    let api = g.api();
    let mut ev = Events::open(&api, "c1", "alice", None).await;
    let url = o.url(FILES, "/data.csv");
    // Three refusals of one host and one of another: one event per new refusal row.
    for _ in 0..3 {
        assert_eq!(g.get(&turn, &url).await.status, 403);
    }
    let other = format!("http://a.example.com:{}/x", o.port());
    assert_eq!(g.get(&turn, &other).await.status, 403);
    let (id1, kind, data) = ev.next().await;
    assert_eq!(kind, "refusal.recorded");
    assert_eq!(data["host"], FILES);
    assert_eq!(data["reason"], "not_approved");
    assert_eq!(data["turn_id"], turn.id.as_str());
    assert_eq!(data["port"], o.port());
    let (_, kind, data) = ev.next().await;
    assert_eq!(
        (kind.as_str(), data["host"].as_str()),
        ("refusal.recorded", Some("a.example.com"))
    );
    let (cid, secret) = card(&api, &turn, &[]).await;
    let (_, kind, data) = ev.next().await;
    assert_eq!(kind, "approval.requested");
    assert_eq!(data["interrupt_id"], cid.as_str());
    let r = page_resume(&api, &cid, &secret, true).await;
    assert_eq!(r.status, 200);
    let (_, kind, data) = ev.next().await;
    assert_eq!(kind, "approval.resolved");
    assert_eq!(data["decision"]["outcome"], "approved");
    assert!(!data.to_string().contains(&secret), "no secret in events");
    let r = api.revoke("alice", "c1", "site", FILES).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (last_id, kind, data) = ev.next().await;
    assert_eq!(kind, "approval.revoked");
    assert_eq!(data["value"], FILES);
    // Reconnecting with Last-Event-ID replays exactly what came after it.
    let mut again = Events::open(&api, "c1", "alice", Some(&id1)).await;
    let mut replayed = vec![];
    for _ in 0..4 {
        let (id, kind, _) = again.next().await;
        replayed.push(kind);
        if id == last_id {
            break;
        }
    }
    assert_eq!(
        replayed,
        [
            "refusal.recorded",
            "approval.requested",
            "approval.resolved",
            "approval.revoked"
        ]
    );
    // Another user's chat of the same name is no chat of bob's: the 404 of a chat nobody
    // opened, so bob's token cannot even wait on alice's stream.
    let bob = raw(
        &api,
        "GET",
        "/v1/chats/c1/events",
        &runtime_as("bob", &[]),
        "",
    )
    .await;
    assert_eq!(bob.status, 404, "{}", bob.text());
    assert_eq!(bob.json()["error"]["code"], "CHAT_NOT_FOUND");
    // A bad Last-Event-ID is a clear error; the wrong token is refused.
    let r = raw(
        &api,
        "GET",
        "/v1/chats/c1/events",
        &runtime_as("alice", &[("last-event-id", "yesterday")]),
        "",
    )
    .await;
    assert_eq!(r.status, 422);
    let r = raw(
        &api,
        "GET",
        "/v1/chats/c1/events",
        &[("x-egressgate-user", "alice")],
        "",
    )
    .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn a_subscriber_too_far_behind_gets_a_resync_then_live_events() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    // 300 distinct refusals in one chat (over two turns: a turn keeps at most 256 hosts).
    let proxy = g.proxy();
    for t in 0..2 {
        let turn = g.turn("alice", "lag").await;
        let sends = (0..150).map(|i| {
            let turn = turn.clone();
            let url = format!("http://h{t}-{i}.example.net/x");
            async move { proxy_get(proxy, &turn, &url).await.status }
        });
        let statuses = futures_util::future::join_all(sends).await;
        assert!(statuses.iter().all(|s| *s == 403));
    }
    let mut ev = Events::open(&api, "lag", "alice", Some("0")).await;
    let (id, kind, data) = ev.next().await;
    assert_eq!(kind, "resync");
    assert_eq!(data["reason"], "lagged");
    assert_eq!(data["last_event_id"].to_string(), id);
    // Then it carries on live from there.
    let turn = g.turn("alice", "lag").await;
    let url = o.url(FILES, "/x");
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let (next, kind, data) = ev.next().await;
    assert_eq!(
        (kind.as_str(), data["host"].as_str()),
        ("refusal.recorded", Some(FILES))
    );
    assert!(next.parse::<i64>().unwrap() > id.parse::<i64>().unwrap());
}
