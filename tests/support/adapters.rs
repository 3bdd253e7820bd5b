//! The framework adapters' runnable examples (`python -m egressgate.examples.NAME`) as a
//! runtime and a person drive them against a gate: run a step in its own process and read its
//! one JSON line, answer the card with its secret alone, read the stored outcome and the
//! user's pending cards. Shared by `tests/framework_adapters.rs` (the whole loop, per
//! framework) and each framework's own tests.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

use super::examples::{as_runtime, available, example_bench};
use super::{Gate, Origin, RUNTIME};

/// Where `.ci/run` installs the pinned framework packages.
pub fn frameworks() -> PathBuf {
    std::env::var_os("EGRESSGATE_TEST_PY_FRAMEWORKS").map_or_else(
        || PathBuf::from("/var/tmp/egressgate-py-frameworks"),
        PathBuf::from,
    )
}

/// The client's source and the framework packages, for `python3`.
pub fn python_path() -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/python/src");
    format!("{}:{}", src.display(), frameworks().display())
}

/// Whether `egressgate.examples.{name}` imports, i.e. its pinned framework is installed. In
/// CI a missing package fails the test loudly (`.ci/run` installs them); elsewhere the test
/// says why it skipped.
pub fn example_available(name: &str) -> bool {
    let mut check = Command::new("python3");
    check
        .args(["-c", &format!("import egressgate.examples.{name}")])
        .env("PYTHONPATH", python_path());
    available(
        &mut check,
        &format!("the pinned framework of egressgate.examples.{name}"),
    )
}

/// The bench of [`super::examples::example_bench`] (a loopback origin and a gate for it:
/// origin, gate, port) for `egressgate.examples.{name}`, or `None` when its pinned framework
/// is not installed ([`example_available`]: the test returns early, or fails in CI).
pub async fn framework_bench(name: &str) -> Option<(Origin, Gate, u16)> {
    if !example_available(name) {
        return None;
    }
    Some(example_bench().await)
}

/// One framework's example, run as a runtime of one gate would run it.
pub struct Example<'g> {
    pub module: String,
    pub gate: &'g Gate,
    pub port: u16,
}

impl<'g> Example<'g> {
    /// `egressgate.examples.{name}` as a runtime of `gate` runs it, downloading from the
    /// origin on `port`.
    pub fn of(name: &str, gate: &'g Gate, port: u16) -> Self {
        Example {
            module: format!("egressgate.examples.{name}"),
            gate,
            port,
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", &self.module])
            .args(args)
            .env("PYTHONPATH", python_path());
        as_runtime(&mut cmd, self.gate, self.port);
        cmd
    }

    pub fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/data.csv", self.port)
    }

    /// Runs it; its one JSON line and its exit code.
    pub fn run(&self, args: &[&str]) -> (Value, i32) {
        read(self.command(args).output().unwrap(), args)
    }

    /// Runs it; it must succeed: its one JSON line.
    pub fn ok(&self, args: &[&str]) -> Value {
        let (line, code) = self.run(args);
        assert_eq!(code, 0, "{args:?}: {line}");
        line
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn ask(&self, user: &str, chat: &str, hosts: &[&str]) -> Value {
        let mut args = vec!["ask", "--user", user, "--chat", chat];
        let urls: Vec<String> = hosts.iter().map(|h| self.url(h)).collect();
        for u in &urls {
            args.extend(["--url", u.as_str()]);
        }
        self.ok(&args)
    }

    pub fn resume(&self, card: &Value) -> Value {
        self.ok(&["resume", "--interrupt-id", id(card)])
    }
}

pub fn read(out: Output, args: &[&str]) -> (Value, i32) {
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

pub fn id(card: &Value) -> &str {
    card["interrupt_id"].as_str().unwrap()
}

/// What the gate stored for the adapter's `card`: [`outcome_of`] its id.
pub async fn outcome(g: &Gate, card: &Value) -> Value {
    outcome_of(g, id(card)).await
}

/// What the gate stored for card `id`, as the runtime reads it (`200` asserted): what every
/// adapter suite checks against what its framework showed.
pub async fn outcome_of(g: &Gate, id: &str) -> Value {
    let r = g
        .api()
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// What the person does on the card page: approve (or decline) with the card's secret alone.
pub async fn answer(g: &Gate, card: &Value, approved: bool) {
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
pub async fn pending(g: &Gate, user: &str) -> Vec<Value> {
    let path = format!("/v1/users/{user}/interrupts?state=pending");
    let r = g.api().as_user("GET", &path, user).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["interrupts"].as_array().unwrap().clone()
}
