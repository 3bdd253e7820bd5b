//! End-to-end harness: the real `egressgate` binary on loopback listeners, loopback origins
//! (plain HTTP and TLS with rcgen certificates), a raw proxy client that controls every byte,
//! and a JSON client for the control API. No fixed ports, no external hosts, no sleeps for
//! readiness: the harness waits for the binary's own "listening" log lines.
//!
//! This file starts the process; the rooms beside it hold the rest: [`client`] (the control
//! API and raw proxy clients), [`origin`] (loopback origins and TLS material), [`flow`] (the
//! approval loop as a runtime drives it) and [`bench`] (the builder that sets up a row of the
//! design's table in one expression). Their items are re-exported here, so `use support::*`
//! reaches all of them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod adapters;
pub mod battery;
pub mod bench;
pub mod ca;
pub mod capture;
pub mod client;
pub mod decisions;
pub mod examples;
pub mod flow;
pub mod held;
pub mod hello;
pub mod hostile;
pub mod inspect;
pub mod logged;
pub mod netns;
pub mod origin;
pub mod person;
pub mod pg;
pub mod registry;
pub mod relay;
pub mod sse;
pub mod tls_front;

// Each test binary uses some of these, none uses all.
#[allow(unused_imports)]
pub use {bench::*, client::*, flow::*, origin::*};

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Known test tokens (≥ 16 characters).
pub const ADMIN: &str = "test-admin-token-0123456789";
/// Known runtime token.
pub const RUNTIME: &str = "test-runtime-token-0123456789";

/// A running `egressgate` process.
pub struct Gate {
    child: Child,
    pub proxy: Option<SocketAddr>,
    pub control: Option<SocketAddr>,
    pub data_dir: tempfile::TempDir,
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Builder for a gate process.
pub struct GateBuilder {
    sub: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    data_dir: Option<tempfile::TempDir>,
    database: Option<String>,
    signals_blocked: bool,
}

pub fn gate() -> GateBuilder {
    GateBuilder {
        sub: "serve",
        args: Vec::new(),
        env: Vec::new(),
        data_dir: None,
        database: None,
        signals_blocked: false,
    }
}

impl GateBuilder {
    pub fn subcommand(mut self, sub: &'static str) -> Self {
        self.sub = sub;
        self
    }
    pub fn resolve(mut self, host: &str, ip: &str) -> Self {
        self.args.push("--resolve".into());
        self.args.push(format!("{host}={ip}"));
        self
    }
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.into());
        self
    }
    pub fn args(mut self, a: &[&str]) -> Self {
        self.args.extend(a.iter().map(|s| s.to_string()));
        self
    }
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    /// Use this database URL (instead of SQLite or the CI PostgreSQL).
    pub fn database(mut self, url: &str) -> Self {
        self.database = Some(url.into());
        self
    }
    /// Reuse a data directory (restart tests).
    pub fn data_dir(mut self, d: tempfile::TempDir) -> Self {
        self.data_dir = Some(d);
        self
    }
    /// Start the binary with SIGTERM and SIGINT blocked, as a supervisor or CI runner may
    /// (the mask survives exec): a Python shim blocks them and execs the binary in place, so
    /// [`Gate::pid`] is still the binary's.
    pub fn shutdown_signals_blocked(mut self) -> Self {
        self.signals_blocked = true;
        self
    }
    pub fn start(self) -> Gate {
        self.start_on("127.0.0.1:0", "127.0.0.1:0")
    }
}

/// When CI provides a PostgreSQL server (`EGRESSGATE_TEST_POSTGRES_URL`), each data directory
/// gets its own database there (created once, reused on restart), so the end-to-end suite
/// runs on both stores.
pub fn postgres_database_for(data_dir: &std::path::Path) -> Option<String> {
    let base = std::env::var("EGRESSGATE_TEST_POSTGRES_URL").ok()?;
    let tag: String = data_dir
        .file_name()?
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let name = format!("eg_e2e_{tag}");
    // Fails harmlessly when the database exists (a restart on the same data directory).
    let _ = Command::new("psql")
        .arg(&base)
        .args(["-q", "-c", &format!("CREATE DATABASE {name}")])
        .stderr(Stdio::null())
        .status();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    Some(format!("{prefix}/{name}"))
}

impl Gate {
    pub fn proxy(&self) -> SocketAddr {
        self.proxy.unwrap()
    }
    pub fn api(&self) -> Api {
        Api {
            addr: self.control.unwrap(),
        }
    }
    /// Lines logged so far containing `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }

