//! The framework adapters (`egressgate.adapters.strands`, `egressgate.adapters.langgraph`)
//! through their runnable examples (`python -m egressgate.examples.NAME`), each run as a
//! separate process against the real binary, as a runtime and a person would: ask in one
//! process (a card waits; the batch rule kept the cancelled retry off the proxy); the person
//! approves with the card's secret; resume in a new process (the downloaded body is the final
//! text); resume again (nothing changes, the card is already done); unattended (the deny the
//! model got, no card); a resumed run refused again on another host (a chained card, then the
//! end); two resume processes at once (exactly one finishes).
//!
//! The pinned framework packages are installed by `.ci/run` outside the checkout
//! (`EGRESSGATE_TEST_PY_FRAMEWORKS`); without them the tests fail under `CI=true` and say they
//! skipped otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};
use support::examples::{as_runtime, assert_one_claim_per_card, available};
use support::*;

const OTHER: &str = "other.example.net";
const BODY: &str = "origin says hi";

/// Where `.ci/run` installs the pinned framework packages.
fn frameworks() -> PathBuf {
    std::env::var_os("EGRESSGATE_TEST_PY_FRAMEWORKS").map_or_else(
        || PathBuf::from("/var/tmp/egressgate-py-frameworks"),
        PathBuf::from,
    )
}

/// The client's source and the framework packages, for `python3`.
fn python_path() -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/python/src");
    format!("{}:{}", src.display(), frameworks().display())
}

/// One framework's example, run as a runtime of one gate would run it.
struct Example<'g> {
    module: String,
    gate: &'g Gate,
    port: u16,
}

impl Example<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", &self.module])
            .args(args)
            .env("PYTHONPATH", python_path());
        as_runtime(&mut cmd, self.gate, self.port);
        cmd
    }

    fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/data.csv", self.port)
    }

    /// Runs it; its one JSON line and its exit code.
    fn run(&self, args: &[&str]) -> (Value, i32) {
        read(self.command(args).output().unwrap(), args)
    }

    /// Runs it; it must succeed: its one JSON line.
    fn ok(&self, args: &[&str]) -> Value {
        let (line, code) = self.run(args);
        assert_eq!(code, 0, "{args:?}: {line}");
        line
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn ask(&self, user: &str, chat: &str, hosts: &[&str]) -> Value {
        let mut args = vec!["ask", "--user", user, "--chat", chat];
        let urls: Vec<String> = hosts.iter().map(|h| self.url(h)).collect();
        for u in &urls {
            args.extend(["--url", u.as_str()]);
        }
        self.ok(&args)
    }

    fn resume(&self, card: &Value) -> Value {
        self.ok(&["resume", "--interrupt-id", id(card)])
    }
}

fn read(out: Output, args: &[&str]) -> (Value, i32) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{args:?} -> {stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {stdout}\n{stderr}");
    (
        serde_json::from_str(lines[0]).unwrap(),
        out.status.code().unwrap(),
    )
}

fn id(card: &Value) -> &str {
    card["interrupt_id"].as_str().unwrap()
}

async fn outcome(g: &Gate, card: &Value) -> Value {
    let r = g
        .api()
        .get(&format!("/v1/interrupts/{}/outcome", id(card)), RUNTIME)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// What the person does on the card page: approve (or decline) with the card's secret alone.
async fn answer(g: &Gate, card: &Value, approved: bool) {
    let body = json!({"secret": card["secret"], "resume": [{"interruptId": id(card),
        "status": "resolved", "payload": {"approved": approved}}]});
    let path = format!("/v1/interrupts/{}/resume", id(card));
    let r = g
        .api()
        .call("POST", &path, None, None, Some(&body.to_string()))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "claimed", "{}", r.text());
}

