//! Running the Python examples under `examples/` against a gate: one way to start a gate
//! whose `files.example.com` is a loopback origin, one way to check that the Python packages
//! an example needs are there, and one way to run an example with the runtime's settings.

use std::process::{Command, Output};

use super::{ADMIN, FILES, Gate, Origin, RUNTIME, gate, origin};

/// A gate where `files.example.com` resolves to loopback and `port` may be reached.
pub fn gate_for_origin(port: u16) -> Gate {
    gate().loopback().ports(&[port]).names(&[FILES]).start()
}

/// A loopback origin and a [`gate_for_origin`] for it: (origin, gate, the origin's port).
pub async fn example_bench() -> (Origin, Gate, u16) {
    let o = origin().await;
    let port = o.port();
    (o, gate_for_origin(port), port)
}

/// Whether `python3 -c "import mods"` works. In CI a missing package fails the test loudly
/// (`.ci/run` installs it); elsewhere the test says why it skipped.
pub fn python_has(mods: &str) -> bool {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", &format!("import {mods}")]);
    available(&mut cmd, &format!("python3 with {mods}"))
}

/// Whether `cmd` runs and succeeds; what it stands for is `what`. In CI a missing tool fails
/// the test loudly (`.ci/run` installs it); elsewhere the test says why it skipped.
pub fn available(cmd: &mut Command, what: &str) -> bool {
    let ok = cmd.output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").is_err(),
            "{what} is missing; .ci/run installs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    ok
}

/// Runs `examples/{script}` with `args` the way a runtime would: the gate's control API, the
/// runtime token, the binary (for stdio MCP) and the file the script downloads from the
/// origin on `port`; no proxy variables of the test's own environment.
pub fn run_example(g: &Gate, port: u16, script: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new("python3");
    cmd.arg(format!("{}/examples/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args);
    as_runtime(&mut cmd, g, port).output().unwrap()
}

/// `cmd` with a runtime's settings for `g` (its control API, the runtime token, the binary)
/// and the file it downloads from the origin on `port`; no proxy variables of the test's own
/// environment.
pub fn as_runtime<'c>(cmd: &'c mut Command, g: &Gate, port: u16) -> &'c mut Command {
    cmd.env("EGRESSGATE_CONTROL", format!("http://{}", g.api().addr))
        .env("EGRESSGATE_RUNTIME_TOKEN", RUNTIME)
        .env("EGRESSGATE_BIN", env!("CARGO_BIN_EXE_egressgate"))
        .env(
            "EXAMPLE_URL",
            format!("http://files.example.com:{port}/data.csv"),
        )
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
}

/// [`run_example`], which must succeed; its stdout.
pub fn run_example_ok(g: &Gate, port: u16, script: &str, args: &[&str]) -> String {
    let out = run_example(g, port, script, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{script} {args:?}:\n{stdout}");
    stdout
}

/// Asserts that `g` audited exactly `cards` approval resolutions: one claim per card answered,
/// however many processes tried to resume it.
pub async fn assert_one_claim_per_card(g: &Gate, cards: usize) {
    let audit = g
        .api()
        .get("/v1/admin/audit?kind=approval_resolved", ADMIN)
        .await
        .json();
    assert_eq!(
        audit["audit"].as_array().unwrap().len(),
        cards,
        "one claim per card: {audit}"
    );
}
