//! `/metrics` for both planes, scraped from the real binary: control API requests by route
//! template and status, resume outcomes, claim conflicts, card states, audit failures; the proxy's own
//! answers by status (407, 502, …), connections closed by revocations, open connections
//! against their cap, the CA's end, and the cache epoch with how long ago it was read. Every
//! series `deploy/prometheus/` (alert rules, dashboard) names is in the scrape.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::held::{FILES, Held};
use support::*;

const REQUESTS: &str = "egressgate_control_requests_total";
const RESUMES: &str = "egressgate_control_resumes_total";
const CONFLICTS: &str = "egressgate_control_claim_conflicts_total";
const ERRORS: &str = "egressgate_control_errors_total";
const CARDS: &str = "egressgate_control_cards";
const FAILURES: &str = "egressgate_proxy_failures_total";
/// Open connections (the space keeps its `_limit` sibling out).
const CONNECTIONS: &str = "egressgate_proxy_connections ";
const REFUSALS: &str = "egressgate_proxy_refusals_total";
const REVOKED: &str = "egressgate_proxy_revoked_connections_total";
/// The epoch itself (the space keeps its `_age_seconds` sibling out).
const EPOCH: &str = "egressgate_proxy_cache_epoch ";
const EPOCH_AGE: &str = "egressgate_proxy_cache_epoch_age_seconds";
const GET: &str = r#"method="GET""#;
const POST: &str = r#"method="POST""#;
const OK: &str = r#"status="200""#;
const CREATED: &str = r#"status="201""#;

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
        .names(&[FILES])
        .loopback()
        .ports(&[port, closed])
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
    assert_eq!(g.get(&turn.forged("wrong"), &url).await.status, 407);
    api.admin_site(FILES).await;
    let r = g.get(&turn, &format!("http://{FILES}:{closed}/")).await;
    assert_eq!(r.status, 502);
    // A revocation closes a tunnel: counted.
    let other = g.turn("alice", "c2").await;
    let mut held = Held::open(g.proxy(), &other, port).await;
    let r = api.remove_site(FILES).await;
    assert!(r.status < 300);
    held.assert_closed_within_a_second(std::time::Instant::now(), "admin removal")
        .await;

    // An open client connection counts against max-connections while it lives.
    let idle = tokio::net::TcpStream::connect(g.proxy()).await.unwrap();
    let open = || async { value(&api.open_get("/metrics").await.text(), CONNECTIONS, &[]) };
    assert!(eventually(Duration::from_secs(5), async || open().await >= 1.0).await);
    drop(idle);
    assert!(eventually(Duration::from_secs(5), async || open().await == 0.0).await);

    let scrape = api.open_get("/metrics").await;
    assert_eq!(scrape.status, 200);
    let text = scrape.text();
    assert_deploy_files_name_only_exported_series(&text);
    assert!(
        !text.contains(&turn.id),
        "a raw path leaked into a label: {text}"
    );
    // (series, labels it carries, what its value must be).
    let rows: [(&str, &[&str], Want); 14] = [
        // Routes by their template: the refusals GET, and two turns opened.
        (
            REQUESTS,
            &[r#"route="/v1/turns/{turn_id}/refusals""#, GET, OK],
            AtLeast(1.0),
        ),
        (
            REQUESTS,
            &[r#"route="/v1/turns""#, POST, CREATED],
            AtLeast(2.0),
        ),
        // The approval, then the second click while the claim is held.
        (RESUMES, &[r#"outcome="ok""#], Exactly(1.0)),
        (RESUMES, &[r#"outcome="RESUME_IN_PROGRESS""#], Exactly(1.0)),
        (CONFLICTS, &[], Exactly(1.0)),
        (ERRORS, &[r#"code="RESUME_IN_PROGRESS""#], AtLeast(1.0)),
        // The proxy's own answers: the wrong secret, the closed port, the first GET.
        (FAILURES, &[r#"status="407""#], Exactly(1.0)),
        (FAILURES, &[r#"status="502""#], Exactly(1.0)),
        (REFUSALS, &[r#"reason="not_approved""#], AtLeast(1.0)),
        // The closed tunnel; the removal bumped the epoch, which was read just now.
        (REVOKED, &[], AtLeast(1.0)),
        (EPOCH, &[], AtLeast(1.0)),
        (EPOCH_AGE, &[], Below(2.0)),
        // Card states, read at the scrape: the one card is claimed, none pending.
        (CARDS, &[r#"state="claimed""#], Exactly(1.0)),
        (CARDS, &[r#"state="pending""#], Exactly(0.0)),
    ];
    for (name, labels, want) in rows {
        let v = value(&text, name, labels);
        assert!(
            want.holds(v),
            "{name}{labels:?} = {v}, want {want:?}: {text}"
        );
    }
    // Written as zero, not merely absent.
    for line in [
        "egressgate_control_audit_failures_total 0",
        "egressgate_control_cards{state=\"done\"} 0",
        "egressgate_proxy_connections_limit 10000",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    // The deployment CA `serve` made at start lives 365 days (Unix seconds).
    let ca_end = value(&text, "egressgate_proxy_ca_expiry_timestamp_seconds", &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let days = (ca_end - now) / 86_400.0;
    assert!(
        (364.0..=366.0).contains(&days),
        "CA ends in {days} days: {text}"
    );
}

/// Every `egressgate_*` series that the alert rules, their tests and the Grafana dashboard
/// in `deploy/prometheus/` name is one this scrape exports (a sample line, so a histogram's
/// `_bucket` and a counter's `_total` count by the names a query uses).
fn assert_deploy_files_name_only_exported_series(text: &str) {
    let exported: BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let mut named = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let body = std::fs::read_to_string(&path).unwrap();
        for (at, _) in body.match_indices("egressgate_") {
            if body[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                continue;
            }
            let name: String = body[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            assert!(
                exported.contains(name.as_str()),
                "{} names {name}, which /metrics does not export: {exported:?}",
                path.display()
            );
            named.insert(name);
        }
    }
    // The rules and the dashboard between them use most of what both planes export.
    assert!(named.len() >= 20, "only {named:?}");
}

/// What a series' value must be.
#[derive(Clone, Copy, Debug)]
enum Want {
    Exactly(f64),
    AtLeast(f64),
    /// At least 0 and under the bound.
    Below(f64),
}
use Want::*;

impl Want {
    fn holds(self, v: f64) -> bool {
        match self {
            Exactly(x) => v == x,
            AtLeast(x) => v >= x,
            Below(x) => (0.0..x).contains(&v),
        }
    }
}
