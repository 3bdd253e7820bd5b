//! The person's side through the real binary, without a browser: the card read by secret
//! (identical 404s, 410 when expired), a page's click taken over by the runtime exactly once,
//! the pending-cards list, the chat event stream (resumption, coalescing, keep-alive), the
//! admin console's session and CSRF rules, the dry run, and the security headers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::sse::Events;
use support::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

const FILES: &str = "files.example.com";

async fn setup(extra: &[&str]) -> (Gate, Origin) {
    let o = origin().await;
    let port = o.addr.port().to_string();
    let mut args = vec!["--allow-cidr", "127.0.0.0/8", "--allow-port", &port];
    args.extend_from_slice(extra);
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve("a.example.com", "127.0.0.1")
        .resolve("example.com", "127.0.0.1")
        .resolve("badexample.com", "127.0.0.1")
        .args(&args)
        .start();
    (g, o)
}

/// Refused download → approval tool → registered card: (interrupt id, resume secret).
async fn card(api: &Api, turn: &Turn, packages: &[&str]) -> (String, String) {
    let r = api
        .post(
            &format!("/v1/turns/{}/approval-requests", turn.id),
            RUNTIME,
            json!({"reason": "the analysis needs the data file", "packages": packages}),
        )
        .await;
    assert_eq!(r.json()["outcome"], "ask", "{}", r.text());
    let r = api
        .post(
            "/v1/interrupts",
            RUNTIME,
            json!({"draft_id": r.json()["draft_id"]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        v["interrupt"]["id"].as_str().unwrap().to_owned(),
        v["resume_secret"].as_str().unwrap().to_owned(),
    )
}

/// Any request with any headers (cookies, Origin, CSRF), read to the end.
async fn raw(api: &Api, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n",
        api.addr
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method != "GET" {
        req.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = TcpStream::connect(api.addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

#[tokio::test]
async fn the_card_is_shown_only_for_its_secret() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    let turn = api.turn("alice", "c1", &[]).await;
    let url = format!("http://{FILES}:{}/data.csv?token=x", o.addr.port());
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
    let (id, secret) = card(&api, &turn, &["requests"]).await;
    let view = |id: String, body: String, user: Option<&'static str>| async move {
        let mut h = vec![];
        if let Some(u) = user {
            h.push(("authorization", "Bearer test-runtime-token-0123456789"));
            h.push(("x-egressgate-user", u));
        }
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
    api.turn("alice", "c1", &[]).await;
    let gone = view(id.clone(), json!({"secret": secret}).to_string(), None).await;
    assert_eq!(gone.status, 410, "{}", gone.text());
    assert_eq!(gone.json()["error"]["code"], "INTERRUPT_EXPIRED");
    assert!(!gone.text().contains(FILES));
}

#[tokio::test]
async fn a_page_click_is_taken_over_by_exactly_one_runtime_worker() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    let turn = api.turn("alice", "c1", &[]).await;
    let url = format!("http://{FILES}:{}/data.csv", o.addr.port());
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
    let (id, secret) = card(&api, &turn, &[]).await;
    // The page resumes with the secret only (no runtime token): a handoff claim.
    let r = raw(
        &api,
        "POST",
        &format!("/v1/interrupts/{id}/resume"),
        &[],
        &resume_body(&id, &secret, "resolved", json!({"approved": true})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let page_claim = r.json()["claim"]["claim_id"].as_str().unwrap().to_owned();
    // The runtime learns of it over its own channel.
    let out = api
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await
        .json();
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
    let out = api
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await
        .json();
    assert_eq!(out["handoff"], false, "taken over: {out}");
    // The resumed run's very next request passes, then it completes.
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 200);
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
    let url = format!("http://{FILES}:{}/x", o.addr.port());
    let mut secrets = vec![];
    let mut ids = vec![];
    for chat in ["c1", "c2", "c3"] {
        let turn = api.turn("alice", chat, &[]).await;
        assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
        let (id, secret) = card(&api, &turn, &[]).await;
        ids.push(id);
        secrets.push(secret);
    }
    // c3 answered: no longer pending.
    let r = raw(
        &api,
        "POST",
        &format!("/v1/interrupts/{}/resume", ids[2]),
        &[],
        &resume_body(&ids[2], &secrets[2], "resolved", json!({"approved": false})),
    )
    .await;
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
    let r = api
        .call("GET", "/v1/users/alice/interrupts", None, None, None)
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn a_chat_streams_its_events_and_resumes_from_the_last_id() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    // A chat exists from its first turn: subscribe after opening it, before running anything.
    let turn = api.turn("alice", "c1", &[]).await;
    let mut ev = Events::open(&api, "c1", "alice", None).await;
    let url = format!("http://{FILES}:{}/data.csv", o.addr.port());
    // Three refusals of one host and one of another: one event per new refusal row.
    for _ in 0..3 {
        assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
    }
    let other = format!("http://a.example.com:{}/x", o.addr.port());
    assert_eq!(proxy_get(g.proxy(), &turn, &other).await.status, 403);
    let (id1, kind, data) = ev.next().await;
    assert_eq!(kind, "refusal.recorded");
    assert_eq!(data["host"], FILES);
    assert_eq!(data["reason"], "not_approved");
    assert_eq!(data["turn_id"], turn.id.as_str());
    assert_eq!(data["port"], o.addr.port());
    let (_, kind, data) = ev.next().await;
    assert_eq!(
        (kind.as_str(), data["host"].as_str()),
        ("refusal.recorded", Some("a.example.com"))
    );
    let (cid, secret) = card(&api, &turn, &[]).await;
    let (_, kind, data) = ev.next().await;
    assert_eq!(kind, "approval.requested");
    assert_eq!(data["interrupt_id"], cid.as_str());
    let r = raw(
        &api,
        "POST",
        &format!("/v1/interrupts/{cid}/resume"),
        &[],
        &resume_body(&cid, &secret, "resolved", json!({"approved": true})),
    )
    .await;
    assert_eq!(r.status, 200);
    let (_, kind, data) = ev.next().await;
    assert_eq!(kind, "approval.resolved");
    assert_eq!(data["decision"]["outcome"], "approved");
    assert!(!data.to_string().contains(&secret), "no secret in events");
    let r = api
        .call(
            "DELETE",
            &format!("/v1/chats/c1/approvals/site/{FILES}"),
            Some(RUNTIME),
            Some("alice"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (last_id, kind, data) = ev.next().await;
    assert_eq!(kind, "approval.revoked");
    assert_eq!(data["value"], FILES);
    // Reconnecting with Last-Event-ID replays exactly what came after it.
    let mut again = Events::open(&api, "c1", "alice", Some(&id1)).await;
    let mut replayed = vec![];
    for _ in 0..4 {
        let (id, kind, _) = again.next().await;
        replayed.push(kind);
        if id == last_id {
            break;
        }
    }
    assert_eq!(
        replayed,
        [
            "refusal.recorded",
            "approval.requested",
            "approval.resolved",
            "approval.revoked"
        ]
    );
    // Another user's chat of the same name is no chat of bob's: the 404 of a chat nobody
    // opened, so bob's token cannot even wait on alice's stream.
    let bob = raw(
        &api,
        "GET",
        "/v1/chats/c1/events",
        &[
            ("authorization", "Bearer test-runtime-token-0123456789"),
            ("x-egressgate-user", "bob"),
        ],
        "",
    )
    .await;
    assert_eq!(bob.status, 404, "{}", bob.text());
    assert_eq!(bob.json()["error"]["code"], "CHAT_NOT_FOUND");
    // A bad Last-Event-ID is a clear error; the wrong token is refused.
    let r = raw(
        &api,
        "GET",
        "/v1/chats/c1/events",
        &[
            ("authorization", "Bearer test-runtime-token-0123456789"),
            ("x-egressgate-user", "alice"),
            ("last-event-id", "yesterday"),
        ],
        "",
    )
    .await;
    assert_eq!(r.status, 422);
    let r = raw(
        &api,
        "GET",
        "/v1/chats/c1/events",
        &[("x-egressgate-user", "alice")],
        "",
    )
    .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn the_console_session_is_a_hashed_cookie_with_csrf() {
    let (g, _o) = setup(&[]).await;
    let api = g.api();
    let r = raw(
        &api,
        "POST",
        "/ui/admin/session",
        &[],
        &json!({"token": "wrong-token-123456"}).to_string(),
    )
    .await;
    assert_eq!(r.status, 401);
    assert!(r.header("set-cookie").is_none());
    let r = raw(
        &api,
        "POST",
        "/ui/admin/session",
        &[],
        &json!({"token": ADMIN}).to_string(),
    )
    .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let set = r.header("set-cookie").unwrap().to_owned();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    // The page carries the CSRF token; only the cookie's hash is stored.
    let page = raw(&api, "GET", "/ui/admin", &[("cookie", &cookie)], "").await;
    assert_eq!(page.status, 200);
    let html = page.text();
    let csrf = html
        .split("id=\"csrf\" name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned();
    assert_eq!(csrf.len(), 64, "{html}");
    let db = std::fs::read(g.data_dir.path().join("data/egressgate.db")).unwrap_or_default();
    let value = cookie.split_once('=').unwrap().1;
    if !db.is_empty() {
        assert!(
            !String::from_utf8_lossy(&db).contains(value),
            "cookie stored in clear"
        );
    }
    let body = json!({"pattern": "files.example.com", "note": "team data"}).to_string();
    let no_csrf = raw(
        &api,
        "POST",
        "/v1/admin/sites",
        &[("cookie", &cookie)],
        &body,
    )
    .await;
    assert_eq!(no_csrf.status, 403);
    assert_eq!(no_csrf.json()["error"]["code"], "CSRF");
    let wrong = raw(
        &api,
        "POST",
        "/v1/admin/sites",
        &[("cookie", &cookie), ("x-egressgate-csrf", "00")],
        &body,
    )
    .await;
    assert_eq!(wrong.status, 403);
    let cross = raw(
        &api,
        "POST",
        "/v1/admin/sites",
        &[
            ("cookie", &cookie),
            ("x-egressgate-csrf", &csrf),
            ("origin", "http://evil.example"),
        ],
        &body,
    )
    .await;
    assert_eq!(cross.status, 403);
    assert_eq!(cross.json()["error"]["code"], "CROSS_ORIGIN");
    let list = api.get("/v1/admin/sites", ADMIN).await.json();
    assert_eq!(
        list["sites"],
        json!([]),
        "nothing was written by refused requests"
    );
    let host = api.addr.to_string();
    let origin = format!("http://{host}");
    let ok = raw(
        &api,
        "POST",
        "/v1/admin/sites",
        &[
            ("cookie", &cookie),
            ("x-egressgate-csrf", &csrf),
            ("origin", &origin),
        ],
        &body,
    )
    .await;
    assert_eq!(ok.status, 201, "{}", ok.text());
    let read = raw(&api, "GET", "/v1/admin/sites", &[("cookie", &cookie)], "").await;
    assert_eq!(read.json()["sites"][0]["note"], "team data");
    let out = raw(
        &api,
        "POST",
        "/ui/admin/signout",
        &[("cookie", &cookie), ("x-egressgate-csrf", &csrf)],
        "",
    )
    .await;
    assert_eq!(out.status, 204);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let after = raw(&api, "GET", "/v1/admin/sites", &[("cookie", &cookie)], "").await;
    assert_eq!(after.status, 401);
    let page = raw(&api, "GET", "/ui/admin", &[("cookie", &cookie)], "").await;
    assert!(page.text().contains("signin-form"));
    // Over TLS (as a terminating proxy reports it) the cookie is Secure.
    let r = raw(
        &api,
        "POST",
        "/ui/admin/session",
        &[("x-forwarded-proto", "https")],
        &json!({"token": ADMIN}).to_string(),
    )
    .await;
    assert!(r.header("set-cookie").unwrap().contains("; Secure"));
}

#[tokio::test]
async fn the_dry_run_matches_recent_refusals_with_the_pattern_rules() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    let turn = api.turn("alice", "c1", &[]).await;
    for host in ["a.example.com", "example.com", "badexample.com", FILES] {
        let url = format!("http://{host}:{}/x", o.addr.port());
        assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
    }
    let r = api
        .get("/v1/admin/dry-run?pattern=*.example.com&days=7", ADMIN)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        v["hosts"],
        json!(["a.example.com", FILES]),
        "never the apex, never badexample.com"
    );
    assert_eq!(v["would_allow"][0]["user_id"], "alice");
    assert_eq!(v["would_allow"][0]["chat_id"], "c1");
    let r = api
        .get("/v1/admin/dry-run?pattern=Example.COM.", ADMIN)
        .await;
    assert_eq!(r.json()["hosts"], json!(["example.com"]));
    assert_eq!(r.json()["pattern"], "example.com");
    for bad in ["*.com", "127.0.0.1", "localhost"] {
        let r = api
            .get(&format!("/v1/admin/dry-run?pattern={bad}"), ADMIN)
            .await;
        assert_eq!(r.status, 422, "{bad}: {}", r.text());
    }
    assert_eq!(
        api.get("/v1/admin/dry-run?pattern=example.com&days=0", ADMIN)
            .await
            .status,
        422
    );
    assert_eq!(api.get("/v1/admin/dry-run", ADMIN).await.status, 422);
    let both = api
        .get(
            "/v1/admin/dry-run?pattern=example.com&package=requests",
            ADMIN,
        )
        .await;
    assert_eq!(both.status, 422);
    // A package: the cards that asked for it (names canonicalised as the list stores them).
    let (id, _) = card(&api, &turn, &["Requests"]).await;
    let r = api
        .get("/v1/admin/dry-run?package=requests&days=1", ADMIN)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["package"], "requests");
    assert_eq!(r.json()["cards"][0]["interrupt_id"], id.as_str());
    assert_eq!(r.json()["cards"][0]["chat_id"], "c1");
    let r = api.get("/v1/admin/dry-run?package=numpy", ADMIN).await;
    assert_eq!(r.json()["cards"], json!([]));
    let r = api.get("/v1/admin/dry-run?package=gem:rails", ADMIN).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        api.get("/v1/admin/dry-run?pattern=example.com", RUNTIME)
            .await
            .status,
        403
    );
    // A dry run saves nothing.
    assert_eq!(
        api.get("/v1/admin/sites", ADMIN).await.json()["sites"],
        json!([])
    );
}

#[tokio::test]
async fn pages_carry_strict_security_headers_and_immutable_assets() {
    let (g, _o) = setup(&[]).await;
    let api = g.api();
    let page = raw(&api, "GET", "/ui/cards/int_whatever", &[], "").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-security-policy"),
        Some(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        )
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    let html = page.text();
    assert!(!html.contains("<script>"), "no inline script");
    let js = html
        .split("src=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned();
    assert!(
        js.starts_with("/ui/assets/card.") && js.ends_with(".js"),
        "{js}"
    );
    let asset = raw(&api, "GET", &js, &[], "").await;
    assert_eq!(asset.status, 200);
    assert_eq!(
        asset.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert!(
        asset
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    assert_eq!(
        raw(&api, "GET", "/ui/assets/card.js", &[], "").await.status,
        404
    );
    // The page id is escaped, never reflected raw.
    let evil = raw(&api, "GET", "/ui/cards/%3Cscript%3E", &[], "").await;
    assert!(!evil.text().contains("<script>"));
    // API answers carry the headers too.
    let r = api.get("/v1/admin/sites", ADMIN).await;
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
}

#[tokio::test]
async fn a_subscriber_too_far_behind_gets_a_resync_then_live_events() {
    let (g, o) = setup(&[]).await;
    let api = g.api();
    // 300 distinct refusals in one chat (over two turns: a turn keeps at most 256 hosts).
    let proxy = g.proxy();
    for t in 0..2 {
        let turn = api.turn("alice", "lag", &[]).await;
        let sends = (0..150).map(|i| {
            let turn = turn.clone();
            let url = format!("http://h{t}-{i}.example.net/x");
            async move { proxy_get(proxy, &turn, &url).await.status }
        });
        let statuses = futures_util::future::join_all(sends).await;
        assert!(statuses.iter().all(|s| *s == 403));
    }
    let mut ev = Events::open(&api, "lag", "alice", Some("0")).await;
    let (id, kind, data) = ev.next().await;
    assert_eq!(kind, "resync");
    assert_eq!(data["reason"], "lagged");
    assert_eq!(data["last_event_id"].to_string(), id);
    // Then it carries on live from there.
    let turn = api.turn("alice", "lag", &[]).await;
    let url = format!("http://{FILES}:{}/x", o.addr.port());
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 403);
    let (next, kind, data) = ev.next().await;
    assert_eq!(
        (kind.as_str(), data["host"].as_str()),
        ("refusal.recorded", Some(FILES))
    );
    assert!(next.parse::<i64>().unwrap() > id.parse::<i64>().unwrap());
}

/// A console session is only as good as the admin token it was signed in with: removing a
/// named admin token ends its sessions on the very next request (rotation without a restart).
#[tokio::test]
async fn removing_the_admin_token_ends_its_console_sessions() {
    let (g, _o) = setup(&[]).await;
    let api = g.api();
    let r = api
        .post(
            "/v1/admin/tokens",
            ADMIN,
            json!({"name": "console-op", "scopes": ["admin"]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let named = r.json()["token"].as_str().unwrap().to_owned();
    let r = raw(
        &api,
        "POST",
        "/ui/admin/session",
        &[],
        &json!({"token": named}).to_string(),
    )
    .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let cookie = r
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let read = raw(&api, "GET", "/v1/admin/sites", &[("cookie", &cookie)], "").await;
    assert_eq!(read.status, 200, "{}", read.text());
    let r = api
        .call(
            "DELETE",
            "/v1/admin/tokens/console-op",
            Some(ADMIN),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let read = raw(&api, "GET", "/v1/admin/sites", &[("cookie", &cookie)], "").await;
    assert_eq!(read.status, 401, "{}", read.text());
    let page = raw(&api, "GET", "/ui/admin", &[("cookie", &cookie)], "").await;
    assert!(
        !page.text().contains("id=\"csrf\""),
        "the console must ask to sign in again"
    );
}
