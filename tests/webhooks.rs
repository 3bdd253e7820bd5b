//! Signed, durable webhooks against a real receiver on loopback that verifies every delivery
//! with the Standard Webhooks reference library (Python `standardwebhooks`): bad targets are
//! refused with nothing written; every delivery verifies; a receiver that fails twice gets
//! the same `webhook-id` three times; the default payload carries no resume secret; a gate
//! killed while deliveries are pending delivers them after a restart, each exactly once to a
//! receiver that de-duplicates by `webhook-id`; two processes on one PostgreSQL send each
//! delivery once; `include_link` puts the card's secret in `card_url`'s fragment; a revoked
//! approval and a card left unanswered are reported (`approval.revoked`, `approval.expired`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::logged::{FAST_DELIVERY, Logged, wait_for};
use support::*;

/// The Python receiver, its files, and its port.
struct Receiver {
    log: Logged,
    port: u16,
}

impl Receiver {
    fn start(fail_first: u32, down: bool) -> Self {
        let mut log = Logged::new();
        std::fs::write(log.file("secret"), "").unwrap();
        if down {
            log.go_down();
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webhooks/receiver.py");
        let (child, port) = spawn_listening(
            Command::new("python3")
                .arg(script)
                .arg(log.file("secret"))
                .arg(log.file("log"))
                .arg(log.file("down"))
                .arg(fail_first.to_string()),
            "is standardwebhooks installed?",
        );
        log.child = Some(child);
        Self { log, port }
    }

    fn url(&self) -> String {
        format!("http://hooks.test:{}/in", self.port)
    }

    fn set_secret(&self, secret: &str) {
        std::fs::write(self.log.file("secret"), secret).unwrap();
    }

    fn come_up(&self) {
        self.log.come_up();
    }

    /// Waits (bounded) until `done` holds for the requests received; those requests.
    async fn wait(&self, secs: u64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_for(secs, || self.log.lines(), done).await
    }
}

/// A gate that may deliver to `hooks.test` on loopback, retrying fast.
fn hooks_gate(data: Option<tempfile::TempDir>) -> Gate {
    hooks_gate_on(gate(), data)
}

fn hooks_gate_on(g: GateBuilder, data: Option<tempfile::TempDir>) -> Gate {
    let mut g = g
        .resolve("hooks.test", "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.1/32"])
        .args(&FAST_DELIVERY);
    if let Some(d) = data {
        g = g.data_dir(d);
    }
    g.start()
}

