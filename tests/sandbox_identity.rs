//! Who the sandboxed command is on the host, with a root launcher (as in CI): an unprivileged
//! user (`--as-user`, default `nobody`), never host root. It can neither read the gate's CA
//! key nor write the gate's database (so it cannot approve a host for itself), its `/proc`
//! shows only the sandbox's processes, and the launcher refuses to start at all where that
//! user could reach the gate's data directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::capture::readable_dir;
use support::*;

const BLOCKED: &str = "blocked.example.com";
const APPROVED: &str = "approved.example.com";
/// A proxy URL for runs whose command never uses the network.
const UNUSED_PROXY: &str = "http://t:s@127.0.0.1:1";

/// `egressgate sandbox run FLAGS -- ARGV` from `cwd`, the proxy URL in the environment, no
/// data directory named by the caller's environment unless `env` names one.
fn sandbox(
    proxy_url: &str,
    flags: &[&str],
    argv: &[&str],
    cwd: &Path,
    env: &[(&str, &str)],
) -> Output {
    Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(["sandbox", "run"])
        .args(flags)
        .arg("--")
        .args(argv)
        .env("EGRESSGATE_PROXY_URL", proxy_url)
        .env_remove("EGRESSGATE_DATA_DIR")
        .envs(env.iter().copied())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A temporary directory every user may enter and write (sticky, like `/tmp`), for marker
/// files a command would create if it ran.
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o1777);
    dir
}

/// The attack of issue 23 item 5, tried from inside the sandbox of a root launcher: read the
/// CA key, add the blocked host to `admin_sites` in the gate's SQLite, plant a file in the
/// data directory, then ask for the blocked host. The data directory is made searchable by
/// everyone, so the files' own modes (key 0600, database 0644) are what stands in the way.
#[tokio::test]
async fn a_root_launchers_command_can_neither_read_the_gates_key_nor_write_its_database() {
    let o = origin().await;
    let port = o.addr.port();
    let allowed_port = port.to_string();
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let made_ca = Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(["ca", "print", "--data-dir"])
        .arg(&data)
        .env_remove("EGRESSGATE_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(made_ca.status.success(), "{}", explain(&made_ca));
    let g = gate()
        .data_dir(home)
        .database("sqlite-default")
        .resolve(BLOCKED, "127.0.0.1")
        .resolve(APPROVED, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &allowed_port])
        .start();
    chmod(g.data_dir.path(), 0o755);
    chmod(&data, 0o755);
    let key = data.join("ca-key.pem");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let api = g.api();
    api.admin_site(APPROVED).await;
    let turn = api.turn("u-root", "c1", &[]).await;
    let proxy_url = g.proxy_url(&turn);
    let script = format!(
        "id -u; id -g; id -G; \
         cat {key} > /dev/null 2>&1; echo key=$?; \
         python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
c.execute(\"INSERT INTO admin_sites (pattern, created_at) VALUES (?, 0)\", (sys.argv[2],)); \
c.commit()' {db} {BLOCKED} 2> /dev/null; echo sqlite=$?; \
         touch {data}/planted 2> /dev/null; echo plant=$?; \
         curl -s -m 10 -o /dev/null -w 'approved=%{{http_code}}\\n' http://{APPROVED}:{port}/; \
         curl -s -m 10 -o /dev/null -w 'blocked=%{{http_code}}\\n' http://{BLOCKED}:{port}/",
        key = key.display(),
        db = data.join("egressgate.db").display(),
        data = data.display(),
    );
    let got = tokio::task::spawn_blocking(move || {
        sandbox(&proxy_url, &[], &["sh", "-c", &script], Path::new("/"), &[])
    })
    .await
    .unwrap();
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert_eq!(
        String::from_utf8_lossy(&got.stdout),
        "65534\n65534\n65534\nkey=1\nsqlite=1\nplant=1\napproved=200\nblocked=403\n",
        "{}",
        explain(&got)
    );
    assert!(!data.join("planted").exists());
    let rec = api.refusals(&turn).await;
    assert_eq!(rec["refusals"][0]["host"], BLOCKED, "{rec}");
    assert_eq!(
        o.requests().len(),
        1,
        "only the approved host reached the origin"
    );
}

/// The command's `/proc` is a fresh one for its PID namespace: a process of the host (here one
/// carrying a marker in its command line) is not there, and PID 1 is the sandbox's own init
/// (a copy of the launcher), not the host's.
#[test]
fn proc_inside_shows_only_the_sandboxs_own_processes() {
    let marker = format!("egressgate-proc-marker-{}", std::process::id());
    let mut host = Command::new("sh")
        .args(["-c", &format!("read _; : {marker}")])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    // The marker goes in as two halves joined inside (and matched by the shell, not by a
    // process carrying it in its arguments), so no command line inside matches it.
    let (a, b) = marker.split_at(10);
    let script = "m=\"$1$2\"; n=0; echo init=$(cat /proc/1/comm); \
                  for f in /proc/[0-9]*/cmdline; do \
                    case \"$(tr '\\0' ' ' < \"$f\")\" in *\"$m\"*) n=$((n+1));; esac; \
                  done; echo $n; \
                  echo visible=$(ls -d /proc/[0-9]* | wc -l)";
    let probe = |flags: &[&str]| {
        let got = sandbox(
            UNUSED_PROXY,
            flags,
            &["sh", "-c", script, "sh", a, b],
            Path::new("/"),
            &[],
        );
        assert_eq!(got.status.code(), Some(0), "{flags:?}: {}", explain(&got));
        got
    };
    let isolated = probe(&["--capture", "off"]);
    // The same probe on the host's /proc finds the marker: it is not blind.
    let unisolated = probe(&["--no-isolate"]);
    drop(host.stdin.take());
    let _ = host.wait();
    let out = String::from_utf8_lossy(&isolated.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..2],
        ["init=egressgate", "0"],
        "{}",
        explain(&isolated)
    );
    // init, the shell and the pipeline's few processes: nothing of the host's.
    let visible: usize = lines[2].strip_prefix("visible=").unwrap().parse().unwrap();
    assert!(visible <= 6, "{}", explain(&isolated));
    let host_view = String::from_utf8_lossy(&unisolated.stdout).into_owned();
    assert_eq!(
        host_view.lines().nth(1),
        Some("1"),
        "{}",
        explain(&unisolated)
    );
}

