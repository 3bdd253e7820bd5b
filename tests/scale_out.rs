//! Scale-out on PostgreSQL with real processes: two proxies and two control planes share one
//! database. The full loop runs with each step on a different process; concurrent resumes
//! sent to different control processes still claim once; a control process killed while
//! holding a claim is taken over after its lease; a revocation reaches another process's
//! proxy cache within one poll.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::held::{Held, approve, revoke_closes};
use support::pg::PgCluster;
use support::*;

/// base64 of "paused agent state".
const SNAPSHOT: &str = "cGF1c2VkIGFnZW50IHN0YXRl";

struct Fleet {
    _pg: PgCluster,
    p1: Gate,
    p2: Gate,
    a: Gate,
    b: Gate,
    origin: Origin,
    url: String,
}

async fn fleet(lease: &str) -> Fleet {
    let pg = PgCluster::start();
    let origin = origin().await;
    let proxy = || proxy_on(&pg.url()).reach_as(&origin, &[FILES]).start();
    let (p1, p2) = (proxy(), proxy());
    let public = p1.proxy().to_string();
    let control = || {
        control_on(&pg.url(), &public)
            .args(&["--lease", lease])
            .start()
    };
    let (a, b) = (control(), control());
    let url = origin.url(FILES, "/data.csv");
    Fleet {
        _pg: pg,
        p1,
        p2,
        a,
        b,
        origin,
        url,
    }
}

async fn card(api: &Api, turn: &Turn) -> (String, String) {
    let r = approval_request(api, turn, json!({"reason": "needs the data"})).await;
    assert_eq!(r.json()["outcome"], "ask", "{}", r.text());
    // The paused agent's snapshot goes to the blob store, which follows the database here,
    // so any control process can hand it back on resume.
    let draft = r.json()["draft_id"].clone();
    let r = register(api, json!({"draft_id": draft, "snapshot": SNAPSHOT})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        v["interrupt"]["id"].as_str().unwrap().into(),
        v["resume_secret"].as_str().unwrap().into(),
    )
}

#[tokio::test]
async fn full_loop_with_each_step_on_a_different_process() {
    let f = fleet("30s").await;
    let (a, b) = (f.a.api(), f.b.api());
    let turn = f.a.turn("alice", "c1").await; // control A opens the turn
    assert_eq!(f.p1.get(&turn, &f.url).await.status, 403); // proxy 1 refuses and records
    let (id, secret) = card(&b, &turn).await; // control B sees the refusal, drafts and registers
    let r = click_approve(&a, &id, &secret).await; // control A resumes the card registered on B
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"]["outcome"], "approved");
    assert_eq!(
        r.json()["snapshot"],
        SNAPSHOT,
        "the snapshot written through B is read back through A"
    );
    let got = f.p2.get(&turn, &f.url).await; // proxy 2 honours it on the next request
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(f.origin.requests().len(), 1);

    // Revocation through B reaches proxy 2's cache (allowed just now) within one poll.
    let r = b.revoke("alice", "c1", "site", FILES).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t = Instant::now();
    let refused = eventually(Duration::from_secs(5), async || {
        f.p2.status_or_cut(&turn, &f.url).await == Some(403)
    })
    .await;
    eprintln!(
        "revocation propagated to another process's proxy in {:?}",
        t.elapsed()
    );
    assert!(refused, "revocation must reach every proxy promptly");
}

