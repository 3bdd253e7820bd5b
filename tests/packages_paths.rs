//! Registry paths as an attacker writes them, sent raw through the proxy to a naive static
//! file server that plays the registry mirror (it decodes once, cuts at `?#;`, reads `\` as
//! `/`, resolves `..`, honours `X-Original-URL`): no spelling judged as an approved package
//! or as metadata may make it serve an unapproved package's file, and the origin receives
//! the path re-encoded from the segments the proxy judged, never the client's bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use support::registry;
use support::registry::file_mirror::{FileMirror, file_mirror};
use support::{Gate, Turn, proxy_get, proxy_raw};

/// The body every unapproved file carries: it must never reach the client.
const EVIL: &str = "EVIL";

/// Writes `files` (path under `root`, body) for the mirror to serve.
fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (path, body) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
}

/// What [`mirror_rows`] leaves for further checks.
struct Mirror {
    _dir: tempfile::TempDir,
    mirror: FileMirror,
    gate: Gate,
    turn: Turn,
    base: String,
}

/// A gate that knows `host` as a mirror of `ecosystem` served by a fresh file mirror of
/// `files`, with `approved` on the administrators' list, and a turn that sends each row's
/// path through the proxy (see [`check_rows`]).
async fn mirror_rows(
    ecosystem: &str,
    host: &str,
    files: &[(&str, &str)],
    approved: &[&str],
    rows: &[(&str, u16)],
) -> Mirror {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    let mirror = file_mirror(dir.path());
    let gate = registry::mirror_gate(ecosystem, host, mirror.port).start();
    let turn = registry::listed_turn(&gate.api(), approved).await;
    let base = format!("http://{host}:{}", mirror.port);
    check_rows(&gate, &turn, &base, rows).await;
    Mirror {
        _dir: dir,
        mirror,
        gate,
        turn,
        base,
    }
}

