//! Harness for the launcher's integration tests: the launcher binary, a fake proxy, a
//! loopback origin, and bounded waits.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// Longest any single launcher run may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The launcher under test, with `--proxy-url url`, isolated, about to run `command`.
pub fn launcher(proxy_url: &str, command: &[&str]) -> Command {
    launcher_with(proxy_url, &[], command)
}

/// The launcher with `--no-isolate`.
pub fn launcher_no_isolate(proxy_url: &str, command: &[&str]) -> Command {
    launcher_with(proxy_url, &["--no-isolate"], command)
}

/// The launcher with extra launcher flags (`--capture off`, say) before `--`, started the way
/// an interactive shell starts a command: no signal blocked, SIGINT, SIGTERM, SIGQUIT and
/// SIGHUP at their defaults. It starts in `/`, which the command's user (`nobody`, for the
/// root launcher of CI) may enter wherever the checkout lives. The launcher hands its own starting mask and dispositions to the
/// command, so without this the tests would inherit whatever the test runner was started with
/// (a CI runner may block nearly every signal, a background job ignores SIGINT).
pub fn launcher_with(proxy_url: &str, flags: &[&str], command: &[&str]) -> Command {
    use std::os::unix::process::CommandExt;

    use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, pthread_sigmask, signal};

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_egressgate-sandbox-run"));
    cmd.arg("--proxy-url")
        .arg(proxy_url)
        .args(flags)
        .arg("--")
        .args(command)
        .current_dir("/");
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec and only calls sigprocmask and
    // sigaction (through nix), both async-signal-safe; nothing is allocated.
    unsafe {
        cmd.pre_exec(|| {
            pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            for sig in [
                Signal::SIGINT,
                Signal::SIGTERM,
                Signal::SIGQUIT,
                Signal::SIGHUP,
            ] {
                signal(sig, SigHandler::SigDfl)?;
            }
            Ok(())
        });
    }
    cmd
}

/// Runs `cmd` to completion with captured output, failing the test after [`RUN_LIMIT`].
pub fn run(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawning the launcher");
    let pid = child.id();
    let (done, result) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match result.recv_timeout(RUN_LIMIT) {
        Ok(output) => output.expect("waiting for the launcher"),
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            panic!("the launcher did not finish within {RUN_LIMIT:?}");
        }
    }
}

/// The exit code, failing the test if a signal ended the process instead.
pub fn code(output: &Output) -> i32 {
    output
        .status
        .code()
        .unwrap_or_else(|| panic!("ended by a signal: {output:?}"))
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Polls `condition` every 20 ms until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// What the fake proxy saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub request_line: String,
    pub proxy_authorization: Option<String>,
}

/// Size of the body the fake proxy serves for `http://download.example/`.
pub const DOWNLOAD_LEN: usize = 4 * 1024 * 1024;

/// A proxy that refuses everything the way egressgate does and records what it was asked,
/// except two test routes: `GET http://download.example/` answers [`DOWNLOAD_LEN`] bytes of
/// `a`, and `POST http://upload.example/` answers how many body bytes it received.
pub struct FakeProxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FakeProxy {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let record = Arc::clone(&record);
                thread::spawn(move || refuse(stream, &record));
            }
        });
        Self { addr, seen }
    }

    /// `http://USERINFO@127.0.0.1:PORT`.
    pub fn url(&self, userinfo: &str) -> String {
        format!("http://{userinfo}@{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Asserts the proxy saw exactly these request lines, in order, each carrying the proxy
    /// credential `authorization`.
    pub fn assert_requests(&self, lines: &[&str], authorization: &str) {
        let seen = self.seen();
        let got: Vec<_> = seen.iter().map(|s| s.request_line.as_str()).collect();
        assert_eq!(got, lines, "{seen:?}");
        for request in &seen {
            assert_eq!(
                request.proxy_authorization.as_deref(),
                Some(authorization),
                "{seen:?}"
            );
        }
    }
}

fn refuse(mut stream: TcpStream, record: &Mutex<Vec<Seen>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let body_start = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(head.len(), |i| i + 4);
    let already = head.len() - body_start;
    let head = String::from_utf8_lossy(&head[..body_start]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let proxy_authorization = lines.find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim().to_owned())
    });
    let content_length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    record.lock().unwrap().push(Seen {
        request_line: request_line.clone(),
        proxy_authorization,
    });
    if request_line.starts_with("GET http://download.example/") {
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {DOWNLOAD_LEN}\r\nConnection: close\r\n\r\n"
        );
        let _ = stream.write_all(&vec![b'a'; DOWNLOAD_LEN]);
        return;
    }
    if request_line.starts_with("POST http://upload.example/") {
        let mut remaining = content_length.unwrap_or(0).saturating_sub(already);
        let mut received = already;
        while remaining > 0 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    received += n;
                    remaining = remaining.saturating_sub(n);
                }
            }
        }
        let body = format!("received {received}");
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let _ = stream.write_all(
        b"HTTP/1.1 403 Forbidden\r\nX-Egress-Refused: not_approved\r\n\
          Content-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let _ = stream.shutdown(Shutdown::Write);
}

/// A loopback HTTP server outside the sandbox that counts the connections it gets.
pub struct Origin {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl Origin {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&connections);
        thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\norigin",
                );
            }
        });
        Self { addr, connections }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A port on 127.0.0.1 that nothing listens on.
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Every `NAME=VALUE` line of `env` output, split.
pub fn env_lines(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A temporary directory the command's user may write in (a root launcher's command runs as
/// `nobody`), for the files a test's command leaves behind.
pub fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// A temporary directory every user may read and enter but only root may write (mode 0755),
/// for what the command's user (`nobody` under a root launcher) must read or execute.
pub fn readable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A copy of the launcher in `dir` that any user (`nobody`, started with `setpriv`) can
/// execute wherever the checkout lives. Run it through [`run_copied`].
pub fn launcher_copy(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;

    let copy = dir.join("egressgate-sandbox-run");
    std::fs::copy(env!("CARGO_BIN_EXE_egressgate-sandbox-run"), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

/// Runs the command `make` builds around a [`launcher_copy`]. A thread of the test binary
/// forking while the copy's write fd was open makes exec fail with ETXTBSY for a moment; only
/// that is retried.
pub fn run_copied(make: impl Fn() -> Command) -> Output {
    let mut output = run(make());
    for _ in 0..5 {
        if !stderr(&output).contains("Text file busy") {
            break;
        }
        thread::sleep(Duration::from_millis(100));
        output = run(make());
    }
    output
}

/// A string no other process on the machine carries, for finding ours in `/proc`.
pub fn unique_marker(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("egressgate-test-{tag}-{}-{nanos}", std::process::id())
}
