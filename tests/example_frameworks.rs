//! The framework examples against the real binary: an AG-UI agent (the Python
//! `ag-ui-protocol` types) that ends a run with the interrupt outcome and forwards the next
//! run's resume entries, and a LangGraph-style interrupt()/Command(resume=...) adapter whose
//! node re-runs on resume without asking twice. Both branches, approve and decline.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::examples::{example_bench, python_has, run_example_ok as run};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agui_agent_pauses_and_resumes_once() {
    if !python_has("ag_ui.core") {
        return;
    }
    let (_o, g, port) = example_bench().await;
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
    let (_o, g, port) = example_bench().await;
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