/// Where the launcher knows the gate's data directory (`--gate-data-dir`,
/// `EGRESSGATE_DATA_DIR`, or `./egressgate-data` in its working directory) and the command's
/// user could write it, rename it, or read or write a file in it, the launcher runs nothing:
/// one line, exit 125. A private data directory (the gate's own 0700) is fine.
#[test]
fn the_launcher_refuses_to_start_where_the_commands_user_could_reach_the_gates_data() {
    let shared = shared_dir();
    let ran = shared.path().join("ran");
    let run = |flags: &[&str], cwd: &Path, env: &[(&str, &str)]| {
        let got = sandbox(
            UNUSED_PROXY,
            flags,
            &["touch", ran.to_str().unwrap()],
            cwd,
            env,
        );
        let was_run = ran.exists();
        let _ = std::fs::remove_file(&ran);
        (got, was_run)
    };
    let refused = |case: &str, (got, was_run): (Output, bool), needle: &str| {
        assert_eq!(got.status.code(), Some(125), "{case}: {}", explain(&got));
        assert!(!was_run, "{case}: the command ran");
        let err = String::from_utf8_lossy(&got.stderr);
        assert_eq!(err.lines().count(), 1, "{case}: {err}");
        assert!(err.contains("refusing to start"), "{case}: {err}");
        assert!(err.contains(needle), "{case}: {err}");
    };

    // Writable by everyone, named by the gate's own variable.
    let open = tempfile::tempdir().unwrap();
    chmod(open.path(), 0o777);
    let open_dir = open.path().to_str().unwrap();
    refused(
        "EGRESSGATE_DATA_DIR, world-writable",
        run(&[], Path::new("/"), &[("EGRESSGATE_DATA_DIR", open_dir)]),
        &format!("could write the gate's data directory {open_dir}"),
    );

    // A searchable directory whose key is readable by everyone.
    let leaky = readable_dir();
    let key = leaky.path().join("ca-key.pem");
    std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\n").unwrap();
    chmod(&key, 0o644);
    refused(
        "--gate-data-dir, readable key",
        run(
            &["--gate-data-dir", leaky.path().to_str().unwrap()],
            Path::new("/"),
            &[],
        ),
        &format!("could read {}", key.display()),
    );
    // The same directory with the key back at 0600 is private again.
    chmod(&key, 0o600);
    let (got, was_run) = run(
        &["--gate-data-dir", leaky.path().to_str().unwrap()],
        Path::new("/"),
        &[],
    );
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert!(was_run);

    // `./egressgate-data` in the launcher's working directory: private itself, but its parent
    // is writable by everyone (and not sticky), so the user could rename it and put another
    // in its place.
    let parent = tempfile::tempdir().unwrap();
    chmod(parent.path(), 0o777);
    let default_dir = parent.path().join("egressgate-data");
    std::fs::create_dir(&default_dir).unwrap();
    chmod(&default_dir, 0o700);
    refused(
        "./egressgate-data under a writable parent",
        run(&[], parent.path(), &[]),
        &format!("could rename {}", default_dir.display()),
    );
    chmod(parent.path(), 0o755);
    let (got, was_run) = run(&[], parent.path(), &[]);
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert!(was_run, "a private ./egressgate-data stops nothing");

    // Host root (`--as-user root`) reaches every data directory: refused whenever one is known.
    refused(
        "--as-user root",
        run(&["--as-user", "root"], parent.path(), &[]),
        "could write the gate's data directory",
    );

    // A data directory named explicitly must exist: a typo is not silently unchecked.
    refused(
        "--gate-data-dir that does not exist",
        run(
            &["--gate-data-dir", "/nonexistent/egressgate-data"],
            Path::new("/"),
            &[],
        ),
        "/nonexistent/egressgate-data",
    );
}

