//! Where `egressgate sandbox run` takes the turn's proxy URL from: `EGRESSGATE_PROXY_URL`,
//! `--proxy-url-file`, or `--proxy-url`, which is taken off the launcher's command line at
//! once; and one clear error for none or two of them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};

use support::*;

/// `--proxy-url` on the command line is taken off it at once: the running launcher's
/// `/proc/PID/cmdline`, which every local user can read, no longer carries the secret.
#[tokio::test]
async fn the_turn_secret_leaves_the_launchers_command_line() {
    let g = gate().start();
    let turn = g.api().turn("u-argv", "c1", &[]).await;
    let proxy_url = format!("http://{}@{}", turn.credential, g.proxy());
    let secret = turn.credential.split_once(':').unwrap().1.to_owned();
    let checked = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_egressgate"))
            .args(["sandbox", "run", "--proxy-url", &proxy_url])
            .args([
                "--",
                "sh",
                "-c",
                "echo ready; read line; echo \"$HTTP_PROXY\"",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .current_dir("/")
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        (cmdline, rest, child.wait().unwrap())
    })
    .await
    .unwrap();
    let (cmdline, rest, status) = checked;
    assert!(status.success(), "{status:?}");
    assert!(cmdline.contains("sandbox run -- sh -c"), "{cmdline}");
    assert!(!cmdline.contains(&secret), "{cmdline}");
    // The command still got the credential, through the forwarder.
    assert!(
        rest.contains(&secret) && rest.contains("@127.0.0.1:"),
        "{rest}"
    );
}

/// Without a proxy URL from any source, or with two, the launcher says so and runs nothing.
#[tokio::test]
async fn a_missing_or_doubled_proxy_url_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let file = dir.path().join("url");
    std::fs::write(&file, "http://t:s@127.0.0.1:1\n").unwrap();
    for (flags, needle) in [
        (vec![], "no proxy URL"),
        (
            vec![
                "--proxy-url",
                "http://t:s@127.0.0.1:1",
                "--proxy-url-file",
                file.to_str().unwrap(),
            ],
            "cannot be used with",
        ),
        (
            vec!["--proxy-url-file", "/nonexistent/url"],
            "cannot read --proxy-url-file",
        ),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_egressgate"));
        cmd.args(["sandbox", "run"])
            .args(&flags)
            .args(["--", "touch", ran.to_str().unwrap()])
            .env_remove("EGRESSGATE_PROXY_URL");
        let got = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&got.stderr).into_owned();
        assert_ne!(got.status.code(), Some(0), "{flags:?}: {err}");
        assert!(err.contains(needle), "{flags:?}: {err}");
        assert!(!err.contains(":s@"), "{flags:?} echoed the secret: {err}");
        assert!(!ran.exists(), "{flags:?} ran the command");
    }
}
