//! The loopback stand-ins that run as a child process and write what they receive as JSON
//! lines into a file of their own temporary directory (`tests/webhooks/receiver.py`,
//! `tests/slack/fake_slack.py`, `tests/email/receiver.py`): the log read back, a bounded wait
//! on it, the `down` switch the receivers obey, and the child killed when the test ends.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use serde_json::Value;

use super::eventually;

/// The gate's flags for a test that watches its outbox deliver to a stand-in: retries come
/// fast, a stuck receiver is given up on soon, and card links are under `gate.example`.
pub const FAST_DELIVERY: [&str; 6] = [
    "--webhook-backoff",
    "100ms",
    "--webhook-timeout",
    "2s",
    "--control-public-url",
    "https://gate.example",
];

/// A stand-in's directory (its `log`, its `down` switch, whatever else it reads) and its
/// process, which is killed on drop so no receiver outlives its test.
pub struct Logged {
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
}

impl Logged {
    /// A fresh directory, no process yet.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            child: None,
        }
    }

    /// A file in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Every line logged so far, each parsed (a line that is not JSON fails the test).
    pub fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.file("log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The receiver refuses what it is sent from now on.
    pub fn go_down(&self) {
        std::fs::write(self.file("down"), "").unwrap();
    }

    /// The receiver accepts again.
    pub fn come_up(&self) {
        std::fs::remove_file(self.file("down")).unwrap();
    }
}

impl Default for Logged {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads `read` until `done` holds for it or `secs` pass; what it reads then (the caller
/// asserts on it, so a wait that ran out fails there with what did arrive).
pub async fn wait_for(
    secs: u64,
    read: impl Fn() -> Vec<Value>,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    eventually(Duration::from_secs(secs), async || done(&read())).await;
    read()
}