#[tokio::test]
async fn concurrent_resumes_across_control_processes_claim_once() {
    let f = fleet("30s").await;
    let (a, b) = (f.a.api(), f.b.api());
    let turn = f.a.turn("bob", "c1").await;
    assert_eq!(f.p1.get(&turn, &f.url).await.status, 403);
    let (id, secret) = card(&a, &turn).await;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let api = if i % 2 == 0 { a } else { b };
        let (id, secret) = (id.clone(), secret.clone());
        tasks.push(tokio::spawn(async move {
            click_approve(&api, &id, &secret).await.status
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    let claimed = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(claimed, 1, "exactly one claim: {statuses:?}");
    assert!(
        statuses.iter().all(|s| [200, 409, 429].contains(s)),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn a_control_process_killed_while_holding_a_claim_is_taken_over_after_its_lease() {
    let f = fleet("1s").await;
    let a = f.a.api();
    let turn = f.a.turn("carol", "c1").await;
    assert_eq!(f.p1.get(&turn, &f.url).await.status, 403);
    let (id, secret) = card(&a, &turn).await;
    let first = click_approve(&f.b.api(), &id, &secret).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let dead_claim = first.json()["claim"]["claim_id"].clone();
    let _ = f.b.kill(); // kill -9 of the worker holding the claim
    assert_eq!(
        click_approve(&a, &id, &secret).await.status,
        409,
        "the lease is still live"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await; // the lease (1s) lapses
    let second = click_approve(&a, &id, &secret).await;
    assert_eq!(
        second.status,
        200,
        "the next click claims after the lease: {}",
        second.text()
    );
    assert_eq!(
        second.json()["decision"]["outcome"],
        "approved",
        "the first claim fixed the decision"
    );
    assert_ne!(second.json()["claim"]["claim_id"], dead_claim);
    let hb = a
        .call(
            "POST",
            &format!("/v1/interrupts/{id}/heartbeat"),
            None,
            None,
            Some(&json!({"claim_id": dead_claim}).to_string()),
        )
        .await;
    assert_eq!(
        hb.status,
        409,
        "the dead worker's claim is lost: {}",
        hb.text()
    );
    assert_eq!(f.p2.get(&turn, &f.url).await.status, 200);
}

/// One revocation row: `turn` holds a tunnel and a keep-alive connection on both proxies;
/// `revoke` answers 2xx (exactly `status` when given) and closes all four within a second;
/// the turn's next request through `then_via` is answered `then`.
async fn revocation_row(
    f: &Fleet,
    (turn, what): (&Turn, &str),
    (revoke, status): (impl AsyncFnOnce() -> Resp, Option<u16>),
    (then_via, then): (&Gate, u16),
) {
    let mut held = Vec::new();
    for p in [f.p1.proxy(), f.p2.proxy()] {
        held.push((Held::open(p, turn, f.origin.port()).await, what));
    }
    revoke_closes(held, async || {
        let r = revoke().await;
        assert!(r.status < 300, "{what}: {}", r.text());
        if let Some(want) = status {
            assert_eq!(r.status, want, "{what}: {}", r.text());
        }
    })
    .await;
    assert_eq!(then_via.get(turn, &f.url).await.status, then, "{what}");
}

/// Every kind of revocation, made through one control process, closes the open tunnels and
/// keep-alive connections that relied on it on both proxies within one second, while another
/// chat's connections to the same host stay open throughout.
#[tokio::test]
async fn revocations_close_open_connections_on_every_proxy() {
    let f = fleet("30s").await;
    let (a, b) = (f.a.api(), f.b.api());
    let port = f.origin.port();
    let c1 = f.a.turn("alice", "c1").await;
    let c2 = f.a.turn("alice", "c2").await;
    let bob = f.a.turn("bob", "b1").await;
    for t in [&c1, &c2, &bob] {
        approve(&a, t, port).await;
    }
    let mut stays = Vec::new();
    for p in [f.p1.proxy(), f.p2.proxy()] {
        stays.push(Held::open(p, &c2, port).await);
    }
    let revoke = async || b.revoke("alice", "c1", "site", FILES).await;
    let row = (&c1, "revoked approval");
    revocation_row(&f, row, (revoke, Some(200)), (&f.p2, 403)).await;
    // An admin site removed (chat c3 reached the host through it alone).
    a.admin_site(FILES).await;
    let c3 = f.a.turn("alice", "c3").await;
    let revoke = async || b.remove_site(FILES).await;
    let row = (&c3, "removed admin site");
    revocation_row(&f, row, (revoke, None), (&f.p1, 403)).await;
    // A chat hidden (its turn had the host as a launch-time site).
    let c4 = a.turn("alice", "c4", &[FILES]).await;
    let revoke = async || b.hide_chat("alice", "c4").await;
    revocation_row(&f, (&c4, "hidden chat"), (revoke, None), (&f.p2, 407)).await;
    let revoke = async || b.set_can_approve("bob", false).await;
    let row = (&bob, "can_approve lost");
    revocation_row(&f, row, (revoke, Some(200)), (&f.p1, 403)).await;
    for h in &mut stays {
        h.assert_open(&c2, port, "another chat, through every revocation")
            .await;
    }
}
