//! The chat event stream across processes on PostgreSQL: a proxy process records refusals,
//! one control process registers and resumes the card, and a subscriber on *another* control
//! process sees every event in order (woken by `NOTIFY`, with polling as the fallback), then
//! resumes from its `Last-Event-ID` on the first process without a gap.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::pg::PgCluster;
use support::sse::Events;
use support::*;

#[tokio::test]
async fn a_subscriber_on_one_control_process_sees_changes_made_through_others() {
    let pg = PgCluster::start();
    let o = origin().await;
    let proxy = proxy_on(&pg.url()).reach_as(&o, &[FILES]).start();
    let public = proxy.proxy().to_string();
    let control = || control_on(&pg.url(), &public).start();
    let (a, b) = (control(), control());
    let (api_a, api_b) = (a.api(), b.api());
    let turn = a.turn("alice", "c1").await;
    let mut ev = Events::open(&api_b, "c1", "alice", None).await;
    let url = o.url(FILES, "/data.csv");
    let t0 = Instant::now();
    assert_refused(&proxy.get(&turn, &url).await, "not_approved");
    let (first, kind, data) = ev.next().await;
    let refusal_latency = t0.elapsed();
    assert_eq!(kind, "refusal.recorded");
    assert_eq!(data["host"], FILES);
    let (_, id, secret) = ask_with(&api_a, &turn, json!({"reason": "needs the data"})).await;
    let (_, kind, data) = ev.next().await;
    assert_eq!(
        (kind.as_str(), data["interrupt_id"].as_str()),
        ("approval.requested", Some(id.as_str()))
    );
    let t1 = Instant::now();
    let r = click_approve(&api_a, &id, &secret).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (last, kind, data) = ev.next().await;
    let resolve_latency = t1.elapsed();
    assert_eq!(kind, "approval.resolved");
    assert_eq!(data["decision"]["outcome"], "approved");
    eprintln!(
        "cross-process event latency: refusal {refusal_latency:?}, resolution {resolve_latency:?}"
    );
    assert!(
        resolve_latency < Duration::from_secs(3),
        "{resolve_latency:?}"
    );
    // Resuming on the other process from the first event's id: the rest, in order.
    let mut again = Events::open(&api_a, "c1", "alice", Some(&first)).await;
    let (_, k1, _) = again.next().await;
    let (id2, k2, _) = again.next().await;
    assert_eq!(
        (k1.as_str(), k2.as_str()),
        ("approval.requested", "approval.resolved")
    );
    assert_eq!(id2, last);
}
