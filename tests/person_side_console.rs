//! The admin console through the real binary, without a browser: its session is a hashed
//! cookie with CSRF, the dry run matches recent refusals with the pattern rules, pages carry
//! strict security headers and immutable assets, and removing the admin token ends its
//! sessions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::person::{card, raw, setup, sign_in, with_turn};
use support::*;

/// The attribute value that `html` quotes right after the first `opening` (which ends with
/// the opening quote): a form's token, a page's script.
fn quoted_after(html: &str, opening: &str) -> String {
    html.split(opening)
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned()
}

/// The console adds a site (`body`) with these headers (cookie, CSRF token, Origin).
async fn add_site(api: &Api, headers: &[(&str, &str)], body: &str) -> Resp {
    raw(api, "POST", "/v1/admin/sites", headers, body).await
}

#[tokio::test]
async fn the_console_session_is_a_hashed_cookie_with_csrf() {
    let (g, _o) = setup(&[]).await;
    let api = g.api();
    let r = sign_in(&api, "wrong-token-123456", &[]).await;
    assert_eq!(r.status, 401);
    assert!(r.header("set-cookie").is_none());
    let r = sign_in(&api, ADMIN, &[]).await;
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
    let csrf = quoted_after(&html, "id=\"csrf\" name=\"csrf\" value=\"");
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
    let no_csrf = add_site(&api, &[("cookie", &cookie)], &body).await;
    assert_eq!(no_csrf.status, 403);
    assert_eq!(no_csrf.json()["error"]["code"], "CSRF");
    let wrong = add_site(
        &api,
        &[("cookie", &cookie), ("x-egressgate-csrf", "00")],
        &body,
    )
    .await;
    assert_eq!(wrong.status, 403);
    let cross = add_site(
        &api,
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
    let ok = add_site(
        &api,
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
    let r = sign_in(&api, ADMIN, &[("x-forwarded-proto", "https")]).await;
    assert!(r.header("set-cookie").unwrap().contains("; Secure"));
}

#[tokio::test]
async fn the_dry_run_matches_recent_refusals_with_the_pattern_rules() {
    let (g, o, turn) = with_turn("alice", "c1").await;
    let api = g.api();
    for host in ["a.example.com", "example.com", "badexample.com", FILES] {
        let url = o.url(host, "/x");
        assert_eq!(g.get(&turn, &url).await.status, 403);
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
    // The page's own script (after the shared fragment.js).
    let scripts: Vec<&str> = html
        .split("<script src=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert_eq!(scripts.len(), 2, "{scripts:?}");
    assert!(
        scripts[0].starts_with("/ui/assets/fragment."),
        "{scripts:?}"
    );
    let js = scripts[1].to_owned();
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

/// A console session is only as good as the admin token it was signed in with: removing a
/// named admin token ends its sessions on the very next request (rotation without a restart).
#[tokio::test]
async fn removing_the_admin_token_ends_its_console_sessions() {
    let (g, _o) = setup(&[]).await;
    let api = g.api();
    let r = api.add_token("console-op", &["admin"]).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let named = r.json()["token"].as_str().unwrap().to_owned();
    let r = sign_in(&api, &named, &[]).await;
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
