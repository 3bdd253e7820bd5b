//! The approval tool (`POST /v1/turns/{turn_id}/approval-requests`) through the real router:
//! one test per row of the design's outcome table from step 2 on, plus their order, the merge
//! of refused hosts, dropping what is granted, deterministic denials, and drafts. Step 1 (what
//! the tool refuses before it looks at any grant) is in `approval_tool_input.rs`. Longer than
//! most suites because the outcome table has that many rows, each a test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::time::Duration;

use axum::http::StatusCode;
use cards::ask;
use egressgate_store::{DraftId, RefusalReason};
use serde_json::{Value, json};
use support::{TestApp, assert_error};

const NOTHING: &str =
    "name the URLs or packages, or run the step first so the blocked sites are recorded";

const NOTHING_TO_APPROVE: (StatusCode, &str) =
    (StatusCode::UNPROCESSABLE_ENTITY, "NOTHING_TO_APPROVE");

async fn drafts(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM drafts").await
}

// Steps 2 and 7.
#[tokio::test]
async fn step2_merges_refused_not_approved_hosts_and_step7_asks_with_a_sorted_card() {
    let app = TestApp::new().await;
    let t = app.open_turn("u", "c", true).await;
    app.refuse_unapproved(&t.turn_id, "pypi.org").await;
    app.refuse(
        &t.turn_id,
        "cdn.example.net",
        80,
        RefusalReason::NotApproved,
        Some("http://cdn.example.net/x"),
    )
    .await;
    app.refuse_for(
        &t.turn_id,
        "blocked.example.net",
        RefusalReason::PrivateAddress,
    )
    .await;
    app.refuse_for(&t.turn_id, "10.0.0.1", RefusalReason::IpLiteral)
        .await;
    let other = app.open_turn("u", "c2", true).await;
    app.refuse_unapproved(&other.turn_id, "other-turn.example.net")
        .await;

    let (s, b) = ask(
        &app,
        &t.turn_id,
        json!({
            "reason": "  Download the 2024 census table.  ",
            "urls": ["https://Files.Example.com/census.csv?token=SECRET#part", "https://files.example.com/census.csv"],
            "packages": ["Pandas", "npm:left-pad", "pandas"],
            "tool_call_id": "toolu_01",
        }),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["outcome"], "ask");
    // The evidence carries the record's times: compared apart, with the times checked for
    // form and order only.
    let mut card = b["card"].clone();
    let mut evidence = card
        .as_object_mut()
        .and_then(|c| c.remove("evidence"))
        .expect("evidence");
    assert_eq!(
        card,
        json!({
            "sites": ["cdn.example.net", "files.example.com", "pypi.org"],
            "urls": ["https://files.example.com/census.csv"],
            "packages": ["npm:left-pad", "pandas"],
            "reason": "Download the 2024 census table.",
        })
    );
    for e in evidence.as_array_mut().expect("a list") {
        let times = (e["first_at"].take(), e["last_at"].take());
        if let (Some(first), Some(last)) = (times.0.as_str(), times.1.as_str()) {
            assert!(first.ends_with('Z') && first <= last, "{first} {last}");
        } else {
            assert_eq!(times, (Value::Null, Value::Null));
        }
    }
    let when = json!(null);
    assert_eq!(
        evidence,
        json!([
            {"host": "cdn.example.net", "port": 80, "method": null, "url": "http://cdn.example.net/x",
             "package": null, "reason": "not_approved", "count": 1, "first_at": when, "last_at": when},
            {"host": "pypi.org", "port": 443, "method": null, "url": null,
             "package": null, "reason": "not_approved", "count": 1, "first_at": when, "last_at": when},
            {"host": "files.example.com", "port": 443, "method": null,
             "url": "https://files.example.com/census.csv", "package": null, "reason": null,
             "count": 0, "first_at": null, "last_at": null, "tried": false},
        ]),
        "what was tried for the card's sites (not the unfixable refusals, not another \
         turn's), then the named URL nothing tried"
    );
    assert!(!b.to_string().contains("SECRET"));
    let draft_id = DraftId::parse(b["draft_id"].as_str().unwrap()).expect("dr_ id");
    let draft = app.store.draft(&draft_id).await.unwrap().expect("stored");
    assert_eq!(draft.turn.as_str(), t.turn_id);
    assert_eq!((draft.user.as_str(), draft.chat.as_str()), ("u", "c"));
    assert_eq!(serde_json::to_value(&draft.card).unwrap(), b["card"]);
    assert_eq!(draft.tool_call_id.as_deref(), Some("toolu_01"));
    assert_eq!(draft.used_at, None);
    assert_eq!(
        Some(draft.expires_at.rfc3339().as_str()),
        t.body["expires_at"].as_str(),
        "expires with the turn"
    );

    // A second call is a fresh question: a new draft with the same card.
    let (_, b2) = ask(&app, &t.turn_id, json!({"reason": "Download the 2024 census table.", "urls": ["https://files.example.com/census.csv"], "packages": ["pandas", "npm:left-pad"]})).await;
    assert_eq!(b2["card"], b["card"]);
    assert_ne!(b2["draft_id"], b["draft_id"]);
}

