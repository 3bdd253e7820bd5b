//! Faults, with real processes: the database stopping (fail closed, recover without restart),
//! `kill -9` during a burst of refusals (every answered refusal is on disk), and SIGTERM
//! (listeners close, open tunnels drain, exit 0).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::pg::PgCluster;
use support::*;
use tokio::io::AsyncWriteExt as _;

const FILES: &str = "files.example.com";

/// Polls `f` until it returns true or `limit` passes.
async fn eventually(limit: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn database_outage_fails_closed_and_recovers_without_restart() {
    let pg = PgCluster::start();
    let o = origin().await;
    let port = o.addr.port().to_string();
    let g = gate()
        .database(&pg.url())
        .resolve(FILES, "127.0.0.1")
        .resolve("evil.example.com", "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &port,
            "--db-statement-timeout",
            "1s",
        ])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = api.turn("u", "c", &[]).await;
    let ok_url = format!("http://{FILES}:{port}/");
    let bad_url = format!("http://evil.example.com:{port}/");
    assert_eq!(proxy_get(g.proxy(), &turn, &ok_url).await.status, 200);
    assert_eq!(proxy_get(g.proxy(), &turn, &bad_url).await.status, 403);

    pg.down();
    // Within a poll interval the cached allow is dropped: nothing is allowed on unknown state.
    let closed = eventually(Duration::from_secs(10), async || {
        proxy_get(g.proxy(), &turn, &ok_url).await.status == 503
    })
    .await;
    assert!(
        closed,
        "an allowed host must get 503 while the database is down"
    );
    assert_eq!(
        proxy_get(g.proxy(), &turn, &bad_url).await.status,
        503,
        "a refusal that cannot be recorded is a 503"
    );
    assert_eq!(
        api.call("GET", "/readyz", None, None, None).await.status,
        503
    );
    assert_eq!(
        api.call("GET", "/healthz", None, None, None).await.status,
        200
    );

    pg.up();
    let back = eventually(Duration::from_secs(20), async || {
        proxy_get(g.proxy(), &turn, &ok_url).await.status == 200
    })
    .await;
    assert!(back, "service resumes when the database returns");
    assert_eq!(proxy_get(g.proxy(), &turn, &bad_url).await.status, 403);
    assert_eq!(
        api.call("GET", "/readyz", None, None, None).await.status,
        200
    );
    let rec = api.refusals(&turn).await;
    assert_eq!(
        rec["refusals"][0]["count"], 2,
        "refusals answered with 403 are both recorded: {rec}"
    );
}

#[tokio::test]
async fn kill_9_during_a_refusal_burst_keeps_every_answered_refusal() {
    let o = origin().await;
    let port = o.addr.port().to_string();
    let g = gate()
        .database("sqlite-default")
        .resolve("evil.example.com", "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &port])
        .start();
    let turn = g.api().turn("u", "c", &[]).await;
    let proxy = g.proxy();
    let url = format!("http://evil.example.com:{port}/");
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
    let port = o.addr.port().to_string();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &port,
            "--drain-timeout",
            "2s",
        ])
        // Started the way a supervisor may start it: the drain must not depend on the
        // signal mask it inherits.
        .shutdown_signals_blocked()
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = api.turn("u", "c", &[]).await;
    let proxy = g.proxy();
    let (head, mut tunnel) = connect(proxy, &turn, &format!("{FILES}:{port}")).await;
    assert_eq!(head.status, 200);
    tunnel
        .write_all(format!("GET /one HTTP/1.1\r\nhost: {FILES}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_response(&mut tunnel).await.unwrap().status, 200);

    let started = Instant::now();
    let pid = g.pid();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    // New connections are refused once the listener is closed...
    let closed = eventually(Duration::from_secs(5), async || {
        tokio::net::TcpStream::connect(proxy).await.is_err()
    })
    .await;
    assert!(closed, "the proxy listener closes on SIGTERM");
    // ...while the open tunnel keeps working during the drain.
    tunnel
        .write_all(format!("GET /two HTTP/1.1\r\nhost: {FILES}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(
        read_response(&mut tunnel).await.unwrap().status,
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
