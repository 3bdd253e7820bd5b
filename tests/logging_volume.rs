//! How many decision lines a busy proxy writes: a refusal that cannot be recorded still logs
//! its 503, allowed lines are sampled (`--log-allowed`) and refusals never, and repeated
//! identical refusals are limited with a suppressed count.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::decisions::*;
use support::*;

const OTHER: &str = "other.example.com";

#[tokio::test]
async fn a_refusal_that_cannot_be_recorded_logs_its_503() {
    let pg = support::pg::PgCluster::start();
    let g = gate()
        .database(&pg.url())
        .resolve(FILES, "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .args(&["--db-statement-timeout", "1s"])
        .start();
    let turn = g.turn("u", "c").await;
    pg.down();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = g.get(&turn, &format!("http://{FILES}/")).await;
        if r.status == 503 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never 503: {}",
            r.status
        );
    }
    let v = line(&g, "503", |v| v["status"] == 503).await;
    assert!(v["decision"] == "refuse" || v["decision"] == "fail", "{v}");
    assert_eq!(v["host"], FILES);
}

async fn sampled_gate(sampling: &str) -> (Gate, Origin, Turn) {
    let o = origin().await;
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve(OTHER, "127.0.0.1")
        .args(&["--log-format", "json", "--allow-cidr", "127.0.0.0/8"])
        .args(&["--allow-port", &o.port().to_string()])
        .args(&["--log-allowed", sampling])
        .start();
    let api = g.api();
    let turn = api.turn("alice", "c1", &[FILES]).await;
    (g, o, turn)
}

fn count(g: &Gate, decision: &str) -> usize {
    decisions(g)
        .iter()
        .filter(|v| v["decision"] == decision)
        .count()
}

#[tokio::test]
async fn allowed_lines_are_sampled_and_refusals_never() {
    let (g, o, turn) = sampled_gate("none").await;
    let port = o.port();
    for i in 0..5 {
        let r = g.get(&turn, &format!("http://{FILES}:{port}/{i}")).await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(o.requests().len(), 5);
    let r = g.get(&turn, &format!("http://{OTHER}:{port}/")).await;
    assert_eq!(r.status, 403);
    line(&g, "the refusal", |v| v["decision"] == "refuse").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(&g, "allow"), 0, "none: {:#?}", decisions(&g));

    let (g, o, turn) = sampled_gate("1/3").await;
    let port = o.port();
    for i in 0..6 {
        let r = g.get(&turn, &format!("http://{FILES}:{port}/{i}")).await;
        assert_eq!(r.status, 200);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while count(&g, "allow") < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:#?}",
            decisions(&g)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Refusals are never sampled: three different hosts, three lines.
    for h in ["a", "b", "c"] {
        let url = format!("http://{h}.{OTHER}:{port}/");
        assert_eq!(g.get(&turn, &url).await.status, 403);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        count(&g, "allow"),
        2,
        "one in three of six: {:#?}",
        decisions(&g)
    );
    assert_eq!(count(&g, "refuse"), 3);
}

#[tokio::test]
async fn repeated_identical_refusals_are_limited_with_a_suppressed_count() {
    let (g, o, turn) = sampled_gate("all").await;
    let port = o.port();
    let url = format!("http://{OTHER}:{port}/retry");
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert_eq!(g.get(&turn, &url).await.status, 403);
    }
    let storm = started.elapsed();
    // A different host is not held back by the storm.
    let url2 = format!("http://x.{OTHER}:{port}/");
    assert_eq!(g.get(&turn, &url2).await.status, 403);
    line(&g, "another host", |v| v["host"] == format!("x.{OTHER}")).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let lines: Vec<Value> = decisions(&g)
            .into_iter()
            .filter(|v| v["host"] == OTHER && v["reason"] == "not_approved")
            .collect();
        let reported: u64 = lines
            .iter()
            .map(|v| 1 + v["suppressed"].as_u64().unwrap_or(0))
            .sum();
        if reported == 21 {
            // At most one line per second of storm, plus the one after it.
            let most = usize::try_from(storm.as_secs()).unwrap() + 2;
            assert!(lines.len() <= most, "{} lines: {lines:#?}", lines.len());
            assert!(
                lines.last().unwrap()["suppressed"].as_u64().unwrap_or(0) > 0,
                "the next line says how many were held back: {lines:#?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "reported {reported} of 21: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The record itself still counts every one.
    let rec = g.api().refusals(&turn).await;
    let row = rec["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["host"] == OTHER)
        .unwrap()
        .clone();
    assert_eq!(row["count"], 21);
}

#[test]
fn a_bad_log_allowed_value_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["some", "1/0", "2/3"] {
        let e = serve_failure(&["--log-allowed", bad], &dir.path().join("data"));
        assert!(e.contains("--log-allowed") && e.contains(bad), "{e}");
    }
    assert!(!dir.path().join("data").exists(), "nothing was written");
}