#[tokio::test]
async fn an_empty_call_asks_for_what_the_sandbox_was_refused() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    app.refuse_unapproved(&t, "pypi.org").await;
    let (s, b) = ask(&app, &t, json!({"reason": "install deps"})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["outcome"], "ask");
    assert_eq!(b["card"]["sites"], json!(["pypi.org"]));
    assert_eq!(b["card"]["urls"], json!([]));
}

// Step 3.
#[tokio::test]
async fn step3_nothing_named_and_nothing_refused() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    for body in [
        json!({"reason": "r"}),
        json!({"reason": "r", "urls": [], "packages": []}),
    ] {
        let (s, b) = ask(&app, &t, body).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            b,
            json!({"error": {"code": "NOTHING_TO_APPROVE", "message": NOTHING}})
        );
    }
    // Refusals no approval fixes are not something to approve either.
    app.refuse(
        &t,
        "x.example.com",
        8443,
        RefusalReason::PortNotAllowed,
        None,
    )
    .await;
    let (s, b) = ask(&app, &t, json!({"reason": "r"})).await;
    assert_error(s, &b, NOTHING_TO_APPROVE, "only a port refused");
    // ... and the message says why, instead of asking the model to run the step again.
    assert_eq!(
        b["error"]["message"],
        "everything refused this turn is refused for a reason no approval can fix: \
         x.example.com (port_not_allowed). Running the step again will be refused again; name \
         the URLs or packages you need if they are others. Do not try to get around the proxy. \
         Continue without that data and say so."
    );
    // Nor are another turn's refusals.
    let t2 = app.turn("u", "c").await;
    app.refuse_unapproved(&t, "pypi.org").await;
    let (s, b) = ask(&app, &t2, json!({"reason": "r"})).await;
    assert_error(s, &b, NOTHING_TO_APPROVE, "another turn's refusal");
    assert_eq!(drafts(&app).await, 0);
}

// Step 4.
#[tokio::test]
async fn step4_a_named_host_refused_for_an_unfixable_reason_is_not_approvable() {
    let app = TestApp::new().await;
    let t = app.open_turn("u", "c", false).await;
    app.refuse_for(
        &t.turn_id,
        "files.example.com",
        RefusalReason::PrivateAddress,
    )
    .await;
    app.refuse_unapproved(&t.turn_id, "pypi.org").await;
    let body = json!({"reason": "r", "urls": ["https://files.example.com/a", "https://other.example.com/"]});
    let (s, b) = ask(&app, &t.turn_id, body.clone()).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["outcome"], "denied");
    assert_eq!(
        b["code"], "NOT_APPROVABLE",
        "step 4 answers before step 6 (no human): {b}"
    );
    let m = b["message"].as_str().unwrap();
    assert!(m.contains("files.example.com (private_address)"), "{m}");
    assert!(
        !m.contains("other.example.com") && !m.contains("pypi.org"),
        "{m}"
    );
    assert_eq!(ask(&app, &t.turn_id, body).await.1, b, "deterministic");
    // The same host refused only in the merge (not named) does not block the request.
    let (_, b) = ask(
        &app,
        &t.turn_id,
        json!({"reason": "r", "urls": ["https://other.example.com/"]}),
    )
    .await;
    assert_eq!(b["code"], "NO_HUMAN", "{b}");
    assert_eq!(drafts(&app).await, 0);
}

