//! The agent-side example in `examples/agent_tool.py` runs against the real binary, both
//! branches, approve and decline, so integrators copy a shape that works.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

// Multi-threaded: the test blocks on the Python process while its origin must keep serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_agent_runs_both_branches() {
    let o = origin().await;
    let port = o.addr.port();
    let g = gate()
        .resolve("files.example.com", "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &port.to_string(),
        ])
        .start();
    for (flag, expect_download) in [("--approve", "200"), ("--decline", "403")] {
        let out = std::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/agent_tool.py"
            ))
            .arg(flag)
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
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{flag}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("script download: 403"), "{stdout}");
        assert!(
            stdout.contains("card: Allow connections (downloads and uploads) to files.example.com"),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "script download after the decision: {expect_download}"
            )),
            "{stdout}"
        );
    }
}