    /// Waits (bounded, 5 s) for a log line containing every needle: the gate's stderr is read
    /// by another thread, so a line written just before a response may not be here yet.
    pub async fn log_line(&self, needles: &[&str]) -> Option<String> {
        for _ in 0..100 {
            if let Some(l) = self
                .log_lines(needles[0])
                .into_iter()
                .find(|l| needles.iter().all(|n| l.contains(n)))
            {
                return Some(l);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
    /// SIGKILL and keep the data directory.
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.data_dir, tempfile::tempdir().unwrap())
    }
    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Waits for the process to exit (after a signal) and returns its status.
    pub fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
    /// Sends SIGTERM and returns at once (the drain tests watch what happens meanwhile).
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "kill -TERM: {status:?}"
        );
    }
    /// SIGTERM and wait for the exit status.
    pub fn terminate(self) -> std::process::ExitStatus {
        self.sigterm();
        self.wait()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GateBuilder {
    /// Like [`GateBuilder::start`], but with the proxy and control listeners on the given
    /// addresses, for tests that must know the gate's own ports before it starts (to allow
    /// them with `--allow-port` and prove the gate still never dials itself).
    pub fn start_on(self, proxy_listen: &str, control_listen: &str) -> Gate {
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| tempfile::tempdir().unwrap());
        let binary = env!("CARGO_BIN_EXE_egressgate");
        let mut cmd = if self.signals_blocked {
            let mut shim = Command::new("python3");
            shim.args([
                "-c",
                "import os, signal, sys\n\
                 signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})\n\
                 os.execv(sys.argv[1], sys.argv[1:])",
                binary,
            ]);
            shim
        } else {
            Command::new(binary)
        };
        cmd.arg(self.sub)
            .arg("--data-dir")
            .arg(data_dir.path().join("data"));
        if self.sub != "control" {
            cmd.args(["--proxy-listen", proxy_listen]);
        }
        if self.sub != "proxy" {
            cmd.args(["--control-listen", control_listen]);
        }
        let url = match self.database.as_deref() {
            Some("sqlite-default") => None,
            Some(url) => Some(url.to_owned()),
            None => postgres_database_for(data_dir.path()),
        };
        if let Some(url) = url {
            cmd.arg("--database-url").arg(&url);
            // On PostgreSQL the CA's key is kept only sealed (a test may override or unset it).
            if url.starts_with("postgres") {
                cmd.env("EGRESSGATE_CA_SEAL_KEY", ca::SEAL_KEY);
            }
        }
        cmd.args(&self.args)
            .env("EGRESSGATE_ADMIN_TOKEN", ADMIN)
            .env("EGRESSGATE_RUNTIME_TOKEN", RUNTIME)
            .env("EGRESSGATE_LOG", "info,egressgate_proxy=debug")
            .env_remove("DATABASE_URL")
            .envs(self.env)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn egressgate");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                log2.lock().unwrap().push(line);
            }
        });
        let (mut proxy, mut control) = (None, None);
        let want_proxy = self.sub != "control";
        let want_control = self.sub != "proxy";
        while (want_proxy && proxy.is_none()) || (want_control && control.is_none()) {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("gate did not start; log: {:?}", log.lock().unwrap()));
            let addr = match serde_json::from_str::<serde_json::Value>(&line) {
                // `--log-format json`: one object a line, the event's fields flattened.
                Ok(v) => v["addr"].as_str().and_then(|a| a.parse().ok()),
                Err(_) => line
                    .split("addr=")
                    .nth(1)
                    .and_then(|a| a.split_whitespace().next())
                    .and_then(|a| a.parse().ok()),
            };
            if line.contains("proxy listening") {
                proxy = addr;
            } else if line.contains("control plane listening") {
                control = addr;
            }
        }
        Gate {
            child,
            proxy,
            control,
            data_dir,
            log,
        }
    }
}

/// The `egressgate` binary as a command, for the CLI rows (one-line errors, `migrate`,
/// `ca print`, the admin CLI).
pub fn egressgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_egressgate"))
}

/// Asserts a CLI run exited 0, showing its standard error otherwise.
#[track_caller]
pub fn assert_success(out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
}

/// Asserts a run exited 0, showing `what` and both its streams otherwise; returns its
/// standard output.
#[track_caller]
pub fn stdout_of(out: &std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}:\n{stdout}\n{stderr}");
    stdout
}

/// A finished command's exit code and both its streams, for an assertion's message.
pub fn explain(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout {}\nstderr {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts that `field` of the JSON object `v` is a string that begins with `prefix` (a link
/// or a URL whose rest is random, a question whose rest is prose), showing the whole object
/// otherwise.
#[track_caller]
pub fn assert_field_starts(v: &serde_json::Value, field: &str, prefix: &str) {
    let text = v[field].as_str();
    assert!(
        text.is_some_and(|t| t.starts_with(prefix)),
        "{field} should start with {prefix:?}: {v}"
    );
}

/// Runs a CLI command that must fail, asserts it did, and returns its standard error.
#[track_caller]
pub fn cli_failure(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    err
}

/// `egressgate serve ARGS --data-dir DATA` with no `EGRESSGATE_*` setting inherited, which
/// must fail (a bad setting is refused before anything starts): its standard error.
#[track_caller]
pub fn serve_failure(args: &[&str], data: &std::path::Path) -> String {
    let mut cmd = egressgate();
    for (k, _) in std::env::vars() {
        if k.starts_with("EGRESSGATE_") {
            cmd.env_remove(k);
        }
    }
    cli_failure(cmd.arg("serve").args(args).arg("--data-dir").arg(data))
}

/// A port that was free a moment ago on 127.0.0.1 (for `start_on`; tests inside a private
/// network namespace make the race harmless).
/// Starts a loopback helper server (a receiver, a fake API) that prints `listening PORT` as
/// its first line once ready: the child and its port. `hint` says what to install when it
/// prints anything else.
pub fn spawn_listening(cmd: &mut Command, hint: &str) -> (Child, u16) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("the helper said {line:?} ({hint})"))
        .parse()
        .unwrap();
    (child, port)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