/// Sends each path raw through the proxy and checks the row's status; no answer may carry
/// [`EVIL`]. Every failing row is reported at once.
async fn check_rows(g: &Gate, turn: &Turn, base: &str, rows: &[(&str, u16)]) {
    let mut wrong = Vec::new();
    for (path, want) in rows {
        let r = proxy_get(g.proxy(), turn, &format!("{base}{path}")).await;
        if r.status != *want || r.text().contains(EVIL) {
            wrong.push(format!("{path}: {} {:?} (want {want})", r.status, r.text()));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} rows wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_paths_cannot_reach_an_unapproved_tarball_on_a_file_mirror() {
    let files = [
        ("approved/-/approved-1.0.0.tgz", "approved tarball"),
        ("@scope/approved/-/approved-1.0.0.tgz", "scoped tarball"),
        ("evil/-/evil-1.0.0.tgz", EVIL),
        ("@scope/evil/-/evil-1.0.0.tgz", EVIL),
    ];
    let approved = ["npm:approved", "npm:@scope/approved"];
    let m = mirror_rows(
        "npm",
        "npm.test",
        &files,
        &approved,
        &[
            // The approved tarballs, in every spelling npm uses.
            ("/approved/-/approved-1.0.0.tgz", 200),
            ("/@scope/approved/-/approved-1.0.0.tgz", 200),
            ("/@scope%2fapproved/-/approved-1.0.0.tgz", 200),
            ("/@scope%2Fapproved/-/approved-1.0.0.tgz", 200),
            // An encoded `/` inside a segment, judged as metadata or as the approved package.
            ("/evil/-%2fevil-1.0.0.tgz", 403),
            ("/evil/-%2Fevil-1.0.0.tgz", 403),
            ("/approved/..%2fevil%2f-%2fevil-1.0.0.tgz", 403),
            ("/approved/..%2Fevil%2F-%2Fevil-1.0.0.tgz", 403),
            ("/approved/1.0.0%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz", 403),
            (
                "/approved/-/approved-1.0.0%2f..%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            ("/@scope%2fapproved%2f..%2f..%2fevil/-/evil-1.0.0.tgz", 403),
            (
                "/@scope%2fapproved/-%2f..%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            (
                "/@scope/approved/..%2f..%2f@scope%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            // Dot segments, double encoding, backslashes, empty segments.
            ("/approved/%2e%2e/evil/-/evil-1.0.0.tgz", 403),
            ("/approved/%2E%2E/evil/-/evil-1.0.0.tgz", 403),
            ("/approved/-/%2e%2e/%2e%2e/evil/-/evil-1.0.0.tgz", 403),
            ("/approved/..%252fevil%252f-%252fevil-1.0.0.tgz", 403),
            ("/approved/..%5cevil%5c-%5cevil-1.0.0.tgz", 403),
            ("/approved/..%5Cevil%5C-%5Cevil-1.0.0.tgz", 403),
            ("//evil/-/evil-1.0.0.tgz", 403),
            ("/approved//..%2f..%2fevil/-/evil-1.0.0.tgz", 403),
            // What a server cuts off: a query, a fragment, path parameters.
            ("/evil/-/evil-1.0.0.tgz%3f/approved", 403),
            ("/approved/1.0.0%3f/../../evil/-/evil-1.0.0.tgz", 403),
            (
                "/approved/latest%3F%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            (
                "/approved/latest%23%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            (
                "/approved/latest;%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            (
                "/approved/latest%3b%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
                403,
            ),
            // Versions are semver, tarball names exactly the package's own.
            ("/approved/-/approved-1.0.tgz", 403),
            ("/approved/-/approved-latest.tgz", 403),
            ("/approved/-/approved-1.0.0.tgz/", 403),
            // A query is not judged, so it is not forwarded either.
            (
                "/approved/-/approved-1.0.0.tgz?x=../../evil/-/evil-1.0.0.tgz",
                403,
            ),
        ],
    )
    .await;
    let (g, turn) = (&m.gate, &m.turn);
    // A header some frameworks read as the path is not forwarded as if it were judged.
    let raw = format!(
        "GET {}/approved/-/approved-1.0.0.tgz HTTP/1.1\r\nhost: npm.test:{}\r\n\
         proxy-authorization: {}\r\nx-original-url: /evil/-/evil-1.0.0.tgz\r\n\
         connection: close\r\n\r\n",
        m.base,
        m.mirror.port,
        turn.auth_header()
    );
    let r = proxy_raw(g.proxy(), &raw).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!r.text().contains(EVIL));
    // The refusals name no package, so none is approvable.
    let refused = registry::refused_packages(&g.api(), turn).await;
    assert!(refused.iter().all(|p| p != "npm:evil"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pypi_paths_cannot_reach_an_unapproved_file_on_a_file_mirror() {
    let files = [
        ("packages/approved-1.0-py3-none-any.whl", "approved wheel"),
        ("packages/approved-1.0.tar.gz", "approved sdist"),
        ("packages/evil-1.0-py3-none-any.whl", EVIL),
        // Another directory holding a file under the approved name.
        ("private/approved-1.0-py3-none-any.whl", EVIL),
        ("pypi/approved/json", "{}"),
    ];
    mirror_rows(
        "pypi",
        "pypi.test",
        &files,
        &["approved"],
        &[
            ("/packages/approved-1.0-py3-none-any.whl", 200),
            ("/packages/approved-1.0.tar.gz", 200),
            ("/pypi/approved/json", 200),
            // What a server cuts off after decoding: `?`, `#`, `;`.
            (
                "/packages/evil-1.0-py3-none-any.whl%3F/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/evil-1.0-py3-none-any.whl%3f/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/evil-1.0-py3-none-any.whl%23/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/evil-1.0-py3-none-any.whl;/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/evil-1.0-py3-none-any.whl%3B/approved-1.0-py3-none-any.whl",
                403,
            ),
            // An encoded `/` or `\` in a directory segment, or dot segments.
            (
                "/packages/x%2f..%2f..%2fprivate/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/x%2F..%2F..%2Fprivate/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/x%5c..%5c..%5cprivate/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/%2e%2e/private/approved-1.0-py3-none-any.whl",
                403,
            ),
            (
                "/packages/x%252f..%252f..%252fprivate/approved-1.0-py3-none-any.whl",
                403,
            ),
            ("/packages//approved-1.0-py3-none-any.whl", 403),
            // A version in the JSON API that a server resolves to a file.
            (
                "/pypi/evil/1.0%2f..%2f..%2f..%2fpackages%2fevil-1.0-py3-none-any.whl%3f/json",
                403,
            ),
            (
                "/pypi/approved/1.0%2f..%2f..%2f..%2fpackages%2fevil-1.0-py3-none-any.whl%23/json",
                403,
            ),
            ("/pypi/approved/%2e%2e/json", 403),
            ("/pypi/approved/json/", 403),
            // The last segment is exactly a wheel or sdist name (optionally `.metadata`).
            ("/packages/approved-1.0-py3-none-any.whl/", 403),
            ("/packages/approved-1.0-py3-none.any.whl", 403),
            ("/packages/approved-1.0-py3-none-any%2f.whl", 403),
            ("/packages/approved-1.0-x-py3-none-any.whl", 403),
            ("/packages/approved-1.0-py3-none-any.whl?x=1", 403),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_origin_receives_the_path_re_encoded_from_the_judged_segments() {
    let dir = tempfile::tempdir().unwrap();
    let m = file_mirror(dir.path());
    let port = m.port.to_string();
    let g = registry::mirrors_gate(&[("npm", "npm.test"), ("pypi", "pypi.test")], m.port).start();
    let approved = ["npm:lodash", "npm:@types/node", "torch", "numpy"];
    let turn = registry::listed_turn(&g.api(), &approved).await;
    let rows = [
        ("npm.test", "/lod%61sh", "/lodash"),
        ("npm.test", "/@types%2Fnode", "/@types%2fnode"),
        ("npm.test", "/%40types/node", "/@types/node"),
        (
            "npm.test",
            "/lodash/-/lodash-4.17.2%31.tgz",
            "/lodash/-/lodash-4.17.21.tgz",
        ),
        ("pypi.test", "/simple/Num%50y/", "/simple/NumPy/"),
        (
            "pypi.test",
            "/packages/torch-2.0+cpu-cp311-none-any.whl",
            "/packages/torch-2.0%2Bcpu-cp311-none-any.whl",
        ),
        (
            "pypi.test",
            "/packages/torch-2.0%2bcpu-cp311-none-any.whl",
            "/packages/torch-2.0%2Bcpu-cp311-none-any.whl",
        ),
    ];
    for (host, sent, _) in rows {
        let r = proxy_get(g.proxy(), &turn, &format!("http://{host}:{port}{sent}")).await;
        assert_eq!(
            r.status,
            404,
            "{sent}: the mirror has no files: {}",
            r.text()
        );
    }
    let want: Vec<&str> = rows.iter().map(|(_, _, judged)| *judged).collect();
    assert_eq!(m.seen(), want);
}
