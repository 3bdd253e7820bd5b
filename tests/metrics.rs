//! `/metrics` for both planes, scraped from the real binary: control API requests by route
//! template and status, resume outcomes, claim conflicts, card states, audit failures; the proxy's own
//! answers by status (407, 502, …), connections closed by revocations, and the cache epoch
//! with how long ago it was read.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::held::{FILES, Held};
use support::*;

/// The value of the series whose line contains every one of `parts` (0 when absent).
fn value(text: &str, name: &str, parts: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && parts.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn metrics_cover_both_planes() {
    let o = origin().await;
    let port = o.port();
    let closed = free_port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &format!("{port},{closed}")])
        .start();
    let api = g.api();
    let turn = g.turn("alice", "c1").await;
    // Control: a route with an id in its path, answered 200.
    assert_eq!(api.refusals(&turn).await["turn_id"], turn.id.as_str());
    // A card, approved once; a second click while the claim is held is a conflict.
    let url = format!("http://{FILES}:{port}/data.csv");
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let (id, secret) = ask(&api, &turn, &[]).await;
    approve_card(&api, &id, &secret).await;
    let r = answer_card(&api, &id, &secret, json!({"approved": true})).await;
    assert_eq!(r.status, 409, "{}", r.text());
    // Proxy: 407 and 502.
    let wrong = Turn {
        id: turn.id.clone(),
        credential: format!("{}:wrong", turn.id),
    };
    assert_eq!(g.get(&wrong, &url).await.status, 407);
    api.admin_site(FILES).await;
    let r = g.get(&turn, &format!("http://{FILES}:{closed}/")).await;
    assert_eq!(r.status, 502);
    // A revocation closes a tunnel: counted.
    let other = g.turn("alice", "c2").await;
    let mut held = Held::open(g.proxy(), &other, port).await;
    let r = api
        .call(
            "DELETE",
            &format!("/v1/admin/sites/{FILES}"),
            Some(ADMIN),
            None,
            None,
        )
        .await;
    assert!(r.status < 300);
    held.assert_closed_within_a_second(std::time::Instant::now(), "admin removal")
        .await;

    let scrape = api.open_get("/metrics").await;
    assert_eq!(scrape.status, 200);
    let text = scrape.text();
    let requests = "egressgate_control_requests_total";
    assert!(
        value(
            &text,
            requests,
            &[
                "route=\"/v1/turns/{turn_id}/refusals\"",
                "method=\"GET\"",
                "status=\"200\""
            ]
        ) >= 1.0,
        "{text}"
    );
    assert!(
        value(
            &text,
            requests,
            &["route=\"/v1/turns\"", "method=\"POST\"", "status=\"201\""]
        ) >= 2.0,
        "{text}"
    );
    assert!(
        !text.contains(&turn.id),
        "a raw path leaked into a label: {text}"
    );
    assert_eq!(
        value(
            &text,
            "egressgate_control_resumes_total",
            &["outcome=\"ok\""]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "egressgate_control_resumes_total",
            &["outcome=\"RESUME_IN_PROGRESS\""]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "egressgate_control_claim_conflicts_total", &[]),
        1.0,
        "{text}"
    );
    assert!(
        text.contains("egressgate_control_audit_failures_total 0"),
        "{text}"
    );
    assert!(
        value(
            &text,
            "egressgate_control_errors_total",
            &["code=\"RESUME_IN_PROGRESS\""]
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "egressgate_proxy_failures_total",
            &["status=\"407\""]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "egressgate_proxy_failures_total",
            &["status=\"502\""]
        ),
        1.0,
        "{text}"
    );
    assert!(
        value(
            &text,
            "egressgate_proxy_refusals_total",
            &["reason=\"not_approved\""]
        ) >= 1.0,
        "{text}"
    );
    assert!(
        value(&text, "egressgate_proxy_revoked_connections_total", &[]) >= 1.0,
        "{text}"
    );
    assert!(
        value(&text, "egressgate_proxy_cache_epoch ", &[]) >= 1.0,
        "the removal bumped it: {text}"
    );
    // Card states, read at the scrape: the one card is claimed, none pending.
    assert_eq!(
        value(&text, "egressgate_control_cards", &["state=\"claimed\""]),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "egressgate_control_cards", &["state=\"pending\""]),
        0.0,
        "{text}"
    );
    assert!(
        text.contains("egressgate_control_cards{state=\"done\"} 0"),
        "{text}"
    );
    let age = value(&text, "egressgate_proxy_cache_epoch_age_seconds", &[]);
    assert!((0.0..2.0).contains(&age), "epoch read {age}s ago: {text}");
}
