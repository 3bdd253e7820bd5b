//! Packages enforced at the proxy, with the real `pip` against a real `pypiserver` on
//! loopback (a PyPI mirror, `--registry-mirror pypi=pypi.test`): approving a package is the
//! only way to install it; a package and its dependency need one card; pins, typo-squats and
//! direct file downloads are refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::registry::{self, mirror::Mirror};
use support::{ADMIN, Api, Turn};

const INDEX: &str = "pypi.test";

/// pypiserver with the test's wheels, and a gate that knows it as a PyPI mirror.
fn setup() -> Option<Mirror> {
    Mirror::pypi(
        INDEX,
        &[
            ("approved-pkg", "1.0", &[]),
            ("approved-pkq", "1.0", &[]),
            ("alpha", "1.0", &["beta>=1.0"]),
            ("beta", "1.0", &[]),
            ("pinned", "1.0", &[]),
            ("pinned", "2.0", &[]),
            ("secret-thing", "1.0", &[]),
        ],
    )
}

/// [`setup`], and user `u`'s turn in chat `c` once the administrators listed `packages`
/// (maybe none): the registry, the gate's API and the turn, where most rows here run.
async fn listed(packages: &[&str]) -> Option<(Mirror, Api, Turn)> {
    let m = setup()?;
    let api = m.gate.api();
    let turn = registry::listed_turn(&api, packages).await;
    Some((m, api, turn))
}

#[tokio::test(flavor = "multi_thread")]
async fn approved_packages_install_and_nothing_else_does() {
    // No site approval for the index host: the package approval is enough.
    let Some((m, api, turn)) = listed(&["Approved_Pkg", "pinned==1.*"]).await else {
        return;
    };

    assert!(m.installs(&turn, "approved-pkg"));
    assert!(m.installs(&turn, "pinned==1.0"));
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        Vec::<String>::new()
    );

    // A typo-squat of an approved name is another package.
    assert!(m.refuses(&turn, "approved-pkq"));
    // A version outside the pin is refused (the pin is on the administrators' list).
    assert!(m.refuses(&turn, "pinned==2.0"));
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["approved-pkq", "pinned"]
    );

    // The files path cannot fetch an unapproved package's file directly, and the refusal
    // names the package and says a person can approve it.
    let r = m
        .get(&turn, "/packages/secret_thing-1.0-py3-none-any.whl")
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("package_not_approved"));
    assert_eq!(r.header("x-egress-approvable"), Some("true"));
    assert!(r.text().contains("package: secret-thing"), "{}", r.text());
    // An approved package's file is served.
    assert_eq!(
        m.get(&turn, "/packages/approved_pkg-1.0-py3-none-any.whl")
            .await
            .status,
        200
    );
    // A request that names no package is refused and not approvable.
    let r = m.get(&turn, "/admin/secret").await;
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
    let Some(m) = setup() else {
        return;
    };
    let api = m.gate.api();
    // The refused wheel's own METADATA named its dependency: both are on the record, and
    // the approval tool merges them into the card by package name.
    let out = m
        .one_card_covers_a_dependency("alpha", ["alpha", "beta"])
        .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("alpha-1.0") && text.contains("beta-1.0"),
        "{text}"
    );

    // Approvals belong to the chat: a later turn installs too, until the person revokes one.
    let next = api.turn("u", "c", &[]).await;
    assert!(m.installs(&next, "alpha"));
    let r = api.revoke("u", "c", "package", "beta").await;
    assert!(r.status == 200 || r.status == 204, "{}", r.text());
    let after = api.turn("u", "c", &[]).await;
    assert!(m.refuses(&after, "alpha"));
    assert_eq!(registry::refused_packages(&api, &after).await, ["beta"]);
    // Another chat of the same user never had them.
    let other = api.turn("u", "other-chat", &[]).await;
    assert!(m.refuses(&other, "beta"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tunnels_to_the_index_are_judged_per_request_or_refused() {
    use tokio::io::AsyncWriteExt as _;
    let Some((m, api, turn)) = listed(&["approved-pkg"]).await else {
        return;
    };
    let authority = format!("{INDEX}:{}", m.server.port);

    // Plain HTTP inside a CONNECT tunnel is served request by request: each one is judged
    // by its package, on the same keep-alive connection.
    let (head, mut s) = support::connect(m.gate.proxy(), &turn, &authority).await;
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
    let (head, mut s) = support::connect(m.gate.proxy(), &turn, &authority).await;
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
    let Some((m, api, turn)) = listed(&[]).await else {
        return;
    };
    let path = "/packages/beta-1.0-py3-none-any.whl";
    let answers = futures_util::future::join_all((0..16).map(|_| m.get(&turn, path))).await;
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
    let line = m
        .gate
        .log_line(&["package_not_approved", "proxy decision", "package=\"beta\""])
        .await;
    assert!(
        line.is_some(),
        "{:?}",
        m.gate.log_lines("package_not_approved")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_for_a_pinned_package_opens_only_its_versions_until_revoked_by_name() {
    let Some((m, api, turn)) = listed(&[]).await else {
        return;
    };
    assert!(m.refuses(&turn, "pinned==1.0"));

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

    assert!(m.installs(&turn, "pinned==1.0"));
    assert!(
        m.refuses(&turn, "pinned==2.0"),
        "2.0 is outside the approved pin"
    );

    // Revoked by its bare name, the pinned approval goes too.
    let r = api.revoke("u", "c", "package", "Pinned").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let next = api.turn("u", "c", &[]).await;
    assert!(m.refuses(&next, "pinned==1.0"));
}