/// The user's pending cards.
async fn pending(g: &Gate, user: &str) -> Vec<Value> {
    let path = format!("/v1/users/{user}/interrupts?state=pending");
    let r = g
        .api()
        .call("GET", &path, Some(RUNTIME), Some(user), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["interrupts"].as_array().unwrap().clone()
}

async fn the_whole_loop(name: &str) {
    let mut check = Command::new("python3");
    check
        .args([
            "-c",
            "import strands, langgraph.checkpoint.sqlite, ag_ui.core, a2a.server.routes, uvicorn",
        ])
        .env("PYTHONPATH", python_path());
    if !available(&mut check, "the pinned framework packages") {
        return;
    }
    let o = origin().await;
    let port = o.port();
    let g = gate()
        .loopback()
        .ports(&[port])
        .names(&[FILES, OTHER])
        .start();
    let ex = Example {
        module: format!("egressgate.examples.{name}"),
        gate: &g,
        port,
    };

    // Ask: a card waits, and the script was refused once (the retry beside the approval
    // call was cancelled by the batch rule before it reached the proxy).
    let card = ex.ask("alice", "c1", &[FILES]);
    assert!(
        card["secret"].as_str().is_some_and(|s| !s.is_empty()),
        "{card}"
    );
    let o1 = outcome(&g, &card).await;
    assert_eq!(o1["state"], "pending", "{o1}");
    assert_eq!(o1["card"]["sites"], json!([FILES]), "{o1}");
    let waiting = pending(&g, "alice").await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["interrupt_id"], card["interrupt_id"]);
    let refusals = g
        .api()
        .refusals(&support::Turn {
            id: waiting[0]["turn_id"].as_str().unwrap().to_owned(),
            credential: String::new(),
        })
        .await;
    assert_eq!(refusals["refusals"][0]["host"], FILES, "{refusals}");
    assert_eq!(refusals["refusals"][0]["count"], 1, "{refusals}");

    // The person approves; a new process takes the click over and finishes.
    answer(&g, &card, true).await;
    assert_eq!(ex.resume(&card), json!({"final": BODY}));
    assert_eq!(outcome(&g, &card).await["state"], "done");
    // Again: nothing runs, it says so.
    let again = ex.resume(&card);
    assert_eq!(again["already_done"], true, "{again}");
    assert_eq!(again["interrupt_id"], card["interrupt_id"], "{again}");
    assert!(pending(&g, "alice").await.is_empty());

    // Unattended: the deterministic deny, and no card.
    let url = ex.url(OTHER);
    let out = ex.ok(&[
        "ask",
        "--user",
        "bob",
        "--chat",
        "c2",
        "--url",
        &url,
        "--unattended",
    ]);
    let deny = out["deny"].as_str().unwrap();
    assert!(deny.starts_with("NO_HUMAN: "), "{out}");
    assert!(deny.contains(OTHER), "{out}");
    assert!(
        deny.ends_with("Continue without that data and say so."),
        "{out}"
    );
    assert!(out["final"].as_str().unwrap().contains(deny), "{out}");
    assert!(pending(&g, "bob").await.is_empty());

    // The resumed run is refused again on another host: a chained card, then the end.
    let first = ex.ask("carol", "c3", &[FILES, OTHER]);
    answer(&g, &first, true).await;
    let chained = ex.resume(&first);
    assert_ne!(id(&chained), id(&first), "{chained}");
    assert_ne!(chained["secret"], first["secret"], "{chained}");
    let oc = outcome(&g, &chained).await;
    assert_eq!(oc["state"], "pending", "{oc}");
    assert_eq!(oc["card"]["sites"], json!([OTHER]), "{oc}");
    answer(&g, &chained, true).await;
    assert_eq!(
        ex.resume(&chained),
        json!({"final": format!("{BODY}\n{BODY}")})
    );

    // A decline: the resumed run continues without the data and says so.
    let declined = ex.ask("erin", "c5", &[FILES]);
    answer(&g, &declined, false).await;
    let final_text = ex.resume(&declined)["final"].as_str().unwrap().to_owned();
    assert!(
        final_text.ends_with(
            "the person did not approve files.example.com; continue without that data and say so"
        ),
        "{final_text}"
    );

    // Two resume processes at once: exactly one finishes.
    let card = ex.ask("dave", "c4", &[FILES]);
    answer(&g, &card, true).await;
    let args = ["resume", "--interrupt-id", id(&card)];
    let racers = [ex.spawn(&args), ex.spawn(&args)];
    let results: Vec<(Value, i32)> = racers
        .into_iter()
        .map(|c| read(c.wait_with_output().unwrap(), &args))
        .collect();
    let finished: Vec<_> = results
        .iter()
        .filter(|(v, _)| v.get("final").is_some())
        .collect();
    assert_eq!(finished.len(), 1, "{results:?}");
    assert_eq!(finished[0], &(json!({"final": BODY}), 0));
    let (other, code) = results
        .iter()
        .find(|(v, _)| v.get("final").is_none())
        .unwrap();
    let lost = other["error"]["code"] == "CLAIM_LOST" && *code == 3;
    let done = other["already_done"] == true && *code == 0;
    assert!(lost || done, "{other} ({code})");
    assert_one_claim_per_card(&g, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strands_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("strands").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("langgraph").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("agui").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("a2a").await;
}