/// The command's working directory is the launcher's; when the command's user cannot enter
/// it, the launcher says so and runs nothing, rather than start a command that then fails on
/// every relative path.
#[test]
fn a_working_directory_the_commands_user_cannot_enter_is_refused() {
    let shared = shared_dir();
    let ran = shared.path().join("ran");
    let private = tempfile::tempdir().unwrap();
    let touch = || {
        sandbox(
            UNUSED_PROXY,
            &[],
            &["touch", ran.to_str().unwrap()],
            private.path(),
            &[],
        )
    };
    chmod(private.path(), 0o700);
    let got = touch();
    assert_eq!(got.status.code(), Some(125), "{}", explain(&got));
    assert!(!ran.exists(), "the command ran");
    let err = String::from_utf8_lossy(&got.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "the working directory {} is not accessible to nobody (uid 65534)",
            private.path().display()
        )),
        "{err}"
    );
    // Searchable, not listable: enough to work in.
    chmod(private.path(), 0o711);
    let got = touch();
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert!(ran.exists());
}

/// Without namespaces there is nothing to map: a root launcher runs the command as the user
/// itself (no supplementary group, `no_new_privs` so a set-uid program cannot raise it).
#[test]
fn no_isolate_as_root_runs_the_command_as_the_unprivileged_user() {
    let dir = readable_dir();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "root only").unwrap();
    chmod(&secret, 0o600);
    let script = format!(
        "id -u; id -G; grep NoNewPrivs /proc/self/status; \
         cat {} 2> /dev/null; echo read=$?",
        secret.display()
    );
    for flags in [
        &["--no-isolate"][..],
        &["--no-isolate", "--as-user", "4242"],
    ] {
        let got = sandbox(
            UNUSED_PROXY,
            flags,
            &["sh", "-c", &script],
            Path::new("/"),
            &[],
        );
        let uid = if flags.len() == 1 { "65534" } else { "4242" };
        assert_eq!(got.status.code(), Some(0), "{flags:?}: {}", explain(&got));
        assert_eq!(
            String::from_utf8_lossy(&got.stdout),
            format!("{uid}\n{uid}\nNoNewPrivs:\t1\nread=1\n"),
            "{flags:?}: {}",
            explain(&got)
        );
    }
}
