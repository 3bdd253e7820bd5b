//! What isolation stops and what it lets through: the command reaches only the proxy (with
//! the credential from `--proxy-url`), nothing else on the network, no DNS, and nothing of it
//! outlives the launcher. These tests need namespaces: as root (as in CI) they must pass, and
//! where the kernel refuses namespaces they fail with the launcher's message rather than skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::*;

/// `base64("turn-7:s3cr@t")`: what a client sends for `turn-7:s3cr%40t@`.
const BASIC_TURN_7: &str = "Basic dHVybi03OnMzY3JAdA==";

#[test]
fn curl_through_the_proxy_variables_reaches_the_proxy_with_the_credential() {
    let proxy = FakeProxy::start();
    let output = run(launcher(
        &proxy.url("turn-7:s3cr%40t"),
        &[
            "sh",
            "-c",
            "echo \"$HTTP_PROXY\"; \
             curl -sS -m 20 -o /dev/null -D - http://example.com/some/path; \
             curl -sS -m 20 -o /dev/null https://example.com/; echo \"https=$?\"",
        ],
    ));
    let out = stdout(&output);
    assert_eq!(code(&output), 0, "{output:?}");

    // The variable points at the forwarder on loopback, credential kept as written.
    let first = out.lines().next().unwrap_or_default();
    let port = first
        .strip_prefix("http://turn-7:s3cr%40t@127.0.0.1:")
        .unwrap_or_else(|| panic!("HTTP_PROXY inside was {first:?}"));
    assert!(port.parse::<u16>().is_ok(), "{first}");

    // Plain HTTP got the proxy's refusal back, headers intact.
    assert!(out.contains("HTTP/1.1 403 Forbidden"), "{out}");
    assert!(out.contains("X-Egress-Refused: not_approved"), "{out}");
    // HTTPS went as a CONNECT, which the proxy refused too (curl exit 56).
    assert!(out.contains("https=56"), "{out}");

    proxy.assert_requests(
        &[
            "GET http://example.com/some/path HTTP/1.1",
            "CONNECT example.com:443 HTTP/1.1",
        ],
        BASIC_TURN_7,
    );
}

#[test]
fn large_bodies_cross_the_relays_intact_both_ways() {
    let proxy = FakeProxy::start();
    let script = "curl -sS -m 30 http://download.example/ > body; wc -c < body; \
                  tr -d a < body | wc -c; \
                  head -c 3000000 /dev/zero | curl -sS -m 30 --data-binary @- \
                    -H 'Expect:' http://upload.example/";
    let dir = shared_tempdir();
    let mut cmd = launcher(&proxy.url("t:s"), &["sh", "-c", script]);
    cmd.current_dir(dir.path());
    let output = run(cmd);
    assert_eq!(code(&output), 0, "{output:?}");
    let out = stdout(&output);
    let lines: Vec<_> = out.lines().map(str::trim).collect();
    assert_eq!(
        lines,
        [DOWNLOAD_LEN.to_string().as_str(), "0", "received 3000000"],
        "{output:?}"
    );
}

/// With capture off (with it on, `tests/capture.rs` shows where such connections go).
#[test]
fn without_capture_a_direct_connection_to_a_loopback_origin_outside_fails_and_only_lo_exists() {
    let proxy = FakeProxy::start();
    let origin = Origin::start();
    let script = format!(
        "curl -sS -m 5 --noproxy '*' {url}; echo \"direct=$?\"; \
         curl -sS -m 5 --noproxy '*' http://192.0.2.1/; echo \"routed=$?\"; \
         tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' '; \
         echo routes=$(tail -n +2 /proc/self/net/route | wc -l)",
        url = origin.url()
    );
    let output = run(launcher_with(
        &proxy.url("t:s"),
        &["--capture", "off"],
        &["sh", "-c", &script],
    ));
    let out = stdout(&output);
    assert_eq!(code(&output), 0, "{output:?}");
    // curl 7: could not connect (refused on the namespace's own loopback / no route).
    assert!(out.contains("direct=7"), "{out}");
    assert!(out.contains("routed=7"), "{out}");
    let interfaces: Vec<_> = out
        .lines()
        .filter(|l| !l.contains('=') && !l.starts_with("curl"))
        .collect();
    assert_eq!(interfaces, ["lo"], "{out}");
    assert!(out.contains("routes=0"), "{out}");
    assert_eq!(origin.connections(), 0, "the origin outside was reached");
    assert!(
        proxy.seen().is_empty(),
        "--noproxy requests went to the proxy"
    );
}

