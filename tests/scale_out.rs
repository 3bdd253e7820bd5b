//! Scale-out on PostgreSQL with real processes: two proxies and two control planes share one
//! database. The full loop runs with each step on a different process; concurrent resumes
//! sent to different control processes still claim once; a control process killed while
//! holding a claim is taken over after its lease; a revocation reaches another process's
//! proxy cache within one poll.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::pg::PgCluster;
use support::*;

const FILES: &str = "files.example.com";
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
    let port = origin.addr.port().to_string();
    let proxy = |_: u8| {
        gate()
            .subcommand("proxy")
            .database(&pg.url())
            .resolve(FILES, "127.0.0.1")
            .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &port])
            .start()
    };
    let p1 = proxy(1);
    let p2 = proxy(2);
    let public = p1.proxy().to_string();
    let control = |_: u8| {
        gate()
            .subcommand("control")
            .database(&pg.url())
            .args(&["--proxy-public-url", &public, "--lease", lease])
            .start()
    };
    let a = control(1);
    let b = control(2);
    let url = format!("http://{FILES}:{port}/data.csv");
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
    let r = api
        .post(
            &format!("/v1/turns/{}/approval-requests", turn.id),
            RUNTIME,
            json!({"reason": "needs the data"}),
        )
        .await;
    assert_eq!(r.json()["outcome"], "ask", "{}", r.text());
    // The paused agent's snapshot goes to the blob store, which follows the database here,
    // so any control process can hand it back on resume.
    let r = api
        .post(
            "/v1/interrupts",
            RUNTIME,
            json!({"draft_id": r.json()["draft_id"], "snapshot": SNAPSHOT}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        v["interrupt"]["id"].as_str().unwrap().into(),
        v["resume_secret"].as_str().unwrap().into(),
    )
}

async fn resume(api: &Api, id: &str, secret: &str) -> Resp {
    api.call(
        "POST",
        &format!("/v1/interrupts/{id}/resume"),
        None,
        None,
        Some(&resume_body(
            id,
            secret,
            "resolved",
            json!({"approved": true}),
        )),
    )
    .await
}

