//! The AG-UI example against the real binary: an AG-UI agent (the Python `ag-ui-protocol`
//! types) that ends a run with the interrupt outcome and forwards the next run's resume
//! entries. Both branches, approve and decline. (The LangGraph and Strands adapters, with the
//! real framework packages, are `tests/framework_adapters.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::examples::{
    assert_one_claim_per_card, example_bench, python_has, run_example_ok as run,
};

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
    assert_one_claim_per_card(&g, 2).await;
}
