//! The AG-UI adapter (`egressgate.adapters.agui`) from a real AG-UI frontend: the example's
//! endpoint (`python -m egressgate.examples.agui serve`, HTTP + SSE) against the real binary,
//! driven by `@ag-ui/client`'s `HttpAgent` in Node (`tests/clients/agui.mjs`). In four chats:
//! the interrupt outcome pending in the client, a resume before the person answered (the run
//! fails, the interrupt stays), the person's approval through the API then the resumed run's
//! final text, the same resume again (nothing runs); a cancelled entry that declines the card;
//! an answer given in the chat; a cancelled entry nobody answered (withdrawn, the card left
//! alone, until the chat's next turn expires it). Here: what the gate stored for each, and one
//! claim per card answered.
//!
//! The pinned `@ag-ui/client` is installed by `.ci/run` outside the checkout
//! (`EGRESSGATE_TEST_AGUI`), `ag-ui-protocol` with the framework packages
//! (`EGRESSGATE_TEST_PY_FRAMEWORKS`); without them the test fails under `CI=true` and says it
//! skipped otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use support::adapters::{outcome_of, python_path};
use support::examples::{as_runtime, assert_one_claim_per_card, available, example_bench};
use support::*;

/// Where `.ci/run` installs the pinned `@ag-ui/client` (its `node_modules` is under it).
fn agui_client() -> PathBuf {
    std::env::var_os("EGRESSGATE_TEST_AGUI")
        .map_or_else(|| PathBuf::from("/var/tmp/egressgate-agui"), PathBuf::from)
}

/// The example's endpoint, serving for `alice` until dropped.
struct Endpoint(Child);

impl Endpoint {
    /// Starts it; its URL from its first line.
    fn start(g: &Gate, port: u16) -> (Self, String) {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "egressgate.examples.agui", "serve", "--user", "alice"])
            .env("PYTHONPATH", python_path())
            .stdout(Stdio::piped());
        let mut child = as_runtime(&mut cmd, g, port).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url: Value = serde_json::from_str(&line).expect("the endpoint's URL line");
        (Self(child), url["url"].as_str().unwrap().to_owned())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ag_ui_client_sees_the_interrupt_and_its_resume_claims_the_card_once() {
    let client = agui_client();
    let mut check = Command::new("node");
    check.arg("-e").arg(format!(
        "require({:?})",
        client.join("node_modules/@ag-ui/client").display()
    ));
    let mut py = Command::new("python3");
    py.args(["-c", "import ag_ui.core"])
        .env("PYTHONPATH", python_path());
    if !available(&mut check, "node and the pinned @ag-ui/client")
        || !available(&mut py, "the pinned ag-ui-protocol")
    {
        return;
    }
    let (_o, g, port) = example_bench().await;
    let (_endpoint, url) = Endpoint::start(&g, port);
    let mut node = Command::new("node");
    node.arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/agui.mjs"))
        .env("AGUI_URL", &url)
        .env("EGRESSGATE_TEST_AGUI", &client);
    let out = as_runtime(&mut node, &g, port).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let threads: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = threads
        .iter()
        .map(|t| t["thread"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["approve", "cancel", "chat", "withdraw"], "{stdout}");
    let declined = format!(
        "I could not get http://{FILES}:{port}/data.csv: the person did not approve {FILES}; \
         continue without that data and say so"
    );
    for (thread, final_text, state, decision) in [
        (
            &threads[0],
            json!("origin says hi"),
            "done",
            json!("approved"),
        ),
        (&threads[1], json!(declined), "done", json!("cancelled")),
        (
            &threads[2],
            json!("origin says hi"),
            "done",
            json!("approved"),
        ),
        (&threads[3], Value::Null, "pending", Value::Null),
    ] {
        assert_eq!(thread["final"], final_text, "{thread}");
        let id = thread["interrupt_id"].as_str().unwrap();
        let stored = outcome_of(&g, id).await;
        assert_eq!(stored["state"], state, "{stored}");
        assert_eq!(stored["user_id"], "alice", "{stored}");
        assert_eq!(stored["decision"]["outcome"], decision, "{stored}");
    }
    // The withdrawn card was left alone; the chat's next turn expires it.
    g.api().turn("alice", "agui-withdraw", &[]).await;
    let withdrawn = threads[3]["interrupt_id"].as_str().unwrap();
    assert_eq!(outcome_of(&g, withdrawn).await["state"], "expired");
    // Three cards answered, each claimed once: the early resume, the repeated one and the
    // withdrawn card claimed nothing.
    assert_one_claim_per_card(&g, 3).await;
}