/// With capture off (with it on, the sandbox's own resolver answers: `tests/capture.rs`).
#[test]
fn without_capture_no_dns_inside_and_the_lookup_fails_fast() {
    let proxy = FakeProxy::start();
    let started = Instant::now();
    let output = run(launcher_with(
        &proxy.url("t:s"),
        &["--capture", "off"],
        &[
            "sh",
            "-c",
            "getent hosts example.com; echo \"getent=$?\"; \
             getent ahosts pypi.org; echo \"ahosts=$?\"",
        ],
    ));
    let out = stdout(&output);
    assert_eq!(code(&output), 0, "{output:?}");
    // getent exit 2: key not found.
    assert!(out.contains("getent=2"), "{out}");
    assert!(out.contains("ahosts=2"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "name lookups took {:?}",
        started.elapsed()
    );
}

#[test]
fn nothing_the_command_started_outlives_the_launcher() {
    let sleeper = Sleeper::new("orphan");
    let started = sleeper.flag.display();
    // The background shell carries the marker in its argv; it would sleep for 50 minutes.
    let script = format!(
        "sh -c '{}' & \
         i=0; while [ ! -e {started} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
         exit 0",
        sleeper.script()
    );
    let begun = Instant::now();
    let output = run(launcher(&sleeper.proxy.url("t:s"), &["sh", "-c", &script]));
    assert_eq!(code(&output), 0, "{output:?}");
    assert!(sleeper.flag.exists(), "the background process never ran");
    assert!(
        begun.elapsed() < Duration::from_secs(30),
        "the launcher waited for the orphan"
    );
    let survivors = processes_with(&sleeper.marker);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}

/// A command that is host root (`--as-user root`, what every root launcher's command was
/// before `--as-user`): the namespaces alone hold it.
#[test]
fn a_root_command_cannot_rejoin_the_host_network_or_read_the_launchers_environment() {
    let proxy = FakeProxy::start();
    let secret = unique_marker("secret");
    let script = format!(
        "nsenter --net=/proc/1/ns/net true 2>/dev/null; echo \"nsenter=$?\"; \
         echo found=$(grep -l -a {secret} /proc/[0-9]*/environ 2>/dev/null | wc -l)"
    );
    let output = run({
        let mut cmd = launcher_with(
            &proxy.url("t:s"),
            &["--as-user", "root"],
            &["sh", "-c", &script],
        );
        cmd.env("EGRESSGATE_SECRET", &secret);
        cmd
    });
    let out = stdout(&output);
    assert_eq!(code(&output), 0, "{output:?}");
    assert!(
        !out.contains("nsenter=0"),
        "setns to the host network worked: {out}"
    );
    assert!(out.contains("found=0"), "{out}");

    // The same probe without isolation (root in the host's namespaces) does find the
    // launcher's environment, so "found=0" above is not a blind probe.
    let output = run({
        let mut cmd = launcher_with(
            &proxy.url("t:s"),
            &["--no-isolate", "--as-user", "root"],
            &["sh", "-c", &script],
        );
        cmd.env("EGRESSGATE_SECRET", &secret);
        cmd
    });
    assert!(!stdout(&output).contains("found=0"), "{output:?}");
}

#[test]
fn an_unprivileged_user_gets_the_same_sandbox_through_a_user_namespace() {
    let proxy = FakeProxy::start();
    let secret = unique_marker("secret");
    let script = format!(
        "id -u; cut -d: -f1 /proc/self/net/dev | tail -n +3 | tr -d ' '; \
         curl -sS -m 20 -o /dev/null -w '%{{http_code}}\\n' http://example.com/; \
         echo found=$(grep -l -a {secret} /proc/[0-9]*/environ 2>/dev/null | wc -l); \
         grep -E '^Cap(Eff|Amb)' /proc/self/status; \
         nft flush ruleset 2>/dev/null; echo flush=$?; \
         curl -sS -m 20 --noproxy '*' http://192.0.2.1/ 2>/dev/null; echo literal=$?"
    );
    // A copy of the launcher that `nobody` can execute wherever the checkout lives.
    let dir = readable_tempdir();
    let launcher_copy = launcher_copy(dir.path());
    // Capture works for it too: its tools borrowed CAP_NET_ADMIN, the command holds no
    // capability (so it cannot remove the ruleset), and a connection that ignores the proxy
    // settings reaches the proxy as CONNECT.
    let as_nobody = || {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&launcher_copy)
            .args(["--proxy-url", &proxy.url("turn-7:s3cr%40t")])
            .args(["--", "sh", "-c", &script])
            .env("EGRESSGATE_SECRET", &secret)
            .env("TMPDIR", "/tmp")
            .current_dir("/");
        cmd
    };
    let output = run_copied(as_nobody);
    assert_eq!(code(&output), 0, "{output:?}");
    let out = stdout(&output);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "65534",
            "lo",
            "403",
            "found=0",
            "CapEff:\t0000000000000000",
            "CapAmb:\t0000000000000000",
            "flush=1",
            // Reset by the capture once the proxy refused. curl names the moment the reset
            // reached it: 7 before its non-blocking connect completed, 55 while it was
            // sending the request, 56 while it was waiting for the answer. Each means no
            // byte came back; 0 (or any other code) would be a failure.
            ["literal=7", "literal=55", "literal=56"]
                .into_iter()
                .find(|l| out.lines().last() == Some(*l))
                .unwrap_or("literal=7, 55 or 56")
        ],
        "{output:?}"
    );
    assert_eq!(stderr(&output), "", "{output:?}");
    proxy.assert_requests(
        &[
            "GET http://example.com/ HTTP/1.1",
            "CONNECT 192.0.2.1:80 HTTP/1.1",
        ],
        BASIC_TURN_7,
    );
}

