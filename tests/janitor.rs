//! The janitor keeps the database bounded: a turn that expired more than `interrupt-retention`
//! ago is deleted with its refusal and egress rows by the real binary's janitor (which runs
//! at start and then every minute), while a live turn and its rows stay.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::*;

/// What the control API answers for the turn's refusals.
async fn refusals_status(api: &Api, turn: &Turn) -> u16 {
    api.get(&format!("/v1/turns/{}/refusals", turn.id), RUNTIME)
        .await
        .status
}

#[tokio::test]
async fn an_expired_turn_is_purged_after_the_retention_and_a_live_one_stays() {
    // Turns live one second and are kept one second after they expire.
    let short = ["--turn-ttl", "1s", "--interrupt-retention", "1s"];
    let g = gate().args(&short).start();
    let api = g.api();
    let old = g.turn("alice", "c1").await;
    let r = g.get(&old, "http://blocked.example.net/x").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        api.refusals(&old).await["refusals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Past its expiry and the retention: expired, not yet purged (no janitor pass since).
    let deadline = Instant::now() + Duration::from_secs(15);
    while refusals_status(&api, &old).await != 410 {
        assert!(Instant::now() < deadline, "the turn never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await; // the retention passes

    // A restart runs a janitor pass at once; a turn opened after it is live and kept.
    let data = g.kill();
    let g = gate()
        .args(&["--turn-ttl", "1h", "--interrupt-retention", "1s"])
        .data_dir(data)
        .start();
    let api = g.api();
    let live = g.turn("alice", "c2").await;
    let r = g.get(&live, "http://blocked.example.net/x").await;
    assert_eq!(r.status, 403);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match refusals_status(&api, &old).await {
            404 => break,
            410 => {}
            s => panic!("an expired turn answered {s}"),
        }
        assert!(
            Instant::now() < deadline,
            "the janitor never purged the turn"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = api
        .get(&format!("/v1/turns/{}/refusals", old.id), RUNTIME)
        .await;
    assert_eq!(r.json()["error"]["code"], "TURN_NOT_FOUND", "{}", r.text());
    assert_eq!(
        api.refusals(&live).await["refusals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
