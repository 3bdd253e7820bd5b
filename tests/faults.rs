//! Faults, with real processes: the database stopping (fail closed, recover without restart),
//! `kill -9` during a burst of refusals (every answered refusal is on disk), and SIGTERM
//! (listeners close, open tunnels drain, exit 0).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::pg::PgCluster;
use support::*;
use tokio::io::AsyncWriteExt as _;

#[tokio::test]
async fn database_outage_fails_closed_and_recovers_without_restart() {
    let pg = PgCluster::start();
    let o = origin().await;
    let g = gate()
        .database(&pg.url())
        .reach_as(&o, &[FILES, "evil.example.com"])
        .args(&["--db-statement-timeout", "1s"])
        .sites(&[FILES])
        .ready()
        .await;
    let api = g.api();
    let turn = g.turn("u", "c").await;
    let ok_url = o.url(FILES, "/");
    let bad_url = o.url("evil.example.com", "/");
    assert_eq!(g.get(&turn, &ok_url).await.status, 200);
    assert_refused(&g.get(&turn, &bad_url).await, "not_approved");

    pg.down();
    // Within a poll interval the cached allow is dropped: nothing is allowed on unknown state.
    let closed = eventually(Duration::from_secs(10), async || {
        g.get(&turn, &ok_url).await.status == 503
    })
    .await;
    assert!(
        closed,
        "an allowed host must get 503 while the database is down"
    );
    assert_eq!(
        g.get(&turn, &bad_url).await.status,
        503,
        "a refusal that cannot be recorded is a 503"
    );
    assert_eq!(api.open_get("/readyz").await.status, 503);
    assert_eq!(api.open_get("/healthz").await.status, 200);

    pg.up();
    let back = eventually(Duration::from_secs(20), async || {
        g.get(&turn, &ok_url).await.status == 200
    })
    .await;
    assert!(back, "service resumes when the database returns");
    assert_refused(&g.get(&turn, &bad_url).await, "not_approved");
    assert_eq!(api.open_get("/readyz").await.status, 200);
    let rec = api.refusals(&turn).await;
    assert_eq!(
        rec["refusals"][0]["count"], 2,
        "refusals answered with 403 are both recorded: {rec}"
    );
}

#[tokio::test]
async fn kill_9_during_a_refusal_burst_keeps_every_answered_refusal() {
    let o = origin().await;
    let g = gate()
        .database("sqlite-default")
        .reach_as(&o, &["evil.example.com"])
        .ready()
        .await;
    let turn = g.turn("u", "c").await;
    let proxy = g.proxy();
    let url = o.url("evil.example.com", "/");
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs(2);
    let mut clients = Vec::new();
    for _ in 0..16 {
        let (turn, url, answered) = (turn.clone(), url.clone(), answered.clone());
        clients.push(tokio::spawn(async move {
            while Instant::now() < stop {
                let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(proxy)).await else { return };
                let req = format!("GET {url} HTTP/1.1\r\nhost: evil.example.com:{}\r\nproxy-authorization: {}\r\nconnection: close\r\n\r\n", url.split(':').nth(2).unwrap().trim_end_matches('/'), turn.auth_header());
                if s.write_all(req.as_bytes()).await.is_err() {
                    return;
                }
                match tokio::time::timeout(Duration::from_secs(2), read_response(&mut s)).await {
                    Ok(Ok(r)) if r.status == 403 => {
                        answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    _ => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let dir = g.kill();
    for c in clients {
        let _ = c.await;
    }
    let answered = answered.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        answered > 50,
        "the burst should have produced refusals before the kill ({answered})"
    );
    let g = gate().database("sqlite-default").data_dir(dir).start();
    let rec = g.api().refusals(&turn).await;
    let recorded = rec["refusals"][0]["count"].as_u64().unwrap();
    assert!(
        recorded >= answered,
        "every refusal answered with a 403 is recorded: {recorded} < {answered}"
    );
}

#[tokio::test]
async fn sigterm_closes_listeners_drains_tunnels_and_exits_zero() {
    let o = origin().await;
    let g = gate()
        .reach_as(&o, &[FILES])
        .args(&["--drain-timeout", "2s"])
        // Started the way a supervisor may start it: the drain must not depend on the
        // signal mask it inherits.
        .shutdown_signals_blocked()
        .sites(&[FILES])
        .ready()
        .await;
    let turn = g.turn("u", "c").await;
    let proxy = g.proxy();
    let (head, mut tunnel) = connect(proxy, &turn, &o.at(FILES)).await;
    assert_eq!(head.status, 200);
    assert_eq!(get_over(&mut tunnel, FILES).await.unwrap().status, 200);

    let started = Instant::now();
    g.sigterm();
    // New connections are refused once the listener is closed...
    let closed = eventually(Duration::from_secs(5), async || {
        tokio::net::TcpStream::connect(proxy).await.is_err()
    })
    .await;
    assert!(closed, "the proxy listener closes on SIGTERM");
    // ...while the open tunnel keeps working during the drain.
    assert_eq!(
        get_over(&mut tunnel, FILES).await.unwrap().status,
        200,
        "in-flight tunnel drains"
    );
    let status = g.wait();
    assert!(status.success(), "exit 0 after draining: {status:?}");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "drain is bounded by --drain-timeout (took {took:?})"
    );
    assert_eq!(o.requests().len(), 2);
}