#[test]
fn where_namespaces_are_refused_the_launcher_fails_with_its_own_code_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    // Inside a user namespace of our own, allow no further user namespaces.
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_egressgate-sandbox-run"))
        // That namespace maps no user but its root, so the command runs as the launcher.
        .args([
            "--proxy-url",
            "http://t:topsecret@127.0.0.1:3128",
            "--as-user",
            "root",
            "--",
            "touch",
        ])
        .arg(&ran);
    let output = run(cmd);
    let err = stderr(&output);
    assert_eq!(
        code(&output),
        egressgate_sandbox::EXIT_ISOLATION_UNAVAILABLE,
        "{output:?}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot isolate the command's network"),
        "{err}"
    );
    assert!(!err.contains("topsecret"), "{err}");
    assert!(!ran.exists(), "the command ran unisolated");
}

#[test]
fn an_unreachable_proxy_fails_the_request_fast_instead_of_hanging() {
    let url = format!("http://t:s@127.0.0.1:{}", closed_port());
    let started = Instant::now();
    let output = run(launcher(
        &url,
        &[
            "sh",
            "-c",
            "curl -sS -m 30 http://example.com/; echo \"curl=$?\"",
        ],
    ));
    let out = stdout(&output);
    assert_eq!(code(&output), 0, "{output:?}");
    // 52: the forwarder accepted, then closed without an answer.
    assert!(out.contains("curl=52"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A command meant to outlive its welcome, and how to find it: it touches `flag` once it runs,
/// then sleeps for 50 minutes with `marker` in its argv, so `/proc` shows whether any of it
/// is still running after the launcher is gone.
struct Sleeper {
    proxy: FakeProxy,
    flag: std::path::PathBuf,
    marker: String,
    _dir: tempfile::TempDir,
}

impl Sleeper {
    /// A proxy to launch through, a flag in a directory the command may write, and a marker
    /// no other process carries (`tag` names the row).
    fn new(tag: &str) -> Self {
        let dir = shared_tempdir();
        Self {
            proxy: FakeProxy::start(),
            flag: dir.path().join("started"),
            marker: unique_marker(tag),
            _dir: dir,
        }
    }

    /// The shell script: touch the flag, then the long sleep that carries the marker.
    fn script(&self) -> String {
        let (flag, marker) = (self.flag.display(), &self.marker);
        format!("touch {flag}; sleep 2999; : {marker}")
    }
}

/// Pids of processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot list /proc");
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn killing_the_launcher_outright_takes_the_sandbox_with_it() {
    let sleeper = Sleeper::new("killed");
    let mut cmd = launcher(&sleeper.proxy.url("t:s"), &["sh", "-c", &sleeper.script()]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || sleeper.flag.exists()),
        "the command never started"
    );
    assert!(
        !processes_with(&sleeper.marker).is_empty(),
        "cannot see the command"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&sleeper.marker)
            .is_empty()),
        "still running: {:?}",
        processes_with(&sleeper.marker)
    );
}
