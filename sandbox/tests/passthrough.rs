//! What the launcher passes through unchanged (exit status, stdout, stderr, signals) and what
//! it changes (the environment), plus its own failures: bad flags, missing commands and
//! `--no-isolate`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::*;

const PROXY: &str = "http://turn-7:s3cr%40t@127.0.0.1:3128";

#[test]
fn exit_status_passes_through_and_a_signal_death_is_128_plus_its_number() {
    for (script, expected) in [
        ("exit 0", 0),
        ("exit 7", 7),
        ("exit 255", 255),
        ("kill -TERM $$", 128 + 15),
        ("kill -KILL $$", 128 + 9),
    ] {
        let output = run(launcher(PROXY, &["sh", "-c", script]));
        assert_eq!(code(&output), expected, "{script}: {output:?}");
        let output = run(launcher_no_isolate(PROXY, &["sh", "-c", script]));
        assert_eq!(code(&output), expected, "--no-isolate {script}: {output:?}");
    }
}

#[test]
fn stdout_and_stderr_pass_through_byte_for_byte() {
    let script = "printf 'out\\000\\377\\r\\nend'; printf 'err\\001\\n' >&2; printf 'out2'";
    let output = run(launcher(PROXY, &["sh", "-c", script]));
    assert_eq!(code(&output), 0, "{output:?}");
    assert_eq!(output.stdout, b"out\0\xff\r\nendout2");
    assert_eq!(output.stderr, b"err\x01\n");
}

