//! The agent-side example in `examples/agent_tool.py` runs against the real binary, both
//! branches, approve and decline, so integrators copy a shape that works.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::examples::{example_bench, gate_for_origin, run_example};
use support::*;

// Multi-threaded: the test blocks on the Python process while its origin must keep serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_agent_runs_both_branches() {
    let (_o, g, port) = example_bench().await;
    for (flag, expect_download) in [("--approve", "200"), ("--decline", "403")] {
        let out = run_example(&g, port, "agent_tool.py", &[flag]);
        let stdout = stdout_of(&out, flag);
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

/// The example's edge: without a token it says where it looked, with no traceback.
#[test]
fn the_example_agent_explains_a_missing_token() {
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/agent_tool.py"
        ))
        .current_dir(empty.path())
        .env_remove("EGRESSGATE_RUNTIME_TOKEN")
        .env_remove("EGRESSGATE_DATA_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no runtime token"), "{stderr}");
    assert!(stderr.contains("egressgate-data/tokens"), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
}

/// Without a running control plane the example names the address it tried.
#[test]
fn the_example_agent_explains_an_unreachable_control_plane() {
    let port = free_port();
    let out = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/agent_tool.py"
        ))
        .env("EGRESSGATE_CONTROL", format!("http://127.0.0.1:{port}"))
        .env("EGRESSGATE_RUNTIME_TOKEN", RUNTIME)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the control plane at http://127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("Traceback"), "{stderr}");
}

/// Approved but the origin has no such file (a real `python3 -m http.server` over an empty
/// folder): the example fails and says that the gate let it through and the origin did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_agent_explains_a_missing_file_after_approval() {
    use std::io::BufRead as _;
    let site = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = std::process::Command::new("python3")
        .args([
            "-u",
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(site.path())
        .arg(port.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.contains("Serving HTTP"), "{ready}");
    let g = gate_for_origin(port);
    let out = run_example(&g, port, "agent_tool.py", &[]);
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("script download after the decision: 404"),
        "{stdout}"
    );
    assert!(
        stderr.contains("answered 404: does the origin serve that file?"),
        "{stderr}"
    );
}
