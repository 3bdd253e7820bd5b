//! The Python (`clients/python`, package `egressgate`) and TypeScript (`clients/typescript`,
//! `@egressgate/client`) clients against the real binary (and on PostgreSQL when CI names a
//! server): each runs the whole approval loop (a turn, a refusal through the proxy, a card,
//! the pending list, an approved resume with the card's secret, the event stream, a
//! revocation) and gets `ApiError` 401 `UNAUTHORIZED` for a bad token; each checks that every
//! operation of the served document is one of its methods and the other way round, and that
//! the check fails for an operation it lacks. Their generated files must be what
//! `docs/openapi.json` gives (`python3 clients/generate.py` rewrites them).
//!
//! Python needs `httpx2` (installed with the MCP SDK by `.ci/run`), TypeScript the pinned
//! `tsc` that `.ci/run` installs outside the checkout (`EGRESSGATE_TEST_TSC`); without them
//! the tests fail under `CI=true` and say they skipped otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::examples::{as_runtime, available, example_bench, python_has};
use support::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd` as a runtime of `g` whose sandbox downloads from the origin on `port`; it must
/// succeed: its standard output.
fn against(mut cmd: Command, g: &Gate, port: u16) -> String {
    let out = as_runtime(&mut cmd, g, port).output().unwrap();
    let stdout = stdout_of(&out, &format!("{cmd:?}"));
    eprintln!("{stdout}");
    stdout
}

/// The lines every client prints for its loop, prefixed with `kind`.
fn assert_loop(out: &str, kind: &str) {
    for line in [
        "download 403".to_owned(),
        "refused files.example.com".to_owned(),
        "approval tool ask, card sites [\"files.example.com\"]".to_owned(),
        "pending [true]".to_owned(),
        "resume claimed, decision approved".to_owned(),
        "outcome claimed [\"files.example.com\"]".to_owned(),
        "download after approval 200".to_owned(),
        "complete done".to_owned(),
        "approvals [\"files.example.com\"]".to_owned(),
        "revoked site files.example.com".to_owned(),
        "events refusal.recorded approval.requested approval.resolved approval.revoked".to_owned(),
        "unknown card 404 INTERRUPT_NOT_FOUND".to_owned(),
        "bad token 401 UNAUTHORIZED".to_owned(),
    ] {
        let want = format!("{kind}: {line}");
        assert!(out.contains(&want), "missing {want:?} in\n{out}");
    }
}

/// The coverage lines: nothing missing, nothing extra, and a new operation caught.
fn assert_coverage(out: &str, class: &str) {
    assert!(
        out.contains(&format!("coverage {class}: ")) && out.contains("operations, missing []"),
        "{out}"
    );
    assert!(out.contains("coverage extra: []"), "{out}");
    let caught = ["[\"frobnicate_widget\"]", "[\"frobnicateWidget\"]"]
        .map(|m| format!("coverage of a document with a new operation: missing {m}"));
    assert!(caught.iter().any(|c| out.contains(c)), "{out}");
}

#[test]
fn the_generated_files_are_what_the_document_gives() {
    let out = Command::new("python3")
        .arg(root().join("clients/generate.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert_success(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_runs_the_loop() {
    if !python_has("httpx2") {
        return;
    }
    let (_o, g, port) = example_bench().await;
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("clients/python/tests/loop.py"))
        .env("PYTHONPATH", root().join("clients/python/src"));
    let out = against(cmd, &g, port);
    assert_loop(&out, "sync");
    assert_loop(&out, "async");
    assert!(out.contains("(unknown"), "the API's message is kept: {out}");
    assert_coverage(&out, "Client");
    assert_coverage(&out, "AsyncClient");
}

/// `pip install ./clients/python` works: the package and its `py.typed`, built offline with
/// the machine's setuptools (its one dependency, httpx2, is there already).
#[test]
fn the_python_package_installs() {
    if !python_has("httpx2, setuptools, wheel") {
        return;
    }
    // pip builds in the source tree (build/, *.egg-info): build a copy, not the checkout.
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-r")
        .arg(root().join("clients/python"))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let target = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-build-isolation",
            "--target",
        ])
        .arg(target.path())
        .arg(copy.path().join("python"))
        .output()
        .unwrap();
    stdout_of(&out, "pip install ./clients/python");
    assert!(target.path().join("egressgate/py.typed").is_file());
    let out = Command::new("python3")
        .args([
            "-c",
            "import egressgate; print(egressgate.__file__, len(egressgate.OPERATIONS))",
        ])
        .env("PYTHONPATH", target.path())
        .current_dir(target.path())
        .output()
        .unwrap();
    let printed = stdout_of(&out, "import egressgate");
    assert!(
        printed.starts_with(&target.path().display().to_string()),
        "{printed}"
    );
}

/// Where `.ci/run` installs the pinned TypeScript compiler (`EGRESSGATE_TEST_TSC` overrides).
fn tsc() -> PathBuf {
    std::env::var_os("EGRESSGATE_TEST_TSC").map_or_else(
        || PathBuf::from("/var/tmp/egressgate-tsc/node_modules/typescript/bin/tsc"),
        PathBuf::from,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_type_checks_and_runs_the_loop() {
    let tsc = tsc();
    if !available(
        Command::new("node").arg(&tsc).arg("--version"),
        "node and the pinned tsc",
    ) {
        return;
    }
    let package = root().join("clients/typescript");
    // The package alone, strict, as published.
    let out = Command::new("node")
        .arg(&tsc)
        .args(["--noEmit", "--strict", "-p"])
        .arg(&package)
        .output()
        .unwrap();
    stdout_of(&out, "tsc --noEmit --strict (package)");
    // The package with the loop, compiled where the checkout is not written to.
    let build = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(&tsc)
        .args(["--strict", "-p"])
        .arg(package.join("test"))
        .arg("--outDir")
        .arg(build.path())
        .output()
        .unwrap();
    stdout_of(&out, "tsc --strict (package and loop)");
    std::fs::write(build.path().join("package.json"), r#"{"type": "module"}"#).unwrap();
    let (_o, g, port) = example_bench().await;
    let mut cmd = Command::new("node");
    cmd.arg(build.path().join("test/loop.js"));
    let out = against(cmd, &g, port);
    assert_loop(&out, "ts");
    assert_coverage(&out, "Client");
}
