//! Packages enforced at the proxy, with the real `npm` against a real `verdaccio` on
//! loopback (an npm mirror, `--registry-mirror npm=npm.test`): approved packages (admin list,
//! launch-time, scoped) install; an unapproved package and its dependency are refused and
//! asked for on one card, after which the same install succeeds; pins, typo-squats and
//! direct tarball downloads are refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use support::registry::{self, Server};
use support::{Gate, Turn, proxy_get, turn_with};

const REGISTRY: &str = "npm.test";

fn setup(dir: &Path) -> Option<(Server, Gate)> {
    if !registry::npm_tools() {
        return None;
    }
    let server = registry::verdaccio(dir);
    let publish = |name: &str, version: &str, deps: &[(&str, &str)]| {
        registry::npm_publish(server.port, dir, name, version, deps);
    };
    publish("approved-js", "1.0.0", &[]);
    publish("approved-jz", "1.0.0", &[]);
    publish("js-beta", "1.0.0", &[]);
    publish("js-alpha", "1.0.0", &[("js-beta", "^1.0.0")]);
    publish("js-pinned", "1.0.0", &[]);
    publish("js-pinned", "2.0.0", &[]);
    publish("@acme/scoped", "1.0.0", &[]);
    let g = registry::mirror_gate("npm", REGISTRY, server.port).start();
    Some((server, g))
}

fn npm(g: &Gate, server: &Server, turn: &Turn, dir: &Path, specs: &[&str]) -> std::process::Output {
    registry::npm_install(g.proxy(), turn, REGISTRY, server.port, dir, specs)
}

#[tokio::test(flavor = "multi_thread")]
async fn approved_packages_install_and_nothing_else_does() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    registry::admin_package(&api, "npm:approved-js").await;
    registry::admin_package(&api, "npm:js-pinned@^1").await;
    // A scoped package on the turn's launch-time list.
    let turn = turn_with(
        &api,
        serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "packages": ["npm:@acme/scoped"]}),
    )
    .await;

    assert!(registry::installed(&npm(
        &g,
        &server,
        &turn,
        dir.path(),
        &["approved-js"]
    )));
    assert!(registry::installed(&npm(
        &g,
        &server,
        &turn,
        dir.path(),
        &["@acme/scoped"]
    )));
    assert!(registry::installed(&npm(
        &g,
        &server,
        &turn,
        dir.path(),
        &["js-pinned@1.0.0"]
    )));
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        Vec::<String>::new()
    );

    // A typo-squat, and a version outside the pin.
    assert!(
        !npm(&g, &server, &turn, dir.path(), &["approved-jz"])
            .status
            .success()
    );
    assert!(
        !npm(&g, &server, &turn, dir.path(), &["js-pinned@2.0.0"])
            .status
            .success()
    );
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["npm:approved-jz", "npm:js-pinned"]
    );

    // A tarball cannot be fetched directly either, not even under an approved name's path.
    let base = format!("http://{REGISTRY}:{}", server.port);
    let r = proxy_get(
        g.proxy(),
        &turn,
        &format!("{base}/js-beta/-/js-beta-1.0.0.tgz"),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("package_not_approved"));
    let r = proxy_get(
        g.proxy(),
        &turn,
        &format!("{base}/approved-js/-/js-beta-1.0.0.tgz"),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-approvable"), Some("false"));
    let ok = proxy_get(
        g.proxy(),
        &turn,
        &format!("{base}/approved-js/-/approved-js-1.0.0.tgz"),
    )
    .await;
    assert_eq!(ok.status, 200);
    assert!(
        registry::refused_packages(&api, &turn)
            .await
            .contains(&"npm:js-beta".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_with_a_dependency_installs_after_one_card() {
    let dir = tempfile::tempdir().unwrap();
    let Some((server, g)) = setup(dir.path()) else {
        return;
    };
    let api = g.api();
    let turn = api.turn("u", "c", &[]).await;

    assert!(
        !npm(&g, &server, &turn, dir.path(), &["js-alpha"])
            .status
            .success()
    );
    // Packuments were served, so npm resolved the whole tree before a tarball was refused.
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["npm:js-alpha", "npm:js-beta"]
    );
    let (card, id, secret) = registry::ask_packages(&api, &turn, &[]).await;
    assert_eq!(
        card["packages"],
        serde_json::json!(["npm:js-alpha", "npm:js-beta"]),
        "{card}"
    );
    support::approve_card(&api, &id, &secret).await;
    assert!(registry::installed(&npm(
        &g,
        &server,
        &turn,
        dir.path(),
        &["js-alpha"]
    )));
}
