//! Contract tests: schemathesis (from PyPI) generates requests from the served OpenAPI
//! document and runs them against the real binary, with the runtime and the admin token for
//! their security schemes, and fails on any 5xx, any response that violates its schema, any
//! status or content type the document does not list, any ignored authentication, and any
//! method the document does not name answered as if it existed.
//!
//! Not run: `positive_data_acceptance` and `negative_data_rejection`. Validation is semantic
//! (IDNA, the Public Suffix List, internal names, byte lengths), so the document gives types
//! and simple bounds and is looser than the handlers; every refusal is a documented 4xx
//! with its code, which `status_code_conformance` and the schema checks do verify.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
    response_schema_conformance,response_headers_conformance,unsupported_method,ignored_auth,\
    missing_required_header,use_after_free,ensure_resource_availability";

/// schemathesis's CLI, run as a module of the same `python3` the other examples use (so no
/// dependency on where pip put the `st` script).
fn st() -> std::process::Command {
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-m", "schemathesis.cli"]);
    cmd
}

fn have_schemathesis() -> bool {
    support::examples::available(
        st().arg("--version"),
        "schemathesis (pip install schemathesis)",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_contract_violation() {
    if !have_schemathesis() {
        return;
    }
    // The fuzzer sends thousands of requests without a valid token from one address; the
    // limit on those (`--auth-failures-per-client`) is tested in auth_limit.
    let g = gate()
        .args(&["--auth-failures-per-client", "1000000"])
        .start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        format!(
            "[auth.openapi.runtime]\nbearer = \"{RUNTIME}\"\n\n[auth.openapi.admin]\nbearer = \"{ADMIN}\"\n"
        ),
    )
    .unwrap();
    let api = g.api();
    let out = tokio::task::spawn_blocking(move || {
        // In the temp dir: schemathesis keeps a cache (.schemathesis/) in its working dir.
        st().current_dir(dir.path())
            .arg("--config-file")
            .arg(&config)
            .args(["--no-color", "run"])
            .arg(format!("http://{}/openapi.json", api.addr))
            .args(["--checks", CHECKS])
            .args(["--max-examples", "15", "--generation-deterministic"])
            // A server-sent event stream never ends; its answer is tested in person_side.
            .args(["--exclude-path", "/v1/chats/{chat_id}/events"])
            // Slack's clicks carry an HMAC over the raw body that no generator can forge, and
            // this gate has no signing secret (every click is `404 SLACK_NOT_CONFIGURED`); the
            // signature's schema filters out nearly every generated example. tests/slack.rs
            // sends it badly signed, stale, replayed and unmapped clicks.
            .args(["--exclude-path", "/v1/slack/interactions"])
            .args(["--workers", "2", "--request-timeout", "10"])
            .arg("--report-dir")
            .arg(dir.path().join("report"))
            .env_remove("http_proxy")
            .env_remove("HTTP_PROXY")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = stdout_of(&out, "schemathesis found problems");
    assert!(
        stdout.contains("26/26") || stdout.contains("Selected:"),
        "{stdout}"
    );
    assert!(stdout.contains("passed"), "{stdout}");
}
