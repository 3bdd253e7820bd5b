//! Revoking a package by its bare name revokes that package (with every pin of it) and no
//! other: not `npm:left~pad` for `npm:left` (npm names may hold `~`, one of the characters a
//! PyPI pin starts with), nor a scoped neighbour, nor a PyPI name that extends another. Seen
//! both in the chat's approval list and at the proxy, on a file mirror for each ecosystem.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::proxy_get;
use support::registry::file_mirror::file_mirror;
use support::registry::{self, ask_packages};

/// The packages the card approves, each with a file on the mirror.
const PACKAGES: [(&str, &str); 9] = [
    ("npm:left", "npm.test/left/-/left-1.0.0.tgz"),
    ("npm:left~pad", "npm.test/left~pad/-/left~pad-1.0.0.tgz"),
    ("npm:left.js", "npm.test/left.js/-/left.js-1.0.0.tgz"),
    ("npm:left-pad", "npm.test/left-pad/-/left-pad-1.0.0.tgz"),
    ("npm:@s/left", "npm.test/@s/left/-/left-1.0.0.tgz"),
    ("npm:@s/left~x", "npm.test/@s/left~x/-/left~x-1.0.0.tgz"),
    ("npm:@s/left-x", "npm.test/@s/left-x/-/left-x-1.0.0.tgz"),
    ("left", "pypi.test/packages/left-1.0-py3-none-any.whl"),
    (
        "left-pad",
        "pypi.test/packages/left_pad-1.0-py3-none-any.whl",
    ),
];

/// Revoked by name; the rest must stay.
const REVOKED: [&str; 3] = ["npm:left", "npm:@s/left", "left"];

#[tokio::test(flavor = "multi_thread")]
async fn revoking_a_package_leaves_the_packages_whose_names_extend_it() {
    let dir = tempfile::tempdir().unwrap();
    for (_, file) in PACKAGES {
        // The mirror serves both hosts from one root: strip the host part.
        let (_, path) = file.split_once('/').unwrap();
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "a package").unwrap();
    }
    let m = file_mirror(dir.path());
    let port = m.port.to_string();
    let g = registry::mirrors_gate(&[("npm", "npm.test"), ("pypi", "pypi.test")], m.port).start();
    let api = g.api();
    let turn = api.turn("u", "c", &[]).await;
    let names: Vec<&str> = PACKAGES.iter().map(|(name, _)| *name).collect();
    let (card, id, secret) = ask_packages(&api, &turn, &names).await;
    assert_eq!(
        card["packages"].as_array().unwrap().len(),
        PACKAGES.len(),
        "{card}"
    );
    support::approve_card(&api, &id, &secret).await;

    for name in REVOKED {
        let encoded = name.replace('@', "%40").replace('/', "%2F");
        let r = api.revoke("u", "c", "package", &encoded).await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
    }

    let rows = api.chat_approvals("u", "c").await;
    let mut left: Vec<&str> = rows["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "package")
        .filter_map(|r| r["value"].as_str())
        .collect();
    left.sort_unstable();
    let mut want: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !REVOKED.contains(n))
        .collect();
    want.sort_unstable();
    assert_eq!(left, want, "{rows}");

    // At the proxy, for a new turn of the chat: only the revoked packages are refused.
    let next = api.turn("u", "c", &[]).await;
    let mut wrong = Vec::new();
    for (name, file) in PACKAGES {
        let (host, path) = file.split_once('/').unwrap();
        let url = format!("http://{host}:{port}/{path}");
        let status = proxy_get(g.proxy(), &next, &url).await.status;
        let want = if REVOKED.contains(&name) { 403 } else { 200 };
        if status != want {
            wrong.push(format!("{name}: {status} (want {want})"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(
        registry::refused_packages(&api, &next).await,
        ["left", "npm:@s/left", "npm:left"]
    );
}
