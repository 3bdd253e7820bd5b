//! Packages enforced at the proxy, with the real `pip` against a real `pypiserver` on
//! loopback (a PyPI mirror, `--registry-mirror pypi=pypi.test`): approving a package is the
//! only way to install it; a package and its dependency need one card; pins, typo-squats and
//! direct file downloads are refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use support::registry::{self, Server};
use support::{ADMIN, Gate, Turn, proxy_get};

const INDEX: &str = "pypi.test";

/// pypiserver with the test's wheels, and a gate that knows it as a PyPI mirror.
fn setup(dir: &Path) -> Option<(Server, Gate)> {
    if !registry::pip_tools() {
        return None;
    }
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    registry::write_wheel(&wheels, "approved-pkg", "1.0", &[]);
    registry::write_wheel(&wheels, "approved-pkq", "1.0", &[]);
    registry::write_wheel(&wheels, "alpha", "1.0", &["beta>=1.0"]);
    registry::write_wheel(&wheels, "beta", "1.0", &[]);
    registry::write_wheel(&wheels, "pinned", "1.0", &[]);
    registry::write_wheel(&wheels, "pinned", "2.0", &[]);
    registry::write_wheel(&wheels, "secret-thing", "1.0", &[]);
    let server = registry::pypiserver(&wheels);
    let g = registry::mirror_gate("pypi", INDEX, server.port).start();
    Some((server, g))
}

fn pip(g: &Gate, server: &Server, turn: &Turn, dir: &Path, specs: &[&str]) -> std::process::Output {
    registry::pip_install(g.proxy(), turn, INDEX, server.port, dir, specs)
}