#[tokio::test]
async fn full_loop_with_each_step_on_a_different_process() {
    let f = fleet("30s").await;
    let (a, b) = (f.a.api(), f.b.api());
    let turn = a.turn("alice", "c1", &[]).await; // control A opens the turn
    assert_eq!(proxy_get(f.p1.proxy(), &turn, &f.url).await.status, 403); // proxy 1 refuses and records
    let (id, secret) = card(&b, &turn).await; // control B sees the refusal, drafts and registers
    let r = resume(&a, &id, &secret).await; // control A resumes the card registered on B
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"]["outcome"], "approved");
    assert_eq!(
        r.json()["snapshot"],
        SNAPSHOT,
        "the snapshot written through B is read back through A"
    );
    let got = proxy_get(f.p2.proxy(), &turn, &f.url).await; // proxy 2 honours it on the next request
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(f.origin.requests().len(), 1);

    // Revocation through B reaches proxy 2's cache (allowed just now) within one poll.
    let r = b
        .call(
            "DELETE",
            &format!("/v1/chats/c1/approvals/site/{FILES}"),
            Some(RUNTIME),
            Some("alice"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t = Instant::now();
    let mut refused = false;
    while t.elapsed() < Duration::from_secs(5) {
        if proxy_get(f.p2.proxy(), &turn, &f.url).await.status == 403 {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
    let turn = a.turn("bob", "c1", &[]).await;
    assert_eq!(proxy_get(f.p1.proxy(), &turn, &f.url).await.status, 403);
    let (id, secret) = card(&a, &turn).await;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let api = if i % 2 == 0 { a } else { b };
        let (id, secret) = (id.clone(), secret.clone());
        tasks.push(tokio::spawn(async move {
            resume(&api, &id, &secret).await.status
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
    let turn = a.turn("carol", "c1", &[]).await;
    assert_eq!(proxy_get(f.p1.proxy(), &turn, &f.url).await.status, 403);
    let (id, secret) = card(&a, &turn).await;
    let first = resume(&f.b.api(), &id, &secret).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let dead_claim = first.json()["claim"]["claim_id"].clone();
    let _ = f.b.kill(); // kill -9 of the worker holding the claim
    assert_eq!(
        resume(&a, &id, &secret).await.status,
        409,
        "the lease is still live"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await; // the lease (1s) lapses
    let second = resume(&a, &id, &secret).await;
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
    assert_eq!(proxy_get(f.p2.proxy(), &turn, &f.url).await.status, 200);
}

/// Every kind of revocation, made through one control process, closes the open tunnels and
/// keep-alive connections that relied on it on both proxies within one second, while another
/// chat's connections to the same host stay open throughout.
#[tokio::test]
async fn revocations_close_open_connections_on_every_proxy() {
    use support::held::{Held, approve};
    let f = fleet("30s").await;
    let (a, b) = (f.a.api(), f.b.api());
    let port = f.origin.addr.port();
    let proxies = [f.p1.proxy(), f.p2.proxy()];
    let open_on_both = async |turn: &Turn| {
        let mut held = Vec::new();
        for p in proxies {
            held.push(Held::open(p, turn, port).await);
        }
        held
    };
    let closed_within_a_second = async |held: &mut Vec<Held>, since: Instant, what: &str| {
        for h in held.iter_mut() {
            h.assert_closed_within_a_second(since, what).await;
        }
    };
    let c1 = a.turn("alice", "c1", &[]).await;
    let c2 = a.turn("alice", "c2", &[]).await;
    let bob = a.turn("bob", "b1", &[]).await;
    for t in [&c1, &c2, &bob] {
        approve(&a, t, port).await;
    }
    let mut stays = open_on_both(&c2).await;

    // An approval revoked.
    let mut held = open_on_both(&c1).await;
    let r = b
        .call(
            "DELETE",
            &format!("/v1/chats/c1/approvals/site/{FILES}"),
            Some(RUNTIME),
            Some("alice"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    closed_within_a_second(&mut held, Instant::now(), "revoked approval").await;
    assert_eq!(proxy_get(f.p2.proxy(), &c1, &f.url).await.status, 403);

    // An admin site removed (chat c3 reached the host through it alone).
    a.admin_site(FILES).await;
    let c3 = a.turn("alice", "c3", &[]).await;
    let mut held = open_on_both(&c3).await;
    let r = b
        .call(
            "DELETE",
            &format!("/v1/admin/sites/{FILES}"),
            Some(ADMIN),
            None,
            None,
        )
        .await;
    assert!(r.status < 300, "{}", r.text());
    closed_within_a_second(&mut held, Instant::now(), "removed admin site").await;
    assert_eq!(proxy_get(f.p1.proxy(), &c3, &f.url).await.status, 403);

    // A chat hidden (its turn had the host as a launch-time site).
    let c4 = a.turn("alice", "c4", &[FILES]).await;
    let mut held = open_on_both(&c4).await;
    let r = b
        .call("DELETE", "/v1/chats/c4", Some(RUNTIME), Some("alice"), None)
        .await;
    assert!(r.status < 300, "{}", r.text());
    closed_within_a_second(&mut held, Instant::now(), "hidden chat").await;
    assert_eq!(proxy_get(f.p2.proxy(), &c4, &f.url).await.status, 407);

    // A user losing can_approve.
    let mut held = open_on_both(&bob).await;
    let r = b
        .call(
            "PUT",
            "/v1/admin/users/bob",
            Some(ADMIN),
            None,
            Some(&json!({"can_approve": false}).to_string()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    closed_within_a_second(&mut held, Instant::now(), "can_approve lost").await;
    assert_eq!(proxy_get(f.p1.proxy(), &bob, &f.url).await.status, 403);

    for h in &mut stays {
        h.assert_open(&c2, port, "another chat, through every revocation")
            .await;
    }
}
