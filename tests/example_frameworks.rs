//! The framework examples against the real binary: an AG-UI agent (the Python
//! `ag-ui-protocol` types) that ends a run with the interrupt outcome and forwards the next
//! run's resume entries, and a LangGraph-style interrupt()/Command(resume=...) adapter whose
//! node re-runs on resume without asking twice. Both branches, approve and decline.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

fn python_has(mods: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {mods}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").is_err(),
            "python3 with {mods} is missing; .ci/run installs it"
        );
        eprintln!("skipped: python3 with {mods} is missing");
    }
    ok
}

fn run(g: &Gate, port: u16, script: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("python3")
        .arg(format!("{}/examples/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .env("EGRESSGATE_CONTROL", format!("http://{}", g.api().addr))
        .env("EGRESSGATE_RUNTIME_TOKEN", RUNTIME)
        .env(
            "EXAMPLE_URL",
            format!("http://files.example.com:{port}/data.csv"),
        )
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{script} {args:?}:\n{stdout}");
    stdout
}

fn gate_with_origin(port: u16) -> Gate {
    gate()
        .resolve("files.example.com", "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &port.to_string(),
        ])
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agui_agent_pauses_and_resumes_once() {
    if !python_has("ag_ui.core") {
        return;
    }
    let o = origin().await;
    let port = o.addr.port();
    let g = gate_with_origin(port);
    for (args, download, stored) in [
        (&[][..], "now answers 200", "stored: done approved"),
        (&["--decline"][..], "Not approved", "stored: done declined"),
    ] {
        let out = run(&g, port, "agui_agent.py", args);
        assert!(out.contains("\"type\":\"RUN_FINISHED\""), "{out}");
        assert!(out.contains("\"outcome\":{\"type\":\"interrupt\""), "{out}");
        assert!(
            out.contains("RUN_FINISHED outcome: interrupt reason: tool_call toolCallId: True"),
            "{out}"
        );
        assert!(
            out.contains("card: Allow connections (downloads and uploads) to files.example.com"),
            "{out}"
        );
        assert!(out.contains(download), "{out}");
        assert!(
            out.contains("run 3 (same resume again): That request is no longer waiting"),
            "{out}"
        );
        assert!(out.contains(stored), "{out}");
    }
    let audit = g
        .api()
        .get("/v1/admin/audit?kind=approval_resolved", ADMIN)
        .await
        .json();
    assert_eq!(
        audit["audit"].as_array().unwrap().len(),
        2,
        "one claim per card: {audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_langgraph_adapter_re_runs_the_node_without_asking_twice() {
    if !python_has("json") {
        return;
    }
    let o = origin().await;
    let port = o.addr.port();
    let g = gate_with_origin(port);
    for (args, outcome, download) in [
        (&[][..], "resumed: approved", "after the decision: 200"),
        (
            &["--decline"][..],
            "resumed: declined",
            "after the decision: 403",
        ),
    ] {
        let out = run(&g, port, "langgraph_adapter.py", args);
        assert!(out.contains("script download: 403"), "{out}");
        assert!(
            out.contains(
                "__interrupt__: Allow connections (downloads and uploads) to files.example.com"
            ),
            "{out}"
        );
        assert!(
            out.contains("refused before any claim: decision 'edit'"),
            "{out}"
        );
        assert!(
            out.contains("state after the refused decision: pending"),
            "{out}"
        );
        assert!(
            out.contains(
                "the approval tool's answers across the node's runs: ask, pending, pending"
            ),
            "{out}"
        );
        assert!(out.contains(outcome), "{out}");
        assert!(out.contains(download), "{out}");
    }
}
