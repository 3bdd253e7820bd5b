//! Shadow mode, per deployment (`--mode shadow`) and per user (`PUT /v1/admin/users/{id}`
//! `{"mode"}`): a would-be policy refusal is recorded with `shadow: true`, logged with
//! `shadow=true`, and the request goes ahead; `ip_literal`, `internal_name`,
//! `private_address` and `sni_mismatch` are refused as ever.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;
use tokio::io::AsyncWriteExt as _;

const INSIDE: &str = "inside.example.com";

fn refusal_row<'a>(rec: &'a serde_json::Value, host: &str, reason: &str) -> &'a serde_json::Value {
    rec["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["host"] == host && r["reason"] == reason)
        .unwrap_or_else(|| panic!("no {reason} row for {host}: {rec}"))
}

/// The bytes a rustls client sends first: its ClientHello naming `sni`.
fn client_hello(sni: &str) -> Vec<u8> {
    support::hello::client_hello(pki(&[sni]).client(), Some(sni))
}

#[tokio::test]
async fn a_shadow_deployment_records_policy_refusals_and_lets_them_through() {
    let o = origin().await;
    let port = o.port();
    let g = gate()
        // No --allow-cidr for INSIDE: its address is private, which is never shadowed.
        .answers(&[(FILES, "127.0.0.1"), (INSIDE, "10.0.0.1")])
        .args(&["--allow-cidr", "127.0.0.0/8=files.example.com"])
        .ports(&[port])
        .args(&["--mode", "shadow"])
        .start();
    let api = g.api();
    let turn = g.turn("alice", "c1").await;

    // not_approved: shadowed, so the origin is reached.
    let url = o.url(FILES, "/data.csv");
    let r = g.get(&turn, &url).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "origin says hi");
    let rec = api.refusals(&turn).await;
    let row = refusal_row(&rec, FILES, "not_approved");
    assert_eq!(row["shadow"], true, "{row}");
    assert_eq!(row["count"], 1);
    // A CONNECT is shadowed the same way.
    let (r, mut tunnel) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        get_over(&mut tunnel, &o.at(FILES)).await.unwrap().status,
        200
    );
    let shadow_line = g
        .log_line(&["shadow=true", "reason=\"not_approved\""])
        .await;
    assert!(
        shadow_line.is_some(),
        "the would-be refusal is logged with shadow=true: {:?}",
        g.log_lines("proxy decision")
    );

    // The agent was never refused: nothing to ask a person for.
    let r = approval_request(&api, &turn, json!({"reason": "needs the data"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "NOTHING_TO_APPROVE");

    // ip_literal, internal_name and private_address are never shadowed.
    let r = g.get(&turn, &format!("http://127.0.0.1:{port}/")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-egress-refused"), Some("ip_literal"));
    let r = g.get(&turn, &format!("http://db.internal:{port}/")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-egress-refused"), Some("internal_name"));
    let r = g.get(&turn, &format!("http://{INSIDE}:{port}/")).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("private_address"));
    let rec = api.refusals(&turn).await;
    for (host, reason) in [
        ("127.0.0.1", "ip_literal"),
        ("db.internal", "internal_name"),
        (INSIDE, "private_address"),
    ] {
        let row = refusal_row(&rec, host, reason);
        assert!(row.get("shadow").is_none(), "{reason} is enforced: {row}");
    }

    // sni_mismatch: a tunnel to FILES whose ClientHello names another host is closed.
    let (r, mut tunnel) = connect(g.proxy(), &turn, &format!("{FILES}:{port}")).await;
    assert_eq!(r.status, 200);
    tunnel
        .write_all(&client_hello("other.example.org"))
        .await
        .unwrap();
    assert!(
        wait_closed(&mut tunnel, 5).await.is_ok(),
        "fronting is refused"
    );
    let row = assert_recorded(&api, &turn, "sni_mismatch").await;
    assert!(row.get("shadow").is_none(), "{row}");
}

#[tokio::test]
async fn a_users_own_mode_wins_and_takes_effect_on_open_turns() {
    let o = origin().await;
    let g = gate().reach_as(&o, &[FILES]).ready().await;
    let api = g.api();
    let url = o.url(FILES, "/data.csv");
    let alice = g.turn("alice", "c1").await;
    let bob = g.turn("bob", "c1").await;
    assert_eq!(g.get(&alice, &url).await.status, 403);

    let r = api.set_user("alice", json!({"mode": "shadow"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"user_id": "alice", "mode": "shadow"}));
    // Alice's open turn is re-read after the change (one poll), then shadowed.
    let shadowed = eventually(Duration::from_secs(2), async || {
        let status = g.get(&alice, &url).await.status;
        assert!(status == 200 || status == 403, "{status}");
        status == 200
    })
    .await;
    assert!(shadowed, "the user's mode never reached the proxy");
    let rec = api.refusals(&alice).await;
    assert_eq!(refusal_row(&rec, FILES, "not_approved")["shadow"], true);
    // Bob stays enforced.
    let r = g.get(&bob, &url).await;
    assert_eq!(r.status, 403);
    let rec = api.refusals(&bob).await;
    assert!(
        refusal_row(&rec, FILES, "not_approved")
            .get("shadow")
            .is_none()
    );

    // Back to enforce: refused again.
    let r = api.set_user("alice", json!({"mode": "enforce"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let enforced = eventually(Duration::from_secs(2), async || {
        g.status_or_cut(&alice, &url).await == Some(403)
    })
    .await;
    assert!(enforced, "enforce never came back");
    let audit = api.audit("admin_change").await.text();
    assert!(audit.contains("\"mode\":\"shadow\""), "{audit}");
}

#[tokio::test]
async fn a_bad_mode_is_refused_and_changes_nothing() {
    let g = gate().start();
    let api = g.api();
    let before = api.audit("admin_change").await.text();
    for (body, status, code) in [
        (json!({"mode": "audit"}), 422, "INVALID_INPUT"),
        (
            json!({"mode": "Shadow", "can_approve": false}),
            422,
            "INVALID_INPUT",
        ),
        (json!({}), 422, "INVALID_INPUT"),
        (json!({"mode": 1}), 400, "INVALID_BODY"),
        (
            json!({"mode": "shadow", "colour": "red"}),
            400,
            "INVALID_BODY",
        ),
    ] {
        let r = api.set_user("alice", body.clone()).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], code, "{body}");
    }
    let r = api.set_user("alice", json!({"mode": "audit"})).await;
    assert!(
        r.text().contains("enforce"),
        "the error names the choices: {}",
        r.text()
    );
    let after = api.audit("admin_change").await.text();
    assert_eq!(before, after, "nothing was written");
}

#[test]
fn a_bad_deployment_mode_is_one_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let e = serve_failure(&["--mode", "audit"], &dir.path().join("d"));
    assert!(e.contains("--mode") && e.contains("audit"), "{e}");
    assert!(!dir.path().join("d").exists(), "nothing was written: {e}");
}
