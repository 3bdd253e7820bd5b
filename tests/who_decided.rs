//! Who decided: a resume relayed by the runtime names the person (`X-Egressgate-User` with the
//! runtime token) and the audit row of the decision says so; a resume with only the secret is
//! audited as such. Another user's name, or an unreadable one, is refused and writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::*;

const FILES: &str = "files.example.com";

async fn resume(api: &Api, id: &str, secret: &str, user: Option<&str>) -> Resp {
    let token = user.map(|_| RUNTIME);
    api.call(
        "POST",
        &format!("/v1/interrupts/{id}/resume"),
        token,
        user,
        Some(&resume_body(
            id,
            secret,
            "resolved",
            json!({"approved": true}),
        )),
    )
    .await
}

async fn decisions(api: &Api) -> Vec<Value> {
    let r = api
        .get("/v1/admin/audit?kind=approval_resolved", ADMIN)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["audit"].as_array().unwrap().clone()
}

fn row_for<'a>(rows: &'a [Value], id: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["interrupt_id"] == id)
        .unwrap_or_else(|| panic!("no approval_resolved row for {id}: {rows:?}"))
}

#[tokio::test]
async fn the_audit_names_the_person_or_says_only_the_secret_was_presented() {
    let g = gate().resolve(FILES, "127.0.0.1").start();
    let api = g.api();
    let url = format!("http://{FILES}/data.csv");
    let t1 = g.turn("alice", "c1").await;
    let t2 = g.turn("alice", "c2").await;
    let (a, a_secret) = ask(&api, &t1, &[&url]).await;
    let (b, b_secret) = ask(&api, &t2, &[&url]).await;

    // Another user named by the runtime: answered as if the card did not exist; nothing kept.
    let r = resume(&api, &a, &a_secret, Some("mallory")).await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INTERRUPT_NOT_FOUND");
    // An unreadable name is refused, not treated as anonymous.
    let too_long = "u".repeat(300);
    let r = resume(&api, &a, &a_secret, Some(&too_long)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "MISSING_USER");
    assert!(decisions(&api).await.is_empty(), "nothing was decided yet");

    // The runtime relays alice's click.
    let r = resume(&api, &a, &a_secret, Some("alice")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Only the secret for the other card.
    let r = resume(&api, &b, &b_secret, None).await;
    assert_eq!(r.status, 200, "{}", r.text());

    let rows = decisions(&api).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let ra = row_for(&rows, &a);
    assert_eq!(ra["actor"], "user:alice", "{ra}");
    assert_eq!(ra["detail"]["decided_by"], "alice", "{ra}");
    assert_eq!(ra["detail"]["proof"], "runtime_user", "{ra}");
    assert_eq!(ra["detail"]["decision"]["outcome"], "approved", "{ra}");
    let rb = row_for(&rows, &b);
    assert_eq!(rb["actor"], "resume-secret", "{rb}");
    assert_eq!(rb["detail"]["decided_by"], Value::Null, "{rb}");
    assert_eq!(rb["detail"]["proof"], "resume_secret", "{rb}");
    assert!(
        !rows.iter().any(|r| r.to_string().contains(&a_secret)),
        "the secret is never audited"
    );
}
