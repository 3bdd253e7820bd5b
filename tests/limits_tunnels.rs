//! Tunnels against their limits on the real binary: an idle tunnel is closed while a busy one
//! stays open, a tunnel ends with its turn, and a graceful shutdown lets open tunnels run up
//! to the drain timeout and then closes them, a silent one too. Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::hostile::*;
use support::*;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tunnel_is_closed_while_a_busy_one_stays_open() {
    let (o, g, turn) = listed_gate(&["--idle-timeout", "1s"]).await;
    let mut idle = open_tunnel(g.proxy(), &turn, &o).await;
    let mut busy = open_tunnel(g.proxy(), &turn, &o).await;
    let busy_task = tokio::spawn(async move {
        let until = Instant::now() + Duration::from_millis(2500);
        let mut n = 0;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let r = get_over(&mut busy, FILES)
                .await
                .map_err(|e| format!("busy tunnel failed after {n} requests: {e}"))?;
            assert_eq!(r.status, 200);
            n += 1;
        }
        Ok::<usize, String>(n)
    });
    let closed = wait_closed(&mut idle, 5).await;
    let elapsed =
        closed.unwrap_or_else(|d| panic!("the idle tunnel was not closed within 5 s (data {d:?})"));
    assert!(
        (Duration::from_millis(700)..Duration::from_secs(3)).contains(&elapsed),
        "idle tunnel closed after {elapsed:?} with a 1 s idle timeout"
    );
    let n = busy_task.await.unwrap().unwrap();
    assert!(n >= 6, "the busy tunnel carried {n} requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_ends_when_its_turn_expires() {
    let o = origin().await;
    let g = gate_for(&o, &[]);
    let api = g.api();
    api.admin_site(FILES).await;
    let opened = Instant::now();
    let turn = turn_with(&api, serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "ttl_seconds": 2})).await;
    let mut t = open_tunnel(g.proxy(), &turn, &o).await;
    // Keep it busy so only the turn's expiry can end it.
    let mut served = 0;
    let ended = loop {
        assert!(
            opened.elapsed() < Duration::from_secs(6),
            "the tunnel outlived its turn by far: {served} requests"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        match get_over(&mut t, FILES).await {
            Ok(r) if r.status == 200 => served += 1,
            _ => break opened.elapsed(),
        }
    };
    assert!(
        served >= 3,
        "the tunnel worked before expiry ({served} requests)"
    );
    assert!(
        (Duration::from_millis(1000)..Duration::from_millis(3500)).contains(&ended),
        "tunnel ended {ended:?} after a 2 s turn opened"
    );
    assert_eq!(
        g.get(&turn, &files_url(&o)).await.status,
        407,
        "the expired credential is refused"
    );
}

/// Graceful shutdown stops accepting but lets open tunnels run up to the drain timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_tunnels_keep_working_during_the_drain() {
    let (o, g, turn) = listed_gate(&["--drain-timeout", "3s"]).await;
    let proxy = g.proxy();
    let mut t = open_tunnel(proxy, &turn, &o).await;
    let started = Instant::now();
    let stopping = tokio::task::spawn_blocking(move || g.terminate());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let r = get_over(&mut t, FILES).await;
    assert!(
        matches!(&r, Ok(r) if r.status == 200),
        "an open tunnel was cut {:?} after SIGTERM, well inside the 3 s drain timeout: {r:?}",
        started.elapsed()
    );
    assert!(
        TcpStream::connect(proxy).await.is_err(),
        "no new connections while draining"
    );
    let status = tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("exits after the drain timeout")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// At the drain timeout every open tunnel is closed, a silent one too (a client that never
/// spoke, whose tunnel waits for either side after dialling the origin), and the process
/// exits without having to cut anything itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_tunnel_is_closed_at_the_drain_timeout() {
    let (o, g, turn) = listed_gate(&["--drain-timeout", "1s"]).await;
    let (head, mut silent) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(head.status, 200, "CONNECT: {}", head.text());
    o.assert_dialled().await;
    let started = Instant::now();
    g.sigterm();
    let closed = wait_closed(&mut silent, 5).await;
    let took = started.elapsed();
    assert!(
        closed.is_ok(),
        "the silent tunnel was not closed: {closed:?}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "closed {took:?} after SIGTERM, with a 1 s drain timeout"
    );
    let closing = ["drain timeout: closing open tunnels", "stopped=1"];
    g.assert_logged(&closing, "the drain closes it through its registration")
        .await;
    assert!(g.log_lines("drain deadline passed").is_empty());
    assert!(g.wait().success());
}
