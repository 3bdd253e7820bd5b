//! Packages enforced at the proxy, with the real `npm` against a real `verdaccio` on
//! loopback (an npm mirror, `--registry-mirror npm=npm.test`): approved packages (admin list,
//! launch-time, scoped) install; an unapproved package and its dependency are refused and
//! asked for on one card, after which the same install succeeds; pins, typo-squats and
//! direct tarball downloads are refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::registry::{self, mirror::Mirror};
use support::turn_with;

const REGISTRY: &str = "npm.test";

/// verdaccio with the test's packages, and a gate that knows it as an npm mirror.
fn setup() -> Option<Mirror> {
    Mirror::npm(
        REGISTRY,
        &[
            ("approved-js", "1.0.0", &[]),
            ("approved-jz", "1.0.0", &[]),
            ("js-beta", "1.0.0", &[]),
            ("js-alpha", "1.0.0", &[("js-beta", "^1.0.0")]),
            ("js-pinned", "1.0.0", &[]),
            ("js-pinned", "2.0.0", &[]),
            ("@acme/scoped", "1.0.0", &[]),
        ],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn approved_packages_install_and_nothing_else_does() {
    let Some(m) = setup() else {
        return;
    };
    let api = m.gate.api();
    api.admin_package("npm:approved-js").await;
    api.admin_package("npm:js-pinned@^1").await;
    // A scoped package on the turn's launch-time list.
    let turn = turn_with(
        &api,
        serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "packages": ["npm:@acme/scoped"]}),
    )
    .await;

    assert!(m.installs(&turn, "approved-js"));
    assert!(m.installs(&turn, "@acme/scoped"));
    assert!(m.installs(&turn, "js-pinned@1.0.0"));
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        Vec::<String>::new()
    );

    // A typo-squat, and a version outside the pin.
    assert!(m.refuses(&turn, "approved-jz"));
    assert!(m.refuses(&turn, "js-pinned@2.0.0"));
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["npm:approved-jz", "npm:js-pinned"]
    );

    // A tarball cannot be fetched directly either, not even under an approved name's path.
    let r = m.get(&turn, "/js-beta/-/js-beta-1.0.0.tgz").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("package_not_approved"));
    let r = m.get(&turn, "/approved-js/-/js-beta-1.0.0.tgz").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-approvable"), Some("false"));
    let ok = m.get(&turn, "/approved-js/-/approved-js-1.0.0.tgz").await;
    assert_eq!(ok.status, 200);
    assert!(registry::was_refused(&api, &turn, "npm:js-beta").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_with_a_dependency_installs_after_one_card() {
    let Some(m) = setup() else {
        return;
    };
    // Packuments were served, so npm resolved the whole tree before a tarball was refused.
    m.one_card_covers_a_dependency("js-alpha", ["npm:js-alpha", "npm:js-beta"])
        .await;
}
