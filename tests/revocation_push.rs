//! Revocations are pushed to every proxy as they commit, with the poll as the fallback: on
//! PostgreSQL two proxy processes, polling once an hour, close what a revocation made through
//! a control process withdrew within a second, through each proxy's `LISTEN`; when those
//! listening connections are cut (`pg_terminate_backend`) each proxy listens again and the
//! next revocation still arrives. A change no push reaches (another process on the same
//! SQLite file) is found by the poll. (tests/revocation.rs has every kind of revocation, all
//! pushed; store/src/db/epoch/tests.rs that every change moving the epoch announces itself.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use sqlx::Row as _;
use support::held::{FILES, Held, approve, revoke_closes};
use support::pg::PgCluster;
use support::*;

/// The `application_name` of each process's listening connection.
const LISTENER: &str = "egressgate-listen";

/// The process ids of the database connections that listen for pushes.
async fn listeners(pool: &sqlx::PgPool) -> HashSet<i32> {
    sqlx::query("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
        .bind(LISTENER)
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<i32, _>(0))
        .collect()
}

/// Waits (bounded, 10 s) until at least `n` listening connections are up.
async fn listening(pool: &sqlx::PgPool, n: usize) -> HashSet<i32> {
    let mut now = HashSet::new();
    let up = eventually(Duration::from_secs(10), async || {
        now = listeners(pool).await;
        now.len() >= n
    })
    .await;
    assert!(up, "expected {n} listening connections, saw {now:?}");
    now
}

#[tokio::test]
async fn every_proxy_on_postgresql_hears_a_revocation_and_listens_again_when_cut() {
    let pg = PgCluster::start();
    let o = origin().await;
    let port = o.port();
    let poll_off = ["--epoch-poll", "1h"];
    let proxy = || {
        proxy_on(&pg.url())
            .reach_as(&o, &[FILES])
            .args(&poll_off)
            .start()
    };
    let (p1, p2) = (proxy(), proxy());
    let control = control_on(&pg.url(), &p1.proxy().to_string()).start();
    let api = control.api();
    let pool = sqlx::PgPool::connect(&pg.url()).await.unwrap();
    let before = listening(&pool, 2).await;

    let c1 = control.turn("alice", "c1").await;
    let c2 = control.turn("alice", "c2").await;
    approve(&api, &c1, port).await;
    approve(&api, &c2, port).await;
    let on_p1 = Held::open(p1.proxy(), &c1, port).await;
    let on_p2 = Held::open(p2.proxy(), &c1, port).await;
    let mut stays = Held::open(p2.proxy(), &c2, port).await;
    let held = vec![(on_p1, "proxy 1"), (on_p2, "proxy 2")];
    revoke_closes(held, async || revoked(&api, "c1").await).await;
    stays.assert_open(&c2, port, "another chat").await;
    drop(stays);

    // Cut every listening connection; each process listens again on a new one.
    for pid in &before {
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .execute(&pool)
            .await
            .unwrap();
    }
    let fresh = eventually(Duration::from_secs(10), async || {
        let now = listeners(&pool).await;
        now.len() >= before.len() && now.is_disjoint(&before)
    })
    .await;
    assert!(
        fresh,
        "the processes did not listen again after their connections were cut"
    );
    for (p, name) in [(&p1, "proxy 1"), (&p2, "proxy 2")] {
        let lost = p.log_line(&["database listener"]).await;
        assert!(lost.is_some(), "{name} did not notice its listener was cut");
    }

    // A revocation after that still arrives, not at the next poll an hour away.
    let on_p1 = Held::open(p1.proxy(), &c2, port).await;
    let on_p2 = Held::open(p2.proxy(), &c2, port).await;
    let held = vec![
        (on_p1, "proxy 1, listening again"),
        (on_p2, "proxy 2, listening again"),
    ];
    revoke_closes(held, async || revoked(&api, "c2").await).await;
}

/// Alice revokes [`FILES`] for her `chat`, asserting `200`.
async fn revoked(api: &Api, chat: &str) {
    let r = api.revoke("alice", chat, "site", FILES).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_change_no_push_reaches_is_found_by_the_poll() {
    // `egressgate admin` is another process: on SQLite nothing it commits wakes the server's
    // proxy, whose poll (300 ms here) finds the removal.
    let (g, o) = reachable_with(&[FILES], &["--epoch-poll", "300ms"]).await;
    let port = o.port();
    g.api().admin_site(FILES).await;
    let turn = g.turn("alice", "c1").await;
    let mut held = Held::open(g.proxy(), &turn, port).await;
    let mut cli = egressgate();
    cli.args(["admin", "sites", "remove", FILES, "--data-dir"])
        .arg(g.data_dir.path().join("data"));
    if let Some(url) = postgres_database_for(g.data_dir.path()) {
        cli.arg("--database-url").arg(url);
        cli.env("EGRESSGATE_CA_SEAL_KEY", support::ca::SEAL_KEY);
    }
    let out = cli.env_remove("DATABASE_URL").output().unwrap();
    assert_success(&out);
    held.assert_closed_within_a_second(Instant::now(), "removed by another process")
        .await;
}

#[test]
fn a_poll_too_short_to_be_meant_is_one_error_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["0s", "5ms", "soon"] {
        let e = serve_failure(&["--epoch-poll", bad], &dir.path().join("data"));
        assert!(e.contains("epoch-poll"), "{bad}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{bad}: one line: {e}");
    }
}
