//! Who the command is on the host (`--as-user`): with a root launcher an unprivileged user
//! (`nobody` unless told otherwise), with no supplementary group and no capability, so it can
//! neither read root's files nor undo the capture; an unprivileged launcher runs the command
//! as itself and cannot pick anyone else. Run as root, as CI does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::*;

const PROXY: &str = "http://t:s@127.0.0.1:1";

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The launcher itself started with supplementary groups 0 and 4242 (as a root service may
/// be): none of them reaches the command, so a file that group 4242 may read stays closed.
#[test]
fn as_user_takes_a_name_or_a_uid_and_no_supplementary_group_of_the_launcher() {
    let dir = readable_tempdir();
    let group_file = dir.path().join("group-readable");
    std::fs::write(&group_file, "group 4242 only").unwrap();
    nix::unistd::chown(&group_file, None, Some(nix::unistd::Gid::from_raw(4242))).unwrap();
    chmod(&group_file, 0o640);
    let script = format!(
        "echo $(id -u) $(id -g) $(id -G); cat {} 2> /dev/null; echo read=$?",
        group_file.display()
    );
    for (as_user, ids) in [
        (None, "65534 65534 65534"),
        (Some("4242"), "4242 4242 4242"),
        (Some("daemon"), "1 1 1"),
    ] {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--groups", "0,4242", "--"])
            .arg(env!("CARGO_BIN_EXE_egressgate-sandbox-run"))
            .args(["--proxy-url", PROXY]);
        if let Some(user) = as_user {
            cmd.args(["--as-user", user]);
        }
        cmd.args(["--", "sh", "-c", &script]).current_dir("/");
        let output = run(cmd);
        assert_eq!(code(&output), 0, "{as_user:?}: {output:?}");
        // uid 4242 is in no group 4242 of the launcher's: its gid is its own number.
        let read = if as_user == Some("4242") {
            "group 4242 onlyread=0"
        } else {
            "read=1"
        };
        assert_eq!(
            stdout(&output),
            format!("{ids}\n{read}\n"),
            "{as_user:?}: {output:?}"
        );
    }
}

/// Root in the sandbox's user namespace is nobody's business any more: the default command
/// holds no capability at all, so it cannot remove the capture's ruleset, and a connection
/// that ignores the proxy settings still ends at the proxy.
#[test]
fn a_root_launchers_command_holds_no_capability_and_cannot_remove_the_capture() {
    let proxy = FakeProxy::start();
    let script = "grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status; \
                  nft flush ruleset 2> /dev/null; echo flush=$?; \
                  umount /proc 2> /dev/null; echo umount=$?; \
                  curl -4 -sS -m 20 --noproxy '*' http://files.example.com/ 2> /dev/null; \
                  echo captured=$?";
    let output = run(launcher(&proxy.url("t:s"), &["sh", "-c", script]));
    assert_eq!(code(&output), 0, "{output:?}");
    let out = stdout(&output);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "CapPrm:\t0000000000000000",
            "CapEff:\t0000000000000000",
            "CapAmb:\t0000000000000000",
            "flush=1",
            // util-linux's "mount failure": no capability to unmount anything.
            "umount=32",
        ],
        "{output:?}"
    );
    // Reset by the capture once the proxy refused (curl 7, 55 or 56: no byte came back).
    assert!(
        ["captured=7", "captured=55", "captured=56"].contains(&lines[5]),
        "{output:?}"
    );
    let seen: Vec<_> = proxy.seen().into_iter().map(|s| s.request_line).collect();
    assert_eq!(seen, ["CONNECT files.example.com:80 HTTP/1.1"]);
}

/// A user that does not exist, and any user but itself for an unprivileged launcher, are one
/// line and 125 before anything runs; an unprivileged launcher may name itself.
#[test]
fn an_unknown_user_or_another_user_for_an_unprivileged_launcher_is_refused() {
    let dir = shared_tempdir();
    let ran = dir.path().join("ran");
    let launcher_copy = launcher_copy(dir.path());
    let attempt = |unprivileged: bool, as_user: &str| {
        let make = || {
            let mut cmd = std::process::Command::new("setpriv");
            if unprivileged {
                cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
            }
            cmd.arg(&launcher_copy)
                .args(["--proxy-url", PROXY, "--as-user", as_user, "--"])
                .args(["touch", ran.to_str().unwrap()])
                .env("TMPDIR", "/tmp")
                .current_dir("/");
            cmd
        };
        let output = run_copied(make);
        let was_run = ran.exists();
        let _ = std::fs::remove_file(&ran);
        (output, was_run)
    };
    for (unprivileged, as_user, needle) in [
        (false, "egressgate-no-such-user", "no such user"),
        (true, "4242", "needs a root launcher"),
        (true, "root", "needs a root launcher"),
    ] {
        let (output, was_run) = attempt(unprivileged, as_user);
        assert_eq!(code(&output), 125, "{as_user}: {output:?}");
        assert!(!was_run, "{as_user}: the command ran");
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "{as_user}: {err}");
        assert!(err.contains(needle), "{as_user}: {err}");
    }
    for as_user in ["65534", "nobody"] {
        let (output, was_run) = attempt(true, as_user);
        assert_eq!(code(&output), 0, "{as_user}: {output:?}");
        assert!(was_run, "{as_user}");
    }
}