async fn add_endpoint(api: &Api, rx: &Receiver, extra: Value) -> (String, String) {
    let mut body = json!({"url": rx.url(), "description": "test receiver"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = api.post("/v1/admin/webhooks", ADMIN, body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let secret = v["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    rx.set_secret(&secret);
    (v["id"].as_str().unwrap().to_owned(), secret)
}

fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| {
            serde_json::from_str::<Value>(r["body"].as_str().unwrap()).unwrap()["type"] == kind
        })
        .collect()
}

/// Waits (bounded) for a delivery of event `kind`; asserts exactly one came and it verified.
/// That delivery, and every request received by then.
async fn one_verified(rx: &Receiver, secs: u64, kind: &str) -> (Value, Vec<Value>) {
    let seen = rx.wait(secs, |r| !of_type(r, kind).is_empty()).await;
    let of_kind = of_type(&seen, kind);
    assert_eq!(of_kind.len(), 1, "one {kind}: {seen:?}");
    assert_eq!(of_kind[0]["verified"], true);
    let one = of_kind[0].clone();
    (one, seen)
}

#[tokio::test]
async fn bad_targets_are_refused_with_nothing_written() {
    let g = gate().resolve("hooks.test", "127.0.0.1").start();
    let api = g.api();
    for (body, says) in [
        (json!({"url": "ftp://hooks.test/in"}), "http or https"),
        (json!({"url": "https://u:p@hooks.test/in"}), "credentials"),
        (json!({"url": "http://127.0.0.1:9/in"}), "host name"),
        (json!({"url": "http://db.internal/in"}), "internal"),
        // Resolves to loopback, and no --allow-cidr allows it.
        (
            json!({"url": "http://hooks.test:9/in"}),
            "not a public address",
        ),
        (
            json!({"url": "https://hooks.example.com/", "events": ["approval.maybe"]}),
            "unknown event type",
        ),
    ] {
        let r = api.post("/v1/admin/webhooks", ADMIN, body.clone()).await;
        assert_eq!(r.status, 422, "{body}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "INVALID_INPUT");
        let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(says), "{body}: {message}");
    }
    let r = api.get("/v1/admin/webhooks", ADMIN).await;
    assert_eq!(r.json(), json!({"webhooks": []}));
    let audit = api.get("/v1/admin/audit?kind=admin_change", ADMIN).await;
    assert!(!audit.text().contains("webhook_added"), "{}", audit.text());
    let r = api.get("/v1/admin/webhooks", RUNTIME).await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn deliveries_verify_and_a_failing_receiver_gets_the_same_id_again() {
    let rx = Receiver::start(2, false);
    let g = hooks_gate(None);
    let api = g.api();
    let (hook, secret) = add_endpoint(&api, &rx, json!({})).await;
    let listed = api.get("/v1/admin/webhooks", ADMIN).await.json();
    assert_eq!(listed["webhooks"][0]["id"], hook.as_str());
    assert!(!listed.to_string().contains(&secret), "never listed");

    let turn = api.turn("alice", "c1", &[]).await;
    let (card, resume_secret) = ask(&api, &turn, &["https://data.example.com/x.csv"]).await;
    let seen = rx.wait(20, |r| r.len() >= 3).await;
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().all(|r| r["verified"] == true), "{seen:?}");
    assert!(seen.iter().all(|r| r["id"] == seen[0]["id"]), "{seen:?}");
    let body: Value = serde_json::from_str(seen[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["type"], "approval.requested");
    assert_eq!(body["data"]["interrupt_id"], card.as_str());
    assert_eq!(
        (
            body["data"]["user_id"].as_str(),
            body["data"]["chat_id"].as_str()
        ),
        (Some("alice"), Some("c1"))
    );
    assert!(body["data"]["card"]["urls"].is_array(), "{body}");
    assert!(body["data"]["expires_at"].is_string(), "{body}");
    assert_eq!(
        body["data"]["card_url"],
        format!("https://gate.example/ui/cards/{card}")
    );
    assert!(!seen[0]["body"].as_str().unwrap().contains(&resume_secret));

    let path = format!("/v1/admin/webhooks/{hook}/deliveries");
    let d = api.get(&path, ADMIN).await.json();
    let first = &d["deliveries"][0];
    assert_eq!(first["id"], seen[0]["id"]);
    assert_eq!(
        (first["status"].as_str(), first["attempts"].as_i64()),
        (Some("delivered"), Some(3))
    );
    assert_eq!(first["last_status"], 204);

    // The person approves: approval.resolved follows, signed, first time.
    approve_card(&api, &card, &resume_secret).await;
    one_verified(&rx, 10, "approval.resolved").await;
    let retry = format!("{path}/{}/retry", first["id"].as_str().unwrap());
    let r = api.post(&retry, ADMIN, json!({})).await;
    assert_eq!(
        r.json()["error"]["code"],
        "DELIVERY_NOT_FOUND",
        "{}",
        r.text()
    );
    let metrics = api.get("/metrics", ADMIN).await.text();
    assert!(
        metrics.contains(r#"egressgate_webhook_deliveries_total{outcome="retry"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("egressgate_webhook_deliveries_pending"),
        "{metrics}"
    );

    let r = api
        .call(
            "DELETE",
            &format!("/v1/admin/webhooks/{hook}"),
            Some(ADMIN),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 204);
    let r = api.get(&path, ADMIN).await;
    assert_eq!(r.json()["error"]["code"], "WEBHOOK_NOT_FOUND");
}

#[tokio::test]
async fn a_gate_killed_with_deliveries_pending_delivers_each_once_after_restart() {
    let rx = Receiver::start(0, true);
    let g = hooks_gate(None);
    let api = g.api();
    let (hook, _) = add_endpoint(&api, &rx, json!({"events": ["approval.requested"]})).await;
    let mut cards = Vec::new();
    for chat in ["c1", "c2", "c3"] {
        let turn = api.turn("bob", chat, &[]).await;
        cards.push(
            ask(&api, &turn, &["https://data.example.com/x.csv"])
                .await
                .0,
        );
    }
    // Each was tried at least once against the receiver that is down.
    rx.wait(20, |r| {
        let ids: std::collections::HashSet<_> = r.iter().map(|x| x["id"].clone()).collect();
        ids.len() == 3
    })
    .await;
    let data = g.kill();
    rx.come_up();
    let g = hooks_gate(Some(data));
    let api = g.api();
    let deliveries = format!("/v1/admin/webhooks/{hook}/deliveries");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut d;
    loop {
        d = api.get(&deliveries, ADMIN).await.json();
        let all = d["deliveries"].as_array().unwrap();
        if all.len() == 3 && all.iter().all(|x| x["status"] == "delivered") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all delivered: {d}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = rx.log.lines();
    assert!(seen.iter().all(|r| r["verified"] == true), "{seen:?}");
    // De-duplicated by webhook-id: each card's event exactly once.
    let mut by_id = std::collections::BTreeMap::new();
    for r in &seen {
        let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        by_id.insert(
            r["id"].as_str().unwrap().to_owned(),
            body["data"]["interrupt_id"].clone(),
        );
    }
    let mut got: Vec<String> = by_id
        .values()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    got.sort();
    cards.sort();
    assert_eq!(got, cards, "{seen:?}");
    assert!(seen.len() > 3, "the receiver was down at first: {seen:?}");
}

#[tokio::test]
async fn two_processes_on_one_postgresql_deliver_each_event_once_and_links_only_when_asked() {
    let pg = support::pg::PgCluster::start();
    let rx = Receiver::start(0, false);
    let (g1, g2) = (
        hooks_gate_on(gate().database(&pg.url()), None),
        hooks_gate_on(gate().database(&pg.url()), None),
    );
    let (a1, a2) = (g1.api(), g2.api());
    add_endpoint(
        &a1,
        &rx,
        json!({"include_link": true, "events": ["approval.requested"]}),
    )
    .await;
    let mut secrets = std::collections::BTreeMap::new();
    for (i, chat) in ["c1", "c2", "c3", "c4", "c5", "c6"].iter().enumerate() {
        let api = if i % 2 == 0 { &a1 } else { &a2 };
        let turn = api.turn("carol", chat, &[]).await;
        let (id, secret) = ask(api, &turn, &["https://data.example.com/x.csv"]).await;
        secrets.insert(id, secret);
    }
    let distinct = |r: &[Value]| {
        r.iter()
            .map(|x| x["id"].as_str().unwrap().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let seen = rx.wait(30, |r| distinct(r).len() >= 6).await;
    assert_eq!(distinct(&seen).len(), 6, "{seen:?}");
    assert!(seen.iter().all(|r| r["verified"] == true), "{seen:?}");
    // At least once; with one lock per delivery, each was in fact sent once here.
    assert_eq!(
        seen.len(),
        6,
        "a delivery was sent by both processes: {seen:?}"
    );
    for r in &seen {
        let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        let id = body["data"]["interrupt_id"].as_str().unwrap();
        assert_eq!(
            body["data"]["card_url"],
            format!("https://gate.example/ui/cards/{id}#secret={}", secrets[id]),
            "include_link puts the card's own secret in the fragment"
        );
    }
}

#[tokio::test]
async fn a_revoked_approval_and_a_card_left_unanswered_are_reported() {
    let rx = Receiver::start(0, false);
    let g = hooks_gate_on(gate().args(&["--interrupt-ttl", "2s"]), None);
    let api = g.api();
    add_endpoint(
        &api,
        &rx,
        json!({"events": ["approval.revoked", "approval.expired"]}),
    )
    .await;

    // Approved, then revoked by the runtime: one approval.revoked naming the row.
    let turn = api.turn("alice", "c1", &[]).await;
    let (card, secret) = ask(&api, &turn, &["https://data.example.com/x.csv"]).await;
    approve_card(&api, &card, &secret).await;
    let r = api.revoke("alice", "c1", "site", "data.example.com").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (revoked, _) = one_verified(&rx, 10, "approval.revoked").await;
    let body: Value = serde_json::from_str(revoked["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (
            body["data"]["user_id"].as_str(),
            body["data"]["chat_id"].as_str()
        ),
        (Some("alice"), Some("c1")),
        "{body}"
    );
    assert!(body.to_string().contains("data.example.com"), "{body}");

    // Asked in another chat and never answered: approval.expired once its two seconds pass,
    // without the secret, and only the filtered events reach this endpoint.
    let turn = api.turn("alice", "c2", &[]).await;
    let (card, secret) = ask(&api, &turn, &["https://late.example.com/y.csv"]).await;
    let (expired, seen) = one_verified(&rx, 20, "approval.expired").await;
    let text = expired["body"].as_str().unwrap();
    let body: Value = serde_json::from_str(text).unwrap();
    assert_eq!(body["data"]["interrupt_id"], card.as_str(), "{body}");
    assert!(!text.contains(&secret), "no resume secret in {text}");
    assert!(
        of_type(&seen, "approval.requested").is_empty()
            && of_type(&seen, "approval.resolved").is_empty(),
        "only the events the endpoint asked for: {seen:?}"
    );
}
