//! The person's side through the real binary, without a browser: the card read by secret
//! (identical 404s, 410 when expired), a page's click taken over by the runtime exactly once,
//! and the pending-cards list. The chat event stream is `person_side_events.rs`; the admin
//! console (session, CSRF, dry run, security headers) `person_side_console.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::person::{page_resume, raw, refused_card, runtime_as, setup, with_turn};
use support::*;

#[tokio::test]
async fn the_card_is_shown_only_for_its_secret() {
    let (g, o, turn) = with_turn("alice", "c1").await;
    let api = g.api();
    let url = o.url(FILES, "/data.csv?token=x");
    let (id, secret) = refused_card(&g, &turn, &url, &["requests"]).await;
    let view = |id: String, body: String, user: Option<&'static str>| async move {
        let h = user.map(|u| runtime_as(u, &[])).unwrap_or_default();
        raw(
            &api,
            "POST",
            &format!("/v1/interrupts/{id}/view"),
            &h,
            &body,
        )
        .await
    };
    let ok = view(id.clone(), json!({"secret": secret}).to_string(), None).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let v = ok.json();
    assert_eq!(v["state"], "pending");
    assert_eq!(v["card"]["sites"], json!([FILES]));
    assert_eq!(v["card"]["packages"], json!(["requests"]));
    assert!(v["message"].as_str().unwrap().contains(FILES), "{v}");
    assert!(v["expires_at"].is_string() && v["decision"].is_null());
    assert!(!ok.text().contains(&secret), "the secret is never echoed");
    // Unknown id, wrong secret, another user: one identical answer.
    let unknown = view(
        "int_doesnotexist".into(),
        json!({"secret": secret}).to_string(),
        None,
    )
    .await;
    let wrong = view(id.clone(), json!({"secret": "nope"}).to_string(), None).await;
    let other = view(
        id.clone(),
        json!({"secret": secret}).to_string(),
        Some("mallory"),
    )
    .await;
    for r in [&unknown, &wrong, &other] {
        assert_eq!(r.status, 404, "{}", r.text());
        assert_eq!(r.body, unknown.body);
        assert_eq!(r.json()["error"]["code"], "INTERRUPT_NOT_FOUND");
        assert!(
            !r.text().contains(FILES),
            "nothing of the card: {}",
            r.text()
        );
    }
    let bad = view(
        id.clone(),
        json!({"secret": secret, "x": 1}).to_string(),
        None,
    )
    .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["code"], "INVALID_BODY");
    // The person typed instead: a new turn expires the pending card.
    g.turn("alice", "c1").await;
    let gone = view(id.clone(), json!({"secret": secret}).to_string(), None).await;
    assert_eq!(gone.status, 410, "{}", gone.text());
    assert_eq!(gone.json()["error"]["code"], "INTERRUPT_EXPIRED");
    assert!(!gone.text().contains(FILES));
}

#[tokio::test]
async fn a_page_click_is_taken_over_by_exactly_one_runtime_worker() {
    let (g, o, turn) = with_turn("alice", "c1").await;
    let api = g.api();
    let url = o.url(FILES, "/data.csv");
    let (id, secret) = refused_card(&g, &turn, &url, &[]).await;
    // The page resumes with the secret only (no runtime token): a handoff claim.
    let r = page_resume(&api, &id, &secret, true).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let page_claim = r.json()["claim"]["claim_id"].as_str().unwrap().to_owned();
    // The runtime learns of it over its own channel.
    let out = api.outcome(&id).await;
    assert_eq!(out["state"], "claimed");
    assert_eq!(out["handoff"], true);
    assert_eq!(out["decision"]["outcome"], "approved");
    // Four workers race to take it over: exactly one wins.
    let path = format!("/v1/interrupts/{id}/takeover");
    let tries = futures_util::future::join_all(
        (0..4).map(|_| api.call("POST", &path, Some(RUNTIME), Some("alice"), Some("{}"))),
    )
    .await;
    let won: Vec<&Resp> = tries.iter().filter(|r| r.status == 200).collect();
    assert_eq!(
        won.len(),
        1,
        "{:?}",
        tries.iter().map(Resp::text).collect::<Vec<_>>()
    );
    for r in tries.iter().filter(|r| r.status != 200) {
        assert_eq!(r.status, 409);
        assert_eq!(r.json()["error"]["code"], "CLAIM_LOST");
    }
    let taken = won[0].json();
    assert_eq!(taken["state"], "claimed");
    assert_eq!(taken["decision"]["sites"], json!([FILES]));
    let claim = taken["claim"]["claim_id"].as_str().unwrap().to_owned();
    // Another user's runtime call cannot take it; the page's claim no longer works.
    let r = api
        .call("POST", &path, Some(RUNTIME), Some("mallory"), Some("{}"))
        .await;
    assert_eq!(r.status, 404);
    let hb = |c: &str| {
        let body = json!({"claim_id": c}).to_string();
        let p = format!("/v1/interrupts/{id}/heartbeat");
        async move { api.call("POST", &p, None, None, Some(&body)).await }
    };
    assert_eq!(hb(&page_claim).await.status, 409);
    assert_eq!(hb(&claim).await.status, 200);
    let out = api.outcome(&id).await;
    assert_eq!(out["handoff"], false, "taken over: {out}");
    // The resumed run's very next request passes, then it completes.
    assert_eq!(g.get(&turn, &url).await.status, 200);
    let r = api
        .call(
            "POST",
            &format!("/v1/interrupts/{id}/complete"),
            None,
            None,
            Some(&json!({"claim_id": claim, "answer": "done"}).to_string()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Nothing left to take over once done; a runtime's own claim is never a handoff.
    assert_eq!(
        api.call("POST", &path, Some(RUNTIME), Some("alice"), Some("{}"))
            .await
            .status,
        409
    );
}

#[tokio::test]
async fn pending_cards_are_listed_per_user_without_secrets() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    let url = o.url(FILES, "/x");
    let mut secrets = vec![];
    let mut ids = vec![];
    for chat in ["c1", "c2", "c3"] {
        let turn = g.turn("alice", chat).await;
        let (id, secret) = refused_card(&g, &turn, &url, &[]).await;
        ids.push(id);
        secrets.push(secret);
    }
    // c3 answered: no longer pending.
    let r = page_resume(&api, &ids[2], &secrets[2], false).await;
    assert_eq!(r.status, 200);
    let r = api
        .get("/v1/users/alice/interrupts?state=pending", RUNTIME)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let listed: Vec<&str> = v["interrupts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["interrupt_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![ids[0].as_str(), ids[1].as_str()]);
    assert_eq!(v["interrupts"][0]["chat_id"], "c1");
    assert_eq!(v["interrupts"][1]["card"]["sites"], json!([FILES]));
    assert!(v["interrupts"][0]["expires_at"].is_string());
    assert_eq!(v["interrupts"][0]["interrupt"]["id"], ids[0].as_str());
    for s in &secrets {
        assert!(!r.text().contains(s.as_str()), "no secrets in the list");
    }
    assert!(!r.text().contains("resume_secret"));
    let bob = api.get("/v1/users/bob/interrupts", RUNTIME).await;
    assert_eq!(bob.json()["interrupts"], json!([]));
    let bad = api
        .get("/v1/users/alice/interrupts?state=done", RUNTIME)
        .await;
    assert_eq!(bad.status, 422);
    assert_eq!(
        api.get("/v1/users/alice/interrupts", ADMIN).await.status,
        403
    );
    let r = api.open_get("/v1/users/alice/interrupts").await;
    assert_eq!(r.status, 401);
}