#[tokio::test(flavor = "multi_thread")]
async fn approved_packages_install_and_nothing_else_does() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    registry::admin_package(&api, "Approved_Pkg").await;
    registry::admin_package(&api, "pinned==1.*").await;
    // No site approval for the index host: the package approval is enough.
    let turn = api.turn("u", "c", &[]).await;

    assert!(registry::installed(&pip(
        &g,
        &server,
        &turn,
        dir.path(),
        &["approved-pkg"]
    )));
    assert!(registry::installed(&pip(
        &g,
        &server,
        &turn,
        dir.path(),
        &["pinned==1.0"]
    )));
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        Vec::<String>::new()
    );

    // A typo-squat of an approved name is another package.
    let out = pip(&g, &server, &turn, dir.path(), &["approved-pkq"]);
    assert!(!out.status.success());
    // A version outside the pin is refused (the pin is on the administrators' list).
    let out = pip(&g, &server, &turn, dir.path(), &["pinned==2.0"]);
    assert!(!out.status.success());
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["approved-pkq", "pinned"]
    );

    // The files path cannot fetch an unapproved package's file directly, and the refusal
    // names the package and says a person can approve it.
    let url = format!(
        "http://{INDEX}:{}/packages/secret_thing-1.0-py3-none-any.whl",
        server.port
    );
    let r = proxy_get(g.proxy(), &turn, &url).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("package_not_approved"));
    assert_eq!(r.header("x-egress-approvable"), Some("true"));
    assert!(r.text().contains("package: secret-thing"), "{}", r.text());
    // An approved package's file is served.
    let url = format!(
        "http://{INDEX}:{}/packages/approved_pkg-1.0-py3-none-any.whl",
        server.port
    );
    assert_eq!(proxy_get(g.proxy(), &turn, &url).await.status, 200);
    // A request that names no package is refused and not approvable.
    let url = format!("http://{INDEX}:{}/admin/secret", server.port);
    let r = proxy_get(g.proxy(), &turn, &url).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-egress-approvable"), Some("false"));

    let rec = api.refusals(&turn).await;
    let rows = rec["refusals"].as_array().unwrap();
    let row = |p: &str| rows.iter().find(|r| r["package"] == p).cloned();
    let secret = row("secret-thing").expect("secret-thing recorded");
    assert_eq!(secret["host"], INDEX);
    assert_eq!(secret["approvable"], true);
    let unnamed = rows
        .iter()
        .find(|r| r["reason"] == "package_not_approved" && r["package"].is_null())
        .expect("unmappable request recorded");
    assert_eq!(unnamed["approvable"], false);
    // Nothing asks for the index host as a site.
    assert!(rows.iter().all(|r| r["reason"] != "not_approved"), "{rec}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_with_a_dependency_installs_after_one_card() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    let turn = api.turn("u", "c", &[]).await;

    let out = pip(&g, &server, &turn, dir.path(), &["alpha"]);
    assert!(!out.status.success(), "alpha is not approved");
    // The refused wheel's own METADATA named its dependency: both are on the record.
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["alpha", "beta"]
    );

    // The approval tool merges the refused packages into the card, by package name.
    let (card, id, secret) = registry::ask_packages(&api, &turn, &[]).await;
    assert_eq!(
        card["packages"],
        serde_json::json!(["alpha", "beta"]),
        "{card}"
    );
    assert_eq!(card["sites"], serde_json::json!([]), "{card}");
    support::approve_card(&api, &id, &secret).await;

    // The same install, the same turn (the resumed run): one card was enough.
    let out = pip(&g, &server, &turn, dir.path(), &["alpha"]);
    assert!(registry::installed(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("alpha-1.0") && text.contains("beta-1.0"),
        "{text}"
    );

    // Approvals belong to the chat: a later turn installs too, until the person revokes one.
    let next = api.turn("u", "c", &[]).await;
    assert!(registry::installed(&pip(
        &g,
        &server,
        &next,
        dir.path(),
        &["alpha"]
    )));
    let r = api
        .call(
            "DELETE",
            "/v1/chats/c/approvals/package/beta",
            Some(support::RUNTIME),
            Some("u"),
            None,
        )
        .await;
    assert!(r.status == 200 || r.status == 204, "{}", r.text());
    let after = api.turn("u", "c", &[]).await;
    assert!(
        !pip(&g, &server, &after, dir.path(), &["alpha"])
            .status
            .success()
    );
    assert_eq!(registry::refused_packages(&api, &after).await, ["beta"]);
    // Another chat of the same user never had them.
    let other = api.turn("u", "other-chat", &[]).await;
    assert!(
        !pip(&g, &server, &other, dir.path(), &["beta"])
            .status
            .success()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tunnels_to_the_index_are_judged_per_request_or_refused() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    registry::admin_package(&api, "approved-pkg").await;
    let turn = api.turn("u", "c", &[]).await;
    let authority = format!("{INDEX}:{}", server.port);

    // Plain HTTP inside a CONNECT tunnel is served request by request: each one is judged
    // by its package, on the same keep-alive connection.
    let (head, mut s) = support::connect(g.proxy(), &turn, &authority).await;
    assert_eq!(head.status, 200);
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nhost: {authority}\r\n\r\n");
    s.write_all(get("/packages/approved_pkg-1.0-py3-none-any.whl").as_bytes())
        .await
        .unwrap();
    let ok = support::read_response(&mut s).await.unwrap();
    assert_eq!(ok.status, 200);
    s.write_all(get("/packages/secret_thing-1.0-py3-none-any.whl").as_bytes())
        .await
        .unwrap();
    let refused = support::read_response(&mut s).await.unwrap();
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.header("x-egress-refused"),
        Some("package_not_approved")
    );
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["secret-thing"]
    );

    // Opaque bytes to a registry host name no package: the tunnel is refused and recorded.
    let (head, mut s) = support::connect(g.proxy(), &turn, &authority).await;
    assert_eq!(head.status, 200);
    s.write_all(b"\x00\x01\x02 opaque bytes").await.unwrap();
    assert!(
        support::wait_closed(&mut s, 10).await.is_ok(),
        "tunnel closed"
    );
    let rec = api.refusals(&turn).await;
    let opaque = rec["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reason"] == "package_not_approved" && r["package"].is_null())
        .cloned()
        .unwrap_or_else(|| panic!("opaque tunnel recorded: {rec}"));
    assert_eq!(opaque["approvable"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_requests_for_one_refused_package_keep_one_row() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    let turn = api.turn("u", "c", &[]).await;
    let url = format!(
        "http://{INDEX}:{}/packages/beta-1.0-py3-none-any.whl",
        server.port
    );
    let answers =
        futures_util::future::join_all((0..16).map(|_| proxy_get(g.proxy(), &turn, &url))).await;
    // Every answer is the recorded refusal: none passed, none was a 503.
    assert!(answers.iter().all(|r| r.status == 403), "{answers:?}");
    let rec = api.refusals(&turn).await;
    let rows: Vec<_> = rec["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["package"] == "beta")
        .collect();
    assert_eq!(rows.len(), 1, "{rec}");
    assert_eq!(rows[0]["count"], 16, "{rec}");
    // The canonical decision line names the package.
    let line = g
        .log_line(&["package_not_approved", "proxy decision", "package=\"beta\""])
        .await;
    assert!(line.is_some(), "{:?}", g.log_lines("package_not_approved"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_for_a_pinned_package_opens_only_its_versions_until_revoked_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    let turn = api.turn("u", "c", &[]).await;
    assert!(
        !pip(&g, &server, &turn, dir.path(), &["pinned==1.0"])
            .status
            .success()
    );

    // The agent asks for the range it needs; the refusal of the same package adds nothing.
    let (card, id, secret) = registry::ask_packages(&api, &turn, &["Pinned==1.*"]).await;
    assert_eq!(
        card["packages"],
        serde_json::json!(["pinned==1.*"]),
        "{card}"
    );
    // An administrator's dry run of the package finds the proxy's refusal of it and the
    // pinned card that asked for it.
    let r = api
        .get("/v1/admin/dry-run?package=pinned&days=1", ADMIN)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let dry = r.json();
    assert_eq!(dry["hosts"], serde_json::json!([INDEX]), "{dry}");
    assert_eq!(dry["would_allow"][0]["package"], "pinned", "{dry}");
    assert_eq!(dry["cards"][0]["interrupt_id"], id.as_str(), "{dry}");
    support::approve_card(&api, &id, &secret).await;
    let rows = api.chat_approvals("u", "c").await;
    assert!(
        rows["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "package" && r["value"] == "pinned==1.*"),
        "{rows}"
    );

    assert!(registry::installed(&pip(
        &g,
        &server,
        &turn,
        dir.path(),
        &["pinned==1.0"]
    )));
    let out = pip(&g, &server, &turn, dir.path(), &["pinned==2.0"]);
    assert!(!out.status.success(), "2.0 is outside the approved pin");

    // Revoked by its bare name, the pinned approval goes too.
    let r = api
        .call(
            "DELETE",
            "/v1/chats/c/approvals/package/Pinned",
            Some(support::RUNTIME),
            Some("u"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let next = api.turn("u", "c", &[]).await;
    assert!(
        !pip(&g, &server, &next, dir.path(), &["pinned==1.0"])
            .status
            .success()
    );
}
