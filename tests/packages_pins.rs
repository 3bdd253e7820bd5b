//! Pins and the versions they admit, with the real installers: `pip` against `pypiserver`
//! and `npm` against `verdaccio`. PEP 440: a pin admits no pre-release, dev or local version
//! unless it names one (`==1.*` does not admit `1.1rc1`, `1.5.dev0` or `1.0+evil`). npm: a
//! bare version is exactly that version (`@1.0.0` is not `^1.0.0`), a pre-release matches
//! only a range naming a pre-release of the same major.minor.patch, and a version with build
//! metadata only an unpinned grant.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::registry::{
    self,
    mirror::{Mirror, NpmPackage, Wheel},
};
use support::{Gate, Turn, turn_with};

const INDEX: &str = "pypi.test";
const REGISTRY: &str = "npm.test";

/// A turn of chat `c` whose launch-time packages are `packages`.
async fn turn_packages(g: &Gate, packages: &[&str]) -> Turn {
    turn_with(
        &g.api(),
        serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "packages": packages}),
    )
    .await
}

/// Installs each spec from `m` in the turn and checks it succeeded exactly when `admitted`;
/// every wrong row is reported at once.
fn check_installs(m: &Mirror, turn: &Turn, rows: &[(&str, bool)]) {
    let wrong: Vec<String> = rows
        .iter()
        .filter_map(|(spec, admitted)| {
            let out = m.install(turn, &[spec]);
            (out.status.success() != *admitted).then(|| {
                format!(
                    "{spec}: installed={} (want {admitted})\n{}",
                    out.status.success(),
                    String::from_utf8_lossy(&out.stderr)
                )
            })
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_pins_admit_no_pre_dev_or_local_release_unless_they_name_one() {
    let wheels: [Wheel; 4] = [
        ("pre-pin", "1.0", &[]),
        ("pre-pin", "1.1rc1", &[]),
        ("pre-pin", "1.5.dev0", &[]),
        ("local-pin", "1.0+evil", &[]),
    ];
    let Some(m) = Mirror::pypi(INDEX, &wheels) else {
        return;
    };
    let g = &m.gate;
    let turn = registry::listed_turn(&g.api(), &["pre-pin==1.*", "local-pin==1.*"]).await;
    check_installs(
        &m,
        &turn,
        &[
            ("pre-pin==1.*", true),
            ("pre-pin==1.0", true),
            ("pre-pin==1.1rc1", false),
            ("pre-pin==1.5.dev0", false),
            ("local-pin==1.0+evil", false),
        ],
    );
    // Nor is the file served when asked for directly.
    for file in [
        "pre_pin-1.1rc1-py3-none-any.whl",
        "pre_pin-1.5.dev0-py3-none-any.whl",
        "local_pin-1.0%2Bevil-py3-none-any.whl",
    ] {
        let r = m.get(&turn, &format!("/packages/{file}")).await;
        assert_eq!(r.status, 403, "{file}: {}", r.text());
        assert_eq!(r.header("x-egress-refused"), Some("package_not_approved"));
    }
    // A pin that names a pre-release admits pre-releases (and dev releases) in its range; one
    // that names a local version admits that local version.
    let named = turn_packages(g, &["pre-pin>=1.1rc1,<2", "local-pin==1.0+evil"]).await;
    check_installs(
        &m,
        &named,
        &[
            ("pre-pin==1.1rc1", true),
            ("pre-pin==1.5.dev0", true),
            ("local-pin==1.0+evil", true),
        ],
    );
    // An unpinned grant admits every version.
    let unpinned = turn_packages(g, &["local-pin", "pre-pin"]).await;
    check_installs(
        &m,
        &unpinned,
        &[("pre-pin==1.1rc1", true), ("local-pin==1.0+evil", true)],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_pins_are_npm_ranges_with_the_semver_pre_release_rule() {
    let packages: [NpmPackage; 4] = [
        ("js-exact", "1.0.0", &[]),
        ("js-exact", "1.5.0", &[]),
        ("js-exact", "1.1.0-rc.1", &[]),
        ("js-exact", "2.0.0", &[]),
    ];
    let Some(m) = Mirror::npm(REGISTRY, &packages) else {
        return;
    };
    let g = &m.gate;
    let turn = registry::listed_turn(&g.api(), &["npm:js-exact@1.0.0"]).await;
    // A bare version is exactly that version, as npm reads it.
    check_installs(
        &m,
        &turn,
        &[
            ("js-exact@1.0.0", true),
            ("js-exact@1.5.0", false),
            ("js-exact@1.1.0-rc.1", false),
            ("js-exact@2.0.0", false),
        ],
    );
    // Build metadata is no version a pin admits (a file mirror may hold such a file).
    let r = m.get(&turn, "/js-exact/-/js-exact-1.0.0+evil.tgz").await;
    assert_eq!(r.status, 403, "{}", r.text());
    // A range admits a pre-release only when it names one of the same major.minor.patch.
    let ranged = turn_packages(g, &["npm:js-exact@^1"]).await;
    check_installs(
        &m,
        &ranged,
        &[("js-exact@1.5.0", true), ("js-exact@1.1.0-rc.1", false)],
    );
    let pre = turn_packages(g, &["npm:js-exact@>=1.1.0-rc.1 <2"]).await;
    check_installs(
        &m,
        &pre,
        &[("js-exact@1.1.0-rc.1", true), ("js-exact@2.0.0", false)],
    );
}
