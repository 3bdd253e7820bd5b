//! The MCP example (`examples/mcp_client.py`, the official Python `mcp` SDK) against the
//! real binary: both tools over stdio and over streamable HTTP, the person's answer through
//! `input_required` (2026-07-28) and through a URL-mode elicitation (2025-11-25), the replay
//! of a sealed requestState (no second claim), and the proxy honouring the decision.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::examples::{example_bench, python_has, run_example_ok};
use support::*;

/// Runs `examples/mcp_client.py` over `transport` speaking `protocol`, with `extra` flags.
fn mcp(g: &Gate, port: u16, (transport, protocol): (&str, &str), extra: &[&str]) -> String {
    let mut args = vec!["--transport", transport, "--protocol", protocol];
    args.extend_from_slice(extra);
    run_example_ok(g, port, "mcp_client.py", &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_client_example_over_stdio_and_http() {
    if !python_has("mcp, httpx2") {
        return;
    }
    let (_o, g, port) = example_bench().await;
    for transport in ["stdio", "http"] {
        let out = mcp(&g, port, (transport, "2026-07-28"), &[]);
        for line in [
            "script download: 403",
            "tools: egress_refusals, request_egress_approval",
            "refused this turn: files.example.com",
            "input required: Allow connections (downloads and uploads) to files.example.com",
            "retry without an answer refused",
            "answer: approved",
            "replayed: approved (no second claim)",
            "tampered state refused",
            "stored state: done",
            "script download after the decision: 200",
        ] {
            assert!(
                out.contains(line),
                "{transport}: missing {line:?} in\n{out}"
            );
        }
        let out = mcp(&g, port, (transport, "2026-07-28"), &["--decline"]);
        assert!(out.contains("answer: declined"), "{out}");
        assert!(out.contains("replayed: declined"), "{out}");
        assert!(
            out.contains("script download after the decision: 403"),
            "{out}"
        );
    }
    for transport in ["stdio", "http"] {
        let out = mcp(&g, port, (transport, "2025-11-25"), &[]);
        assert!(out.contains("card page: /ui/cards/"), "{out}");
        assert!(out.contains("asked through: url"), "{out}");
        assert!(out.contains("answer: approved"), "{out}");
        assert!(
            out.contains("script download after the decision: 200"),
            "{out}"
        );
        // A client without URL mode (no browser) is asked with a yes/no form.
        let out = mcp(
            &g,
            port,
            (transport, "2025-11-25"),
            &["--form-only", "--decline"],
        );
        assert!(out.contains("asked through: form"), "{out}");
        assert!(out.contains("answer: declined"), "{out}");
        assert!(
            out.contains("script download after the decision: 403"),
            "{out}"
        );
    }
    // Eight cards were answered, each exactly once, replays and tampered states included.
    let audit = g
        .api()
        .get("/v1/admin/audit?kind=approval_resolved", ADMIN)
        .await
        .json();
    let rows = audit["audit"].as_array().unwrap();
    let mut cards: Vec<&str> = rows
        .iter()
        .map(|r| r["interrupt_id"].as_str().unwrap())
        .collect();
    assert_eq!(cards.len(), 8, "{audit}");
    cards.sort_unstable();
    cards.dedup();
    assert_eq!(cards.len(), 8, "one resolution per card: {audit}");
}
