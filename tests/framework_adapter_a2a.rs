//! The A2A adapter (`egressgate.adapters.a2a`) served as a real A2A agent
//! (`python -m egressgate.examples.a2a serve`: the SDK's executor, request handler and HTTP
//! app on loopback) and driven by the A2A SDK's own client (`tests/clients/a2a_client.py`),
//! against the real binary: the task waits in `input-required` carrying the card (its id,
//! question, sites, the card link of `--control-public-url`); an answer before the person
//! decided, or one that is neither approve nor deny, leaves it waiting and the card untouched;
//! after the person approved, the client's answer in the same task completes it with the
//! downloaded text; a second answer is the SDK's terminal-state error with egressgate's word
//! that the card is done. The client's word never grants what the person declined, and a task
//! another process finished (restored from the card's snapshot) is not run again.
//! (The ask/resume command line in separate processes is `tests/framework_adapters.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use support::adapters::{outcome_of, python_path};
use support::examples::{as_runtime, assert_one_claim_per_card, available};
use support::person::page_resume;
use support::*;

const PUBLIC: &str = "https://gate.example.test";
const BODY: &str = "origin says hi";
const DECLINED: &str =
    "the person did not approve files.example.com; continue without that data and say so";

/// `python3` with the client's source and the pinned framework packages (`.ci/run`).
fn python(args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.args(args).env("PYTHONPATH", python_path());
    cmd
}