// Step 5.
#[tokio::test]
async fn step5_already_approved_by_admin_launch_or_chat_grants() {
    let app = TestApp::new().await;
    app.admin_site("*.example.com").await;
    app.admin_package("numpy").await;
    let t = app
        .open_turn_with(
            "u",
            "c",
            false,
            json!({"sites": ["pypi.org"], "packages": ["pandas"]}),
        )
        .await;
    app.insert_approvals(&[
        (
            "u",
            "c",
            "site",
            "data.example.org",
            Duration::from_secs(3600),
        ),
        ("u", "c", "package", "requests", Duration::from_secs(3600)),
    ])
    .await;
    app.refuse_unapproved(&t.turn_id, "pypi.org").await;

    let body = json!({
        "reason": "r",
        "urls": ["https://files.example.com/a", "https://DATA.example.org/b", "https://pypi.org/simple/"],
        "packages": ["NumPy", "pandas", "Requests"],
    });
    let (s, b) = ask(&app, &t.turn_id, body).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        b,
        json!({"outcome": "already_approved", "message": "already approved: run it"}),
        "step 5 answers before step 6 (no human)"
    );
    assert_eq!(drafts(&app).await, 0);
}

#[tokio::test]
async fn step5_drops_only_what_is_granted_to_this_chat_and_still_valid() {
    let app = TestApp::new().await;
    app.admin_site("*.example.com").await;
    let t = app.turn("u", "c").await;
    let hour = Duration::from_secs(3600);
    app.insert_approvals(&[
        ("u", "c", "site", "mine.example.org", hour),
        ("u", "c", "site", "stale.example.org", Duration::ZERO),
        ("u", "other-chat", "site", "other-chat.example.org", hour),
        ("someone-else", "c", "site", "other-user.example.org", hour),
    ])
    .await;
    let (s, b) = ask(
        &app,
        &t,
        json!({"reason": "r", "urls": [
            "https://example.com/apex-is-not-covered-by-the-wildcard",
            "https://a.example.com/covered",
            "https://mine.example.org/",
            "https://stale.example.org/",
            "https://other-chat.example.org/",
            "https://other-user.example.org/",
        ]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["outcome"], "ask");
    assert_eq!(
        b["card"]["sites"],
        json!([
            "example.com",
            "other-chat.example.org",
            "other-user.example.org",
            "stale.example.org"
        ])
    );
    assert_eq!(
        b["card"]["urls"],
        json!([
            "https://example.com/apex-is-not-covered-by-the-wildcard",
            "https://other-chat.example.org/",
            "https://other-user.example.org/",
            "https://stale.example.org/",
        ])
    );
}

#[tokio::test]
async fn launch_sites_count_only_for_their_own_turn() {
    let app = TestApp::new().await;
    let t1 = app.turn_with_sites("u", "c", &["*.example.com"]).await;
    let t2 = app.turn("u", "c").await;
    let body = json!({"reason": "r", "urls": ["https://files.example.com/"]});
    let (_, b1) = ask(&app, &t1, body.clone()).await;
    assert_eq!(b1["outcome"], "already_approved");
    let (_, b2) = ask(&app, &t2, body).await;
    assert_eq!(b2["outcome"], "ask", "{b2}");
}

// Step 6.
#[tokio::test]
async fn step6_no_human_is_a_fixed_sorted_text_byte_identical_across_calls() {
    let app = TestApp::new().await;
    let t = app.open_turn("u", "c", false).await;
    app.refuse_unapproved(&t.turn_id, "pypi.org").await;
    let body = json!({"reason": "any reason", "urls": ["https://z.example.net/", "https://a.example.net/x?q=1"], "packages": ["requests", "Flask"]});
    let (s1, first) = ask(&app, &t.turn_id, body.clone()).await;
    let (s2, second) = ask(&app, &t.turn_id, body).await;
    let (first, second) = (first.to_string(), second.to_string());
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK));
    assert_eq!(first, second, "byte-identical");
    let b: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(b["outcome"], "denied");
    assert_eq!(b["code"], "NO_HUMAN");
    assert_eq!(
        b["message"],
        "No person can answer an approval request in this run, so these stay blocked: \
         sites a.example.net, pypi.org and z.example.net; packages flask and requests. \
         Continue without that data and say so."
    );
    // The reason never changes the text: it is a template over sorted lists.
    let (_, other) = ask(&app, &t.turn_id, json!({"reason": "different", "urls": ["https://a.example.net/", "https://z.example.net/y"], "packages": ["flask", "requests"]})).await;
    assert_eq!(other.to_string(), first);
    assert_eq!(drafts(&app).await, 0);
}

