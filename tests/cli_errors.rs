//! The command line's edge as a newcomer meets it: every error names what the user actually
//! wrote (flag, environment variable or config-file key), `admin` never invents an empty
//! database, an unreadable data directory says "permission denied", and each subcommand's
//! `--help` shows the settings it reads, with their defaults.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

fn egressgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_egressgate"));
    for (k, _) in std::env::vars() {
        if k.starts_with("EGRESSGATE_") || k == "DATABASE_URL" {
            c.env_remove(k);
        }
    }
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn one_line_failure(o: &Output) -> String {
    assert!(!o.status.success(), "must fail: {}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

#[test]
fn an_environment_value_is_reported_under_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    // A value clap parses (a number) and one the validator parses (a duration).
    for (var, value) in [
        ("EGRESSGATE_CLAIM_CAP", "many"),
        ("EGRESSGATE_TURN_TTL", "soon"),
    ] {
        let out = egressgate()
            .args(["serve", "--data-dir"])
            .arg(dir.path())
            .env(var, value)
            .output()
            .unwrap();
        let e = one_line_failure(&out);
        assert!(e.contains(var), "{var}: {e}");
        assert!(e.contains(value), "{var}: {e}");
        let flag = format!(
            "--{}",
            var["EGRESSGATE_".len()..]
                .to_ascii_lowercase()
                .replace('_', "-")
        );
        assert!(
            !e.contains(&flag),
            "names a flag the user never passed: {e}"
        );
    }
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing was written"
    );
}

#[test]
fn a_config_file_value_is_reported_under_its_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("egressgate.toml");
    std::fs::write(&file, "proxy-listen = \"nowhere\"\n").unwrap();
    let data = dir.path().join("data");
    let out = egressgate()
        .args(["serve", "--config"])
        .arg(&file)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    let e = one_line_failure(&out);
    assert!(e.contains("proxy-listen (in "), "{e}");
    assert!(e.contains("egressgate.toml"), "{e}");
    assert!(!e.contains("--proxy-listen"), "{e}");
    assert!(!data.exists(), "nothing was written");
    // The same value on the command line is named as the flag.
    let out = egressgate()
        .args(["serve", "--proxy-listen", "nowhere", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(one_line_failure(&out).contains("--proxy-listen \"nowhere\""));
}

#[test]
fn admin_in_the_wrong_directory_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = egressgate()
        .args(["admin", "sites", "add", "example.com"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let e = one_line_failure(&out);
    assert!(
        e.contains("no egressgate database in egressgate-data"),
        "{e}"
    );
    assert!(e.contains("--data-dir"), "{e}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "no empty database was created"
    );
}

/// Root reads any directory, so the unreadable case runs as `nobody` (setpriv, util-linux).
#[test]
fn an_unreadable_data_directory_says_permission_denied() {
    if !nix_is_root() {
        eprintln!("skipped: needs root to switch to an unprivileged user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_egressgate"))
        .env_remove("DATABASE_URL")
        .env_remove("EGRESSGATE_DATABASE_URL")
        .args(["serve", "--data-dir"])
        .arg(&locked)
        .output()
        .unwrap();
    let e = one_line_failure(&out);
    assert!(e.contains("Permission denied"), "{e}");
    assert!(e.contains(locked.to_str().unwrap()), "{e}");
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

#[test]
fn each_subcommand_help_shows_what_it_reads_with_defaults() {
    let help = |args: &[&str]| {
        let out = egressgate().args(args).arg("--help").output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let admin = help(&["admin", "sites", "add"]);
    assert!(admin.contains("--data-dir"), "{admin}");
    assert!(admin.contains("[default: ./egressgate-data]"), "{admin}");
    for server_only in ["--proxy-listen", "--allow-cidr", "--claim-cap", "--lease"] {
        assert!(
            !admin.contains(server_only),
            "admin shows {server_only}: {admin}"
        );
    }
    let migrate = help(&["migrate"]);
    assert!(!migrate.contains("--turn-ttl"), "{migrate}");
    let proxy = help(&["proxy"]);
    assert!(proxy.contains("--allow-cidr"), "{proxy}");
    assert!(proxy.contains("[default: 127.0.0.1:3128]"), "{proxy}");
    assert!(!proxy.contains("--control-listen"), "{proxy}");
    assert!(!proxy.contains("--claim-cap"), "{proxy}");
    let control = help(&["control"]);
    assert!(control.contains("--claim-cap"), "{control}");
    assert!(control.contains("[default: 3]"), "{control}");
    assert!(!control.contains("--allow-cidr"), "{control}");
    let serve = help(&["serve"]);
    assert!(
        serve.contains("--allow-cidr") && serve.contains("--claim-cap"),
        "{serve}"
    );
}

#[test]
fn a_bad_registry_or_mirror_is_a_one_line_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec!["--registry", "cargo"],
            "--registry \"cargo\": expected pypi or npm",
        ),
        (vec!["--registry-mirror", "pypi"], "expected ECOSYSTEM=HOST"),
        (
            vec!["--registry-mirror", "gems=gems.corp.example"],
            "expected pypi or npm",
        ),
        (
            vec!["--registry-mirror", "pypi=ok.example,bad host"],
            "\"bad host\"",
        ),
    ] {
        let out = egressgate()
            .args(["serve", "--data-dir"])
            .arg(dir.path())
            .args(&args)
            .output()
            .unwrap();
        let e = one_line_failure(&out);
        assert!(e.contains(needle), "{args:?}: {e}");
    }
    // The environment names mirrors `;`-separated, and errors name the variable.
    let out = egressgate()
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .env("EGRESSGATE_REGISTRY_MIRROR", "pypi=a.example,b.example;npm")
        .output()
        .unwrap();
    let e = one_line_failure(&out);
    assert!(
        e.contains("EGRESSGATE_REGISTRY_MIRROR") && e.contains("\"npm\""),
        "{e}"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing was written"
    );
}