/// The served agent; killed when dropped.
struct Agent {
    child: Child,
    url: String,
    client: String,
    /// The origin's port: the file the tasks download is there.
    port: u16,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    /// `serve` as a runtime of `g` would run it; its first line is `{"url"}`.
    fn serve(g: &Gate, port: u16) -> Agent {
        let mut cmd = python(&["-m", "egressgate.examples.a2a", "serve"]);
        as_runtime(&mut cmd, g, port).stdout(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = serde_json::from_str::<Value>(&line).unwrap()["url"]
            .as_str()
            .unwrap_or_else(|| panic!("serve printed {line:?}"))
            .to_owned();
        let client = format!("{}/tests/clients/a2a_client.py", env!("CARGO_MANIFEST_DIR"));
        Agent {
            child,
            url,
            client,
            port,
        }
    }

    /// The SDK's client sends `text` (with `extra` flags): its one JSON line.
    fn send(&self, text: &str, extra: &[&str]) -> Value {
        let mut cmd = python(&[&self.client, &self.url, text]);
        let out = cmd.args(extra).env_remove("http_proxy").output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!(
            "{text} {extra:?} -> {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// A new task for `user` in chat `chat` (its A2A context) downloading the data file.
    fn ask(&self, user: &str, chat: &str) -> Value {
        let url = format!("http://{FILES}:{}/data.csv", self.port);
        let text = format!("Download these and show them to me: {url}");
        self.send(&text, &["--user", user, "--context-id", chat])["task"].clone()
    }

    /// The client's `answer` in `task`: the task, or the refusal as `{"error"}`.
    fn answer(&self, task: &Value, answer: &str) -> Value {
        let (id, ctx) = (
            task["id"].as_str().unwrap(),
            task["contextId"].as_str().unwrap(),
        );
        let out = self.send(answer, &["--task-id", id, "--context-id", ctx]);
        out.get("task").cloned().unwrap_or(out)
    }
}

/// The card the task waits on (the `input-required` message's data part).
fn card(task: &Value) -> Value {
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let parts = task["status"]["message"]["parts"].as_array().unwrap();
    parts
        .iter()
        .find_map(|p| p["data"].get("egressgate_card"))
        .unwrap()
        .clone()
}

/// What the task's status message says.
fn said(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The completed task's text.
fn final_text(task: &Value) -> &str {
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()
}

async fn state(g: &Gate, id: &str) -> Value {
    outcome_of(g, id).await["state"].clone()
}

/// The person answers on the card page with the secret of the task's card link.
async fn decide(g: &Gate, card: &Value, approved: bool) {
    let link = card["card_url"].as_str().unwrap();
    let secret = link.split_once("#secret=").unwrap().1;
    let r = page_resume(
        &g.api(),
        card["interrupt_id"].as_str().unwrap(),
        secret,
        approved,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The agent asks for (user, chat) and the person answers the task's card with `approved`:
/// the waiting task and its card, as the rows that go on from a decision start.
async fn decided(
    g: &Gate,
    agent: &Agent,
    (user, chat): (&str, &str),
    approved: bool,
) -> (Value, Value) {
    let task = agent.ask(user, chat);
    let c = card(&task);
    decide(g, &c, approved).await;
    (task, c)
}

/// A gate with a public URL whose `files.example.com` is the loopback origin, and the agent.
async fn bench() -> Option<(Origin, Gate, Agent)> {
    let mut check = python(&["-c", "import a2a.server.routes, uvicorn"]);
    if !available(&mut check, "the pinned a2a-sdk") {
        return None;
    }
    let o = origin().await;
    let port = o.port();
    let g = gate()
        .loopback()
        .ports(&[port])
        .names(&[FILES])
        .args(&["--control-public-url", PUBLIC])
        .start();
    let agent = Agent::serve(&g, port);
    Some((o, g, agent))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_waits_with_the_card_and_the_answer_in_it_completes_it_once() {
    let Some((o, g, agent)) = bench().await else {
        return;
    };
    let task = agent.ask("alice", "c1");
    let c = card(&task);
    let id = c["interrupt_id"].as_str().unwrap().to_owned();
    assert_eq!(c["sites"], json!([FILES]), "{c}");
    assert_eq!(c["packages"], json!([]), "{c}");
    assert_field_starts(&c, "question", &format!("Allow {FILES}?"));
    let link = c["card_url"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("{PUBLIC}/ui/cards/{id}#secret=")),
        "{c}"
    );
    assert_eq!(
        task["metadata"]["egressgate_interrupt_id"],
        json!(id),
        "{task}"
    );
    assert_eq!(task["contextId"], "c1", "{task}");
    assert_eq!(state(&g, &id).await, "pending");

    // Before the person decided, and with an answer that is neither: still waiting, the card
    // untouched.
    let early = agent.answer(&task, "approve");
    assert_eq!(card(&early)["interrupt_id"], json!(id), "{early}");
    assert_eq!(
        said(&early),
        "The person has not answered the card yet.",
        "{early}"
    );
    let vague = agent.answer(&task, "maybe later");
    assert_eq!(card(&vague)["interrupt_id"], json!(id), "{vague}");
    assert!(
        said(&vague).starts_with("Answer `approve` or `deny`"),
        "{vague}"
    );
    assert_eq!(state(&g, &id).await, "pending");

    // The person approves; the client's answer in the same task continues it to the end.
    decide(&g, &c, true).await;
    let done = agent.answer(&task, "approve");
    assert_eq!(final_text(&done), BODY, "{done}");
    assert_eq!(done["id"], task["id"], "{done}");
    assert_eq!(state(&g, &id).await, "done");
    assert_eq!(o.requests().len(), 1, "{:?}", o.requests());

    // A second answer: the SDK's terminal-state error, and egressgate says the card is done.
    let again = agent.answer(&task, "approve");
    let err = &again["error"];
    assert_eq!(err["type"], "UnsupportedOperationError", "{again}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("is in terminal state: TASK_STATE_COMPLETED"),
        "{again}"
    );
    assert!(
        message.ends_with(&format!(
            "egressgate: the card {id} is already done, nothing runs again"
        )),
        "{again}"
    );
    assert_eq!(
        err["data"]["egressgate"],
        json!({"interrupt_id": id, "state": "done"}),
        "{again}"
    );
    assert_one_claim_per_card(&g, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_word_never_grants_what_the_person_declined() {
    let Some((o, g, agent)) = bench().await else {
        return;
    };
    // The person declines; the client says approve: the run continues declined.
    let (task, _) = decided(&g, &agent, ("bob", "c2"), false).await;
    let done = agent.answer(&task, "approve");
    assert!(final_text(&done).ends_with(DECLINED), "{done}");

    // The person approves; the client says deny: the run continues declined too (a client
    // may withhold an approval), and the card is done.
    let (task, c) = decided(&g, &agent, ("carol", "c3"), true).await;
    let done = agent.answer(&task, "Deny.");
    assert!(final_text(&done).ends_with(DECLINED), "{done}");
    assert_eq!(state(&g, c["interrupt_id"].as_str().unwrap()).await, "done");
    assert!(o.requests().is_empty(), "{:?}", o.requests());
    assert_one_claim_per_card(&g, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_another_process_finished_is_not_run_again() {
    let Some((o, g, agent)) = bench().await else {
        return;
    };
    let (task, c) = decided(&g, &agent, ("dave", "c4"), true).await;
    let id = c["interrupt_id"].as_str().unwrap();
    // Another process restores the task from the card's snapshot and finishes it.
    let mut resume = python(&[
        "-m",
        "egressgate.examples.a2a",
        "resume",
        "--interrupt-id",
        id,
    ]);
    let out = as_runtime(&mut resume, &g, agent.port).output().unwrap();
    let line = stdout_of(&out, "resume");
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap(),
        json!({"final": BODY})
    );

    // The served agent's copy of the task: the answer ends it, nothing runs again.
    let ended = agent.answer(&task, "approve");
    assert_eq!(ended["status"]["state"], "TASK_STATE_REJECTED", "{ended}");
    assert_eq!(
        said(&ended),
        format!(
            "egressgate: the card {id} is already done (another process finished it); nothing ran again"
        )
    );
    let again = agent.answer(&task, "approve");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("TASK_STATE_REJECTED; egressgate: the card"),
        "{again}"
    );
    assert_eq!(o.requests().len(), 1, "{:?}", o.requests());
    assert_one_claim_per_card(&g, 1).await;
}