#[tokio::test]
async fn step6_a_user_who_may_not_approve_is_not_permitted() {
    let app = TestApp::new().await;
    assert_eq!(app.set_can_approve("bob", false).await, StatusCode::OK);
    let t = app.turn("bob", "c").await;
    let body = json!({"reason": "r", "packages": ["requests"]});
    let (s, b) = ask(&app, &t, body.clone()).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["outcome"], "denied");
    assert_eq!(b["code"], "NOT_PERMITTED");
    let m = b["message"].as_str().unwrap();
    assert!(
        m.contains("packages requests") && m.ends_with("Continue without that data and say so."),
        "{m}"
    );
    assert_eq!(ask(&app, &t, body.clone()).await.1, b);
    // Alice (no row, default true) may ask in the same chat id.
    let ta = app.turn("alice", "c").await;
    assert_eq!(ask(&app, &ta, body.clone()).await.1["outcome"], "ask");
    // Permission restored: the same turn asks.
    app.set_can_approve("bob", true).await;
    assert_eq!(ask(&app, &t, body).await.1["outcome"], "ask");
}

#[tokio::test]
async fn step6_default_can_approve_false_applies_to_users_without_a_row() {
    let app = TestApp::configured(|s| s.default_can_approve = false).await;
    app.set_can_approve("trusted", true).await;
    let body = json!({"reason": "r", "urls": ["https://files.example.com/"]});
    let t = app.turn("anyone", "c").await;
    let (_, b) = ask(&app, &t, body.clone()).await;
    assert_eq!(b["code"], "NOT_PERMITTED", "{b}");
    let t = app.turn("trusted", "c").await;
    let (_, b) = ask(&app, &t, body).await;
    assert_eq!(b["outcome"], "ask", "{b}");
}

#[tokio::test]
async fn refused_packages_are_merged_into_the_card_one_row_each_and_capped() {
    let app = TestApp::configured(|s| s.card_caps.packages = 3).await;
    let t = app.turn("u", "c").await;
    for p in ["numpy", "scipy", "npm:left-pad", "pandas"] {
        app.refuse_package(&t, "pypi.org", p).await;
    }
    app.refuse_package(&t, "pypi.org", "numpy").await;
    // The record keeps one row per package, each naming it.
    let (_, rec) = app.turn_get(&t, "refusals").await;
    let rows = rec["refusals"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rec}");
    let numpy = rows.iter().find(|r| r["package"] == "numpy").unwrap();
    assert_eq!(
        (numpy["count"].as_i64(), &numpy["approvable"]),
        (Some(2), &json!(true))
    );
    // Nothing named: the card lists the refused packages, the named one first in the cap,
    // never the registry host as a site.
    let (s, b) = ask(&app, &t, json!({"reason": "r", "packages": ["requests"]})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["outcome"], "ask", "{b}");
    assert_eq!(
        b["card"]["packages"],
        json!(["npm:left-pad", "numpy", "requests"]),
        "{b}"
    );
    assert_eq!(b["card"]["sites"], json!([]), "{b}");
    // An approved package leaves the card.
    let (s, _) = app.admin_package("numpy").await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, b) = ask(&app, &t, json!({"reason": "r"})).await;
    assert_eq!(
        b["card"]["packages"],
        json!(["npm:left-pad", "pandas", "scipy"]),
        "{b}"
    );
}