#[test]
fn sigterm_and_sigint_to_the_launcher_reach_the_command() {
    let dir = shared_tempdir();
    for (signal, script, expected) in [
        (
            Signal::SIGTERM,
            "trap 'exit 42' TERM; touch \"$0\"; while :; do sleep 0.05; done",
            42,
        ),
        (Signal::SIGINT, "touch \"$0\"; exec sleep 300", 128 + 2),
    ] {
        let ready = dir.path().join(format!("ready-{signal}"));
        let mut cmd = launcher(PROXY, &["sh", "-c", script, ready.to_str().unwrap()]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        assert!(
            wait_until(Duration::from_secs(30), || ready.exists()),
            "the command never started"
        );
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        let mut status = None;
        wait_until(Duration::from_secs(30), || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        let Some(status) = status else {
            let _ = child.kill();
            panic!("{signal} did not end the command");
        };
        assert_eq!(status.code(), Some(expected), "{signal}");
    }
}

#[test]
fn the_gates_secrets_are_removed_and_the_proxy_variables_are_set_in_both_modes() {
    for isolated in [true, false] {
        let mut cmd = if isolated {
            launcher(PROXY, &["env"])
        } else {
            launcher_no_isolate(PROXY, &["env"])
        };
        cmd.env("EGRESSGATE_DATABASE_URL", "postgres://gate:pw@db/gate")
            .env("EGRESSGATE_ADMIN_TOKEN", "admintoken")
            .env("DATABASE_URL", "postgres://gate:pw@db/gate")
            .env("http_proxy", "http://elsewhere:8080")
            .env("NO_PROXY", "*")
            .env("KEEP_ME", "kept");
        let output = run(cmd);
        assert_eq!(code(&output), 0, "{output:?}");
        let env = env_lines(&stdout(&output));
        let get = |name: &str| -> Vec<&str> {
            env.iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        assert!(
            env.iter()
                .all(|(k, _)| !k.starts_with("EGRESSGATE_") && k != "DATABASE_URL"),
            "{env:?}"
        );
        assert_eq!(get("KEEP_ME"), ["kept"]);
        let expected = if isolated {
            let value = get("HTTP_PROXY");
            assert_eq!(value.len(), 1, "{env:?}");
            assert!(
                value[0].starts_with("http://turn-7:s3cr%40t@127.0.0.1:") && value[0] != PROXY,
                "{value:?}"
            );
            value[0].to_owned()
        } else {
            PROXY.to_owned()
        };
        for name in [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
            "npm_config_proxy",
            "npm_config_https_proxy",
        ] {
            assert_eq!(
                get(name),
                [expected.as_str()],
                "{name} (isolated: {isolated})"
            );
        }
        assert_eq!(get("NO_PROXY"), [""]);
        assert_eq!(get("no_proxy"), [""]);
    }
}

#[test]
fn a_bad_proxy_url_is_one_line_and_125_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    for url in [
        "ftp://t:topsecret@gate:21",
        "gate.example:3128",
        "http://",
        "http://t:topsecret@:3128",
        "http://gate:99999",
        "http://t:topsecret@gate:3128/path",
        "not a url",
    ] {
        for isolated in [true, false] {
            let command = ["touch", ran.to_str().unwrap()];
            let cmd = if isolated {
                launcher(url, &command)
            } else {
                launcher_no_isolate(url, &command)
            };
            let output = run(cmd);
            let err = stderr(&output);
            assert_eq!(code(&output), 125, "{url}: {output:?}");
            assert_eq!(err.lines().count(), 1, "{url}: {err}");
            assert!(err.contains("invalid --proxy-url"), "{url}: {err}");
            assert!(!err.contains("topsecret"), "{url}: {err}");
            assert!(!ran.exists(), "{url}: the command ran");
        }
    }
}

#[test]
fn a_missing_command_is_127_and_one_that_cannot_run_is_126() {
    // Searchable by the command's user, so that only the script's own mode stops it.
    let dir = shared_tempdir();
    let not_executable = dir.path().join("script.sh");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    for isolated in [true, false] {
        for (command, expected) in [
            ("egressgate-no-such-command", 127),
            (not_executable.to_str().unwrap(), 126),
        ] {
            let cmd = if isolated {
                launcher(PROXY, &[command])
            } else {
                launcher_no_isolate(PROXY, &[command])
            };
            let output = run(cmd);
            assert_eq!(code(&output), expected, "{command}: {output:?}");
            assert!(stderr(&output).contains(command), "{output:?}");
        }
    }
}

#[test]
fn no_isolate_warns_and_leaves_the_network_open() {
    let origin = Origin::start();
    let script = format!(
        "echo \"$HTTPS_PROXY\"; curl -sS -m 10 --noproxy '*' {}",
        origin.url()
    );
    let output = run(launcher_no_isolate(PROXY, &["sh", "-c", &script]));
    assert_eq!(code(&output), 0, "{output:?}");
    assert_eq!(stdout(&output), format!("{PROXY}\norigin"));
    let err = stderr(&output);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("warning: --no-isolate"), "{err}");
    assert_eq!(origin.connections(), 1);
}

#[test]
fn isolated_runs_print_nothing_of_their_own() {
    let output = run(launcher(PROXY, &["true"]));
    assert_eq!(code(&output), 0, "{output:?}");
    assert!(
        output.stdout.is_empty() && output.stderr.is_empty(),
        "{output:?}"
    );
}

/// The caller's mask is set explicitly (SIGUSR1 and SIGWINCH blocked, nothing else) rather
/// than compared with this test's own: std's `Command` hands its children an empty mask, and a
/// CI runner may itself start the tests with most signals blocked, so "the same as ours" would
/// test the runner, not the launcher.
#[test]
fn the_command_starts_with_the_callers_signal_mask_and_sigpipe_at_its_default() {
    use std::os::unix::process::CommandExt;

    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};

    let status = |text: &str, field: &str| -> u64 {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .unwrap_or_else(|| panic!("no {field} in {text}"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    };
    let bit = |signal: Signal| 1u64 << (signal as i32 - 1);
    let callers = bit(Signal::SIGUSR1) | bit(Signal::SIGWINCH);
    for isolated in [true, false] {
        let command = ["sh", "-c", "exec cat /proc/self/status"];
        let mut cmd = if isolated {
            launcher(PROXY, &command)
        } else {
            launcher_no_isolate(PROXY, &command)
        };
        #[allow(unsafe_code)]
        // SAFETY: the closure runs in the forked child before exec and only calls
        // pthread_sigmask, which is async-signal-safe; it allocates nothing (the set is built
        // on the stack).
        unsafe {
            cmd.pre_exec(|| {
                let mut set = SigSet::empty();
                set.add(Signal::SIGUSR1);
                set.add(Signal::SIGWINCH);
                pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&set), None)
                    .map_err(std::io::Error::from)
            });
        }
        let output = run(cmd);
        assert_eq!(code(&output), 0, "{output:?}");
        let theirs = stdout(&output);
        assert_eq!(
            status(&theirs, "SigBlk:"),
            callers,
            "isolated={isolated}: the command's mask is not the caller's"
        );
        assert_eq!(
            status(&theirs, "SigIgn:") & bit(Signal::SIGPIPE),
            0,
            "SIGPIPE ignored"
        );
    }
}
