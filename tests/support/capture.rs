//! Helpers for the capture tests (tests/sandbox_capture*.rs): the launcher run around a
//! command with the proxy URL off its command line, the shipped client scripts, and a gate
//! that resolves the tests' names to the loopback origins.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::*;

pub const APPROVED: &str = "approved.example.com";

/// Whether `tool` is installed; in CI (`CI=true`) a missing one fails the test loudly.
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is needed by this test (see .ci/run)"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    found
}

/// A temporary directory every user may read, for what the sandbox's command (`nobody`
/// under the root launcher of CI) must read.
pub fn readable_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// One of the client scripts shipped with these tests, copied where the sandbox's command
/// may read it wherever the checkout lives; keep the directory while the command runs.
pub fn client_script(name: &str) -> (tempfile::TempDir, String) {
    let dir = readable_dir();
    let copy = dir.path().join(name);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name);
    std::fs::copy(shipped, &copy).unwrap();
    (dir, copy.display().to_string())
}

/// `egressgate sandbox run [flags] -- argv...` from `/` (which the command's user may enter)
/// with the proxy URL in `EGRESSGATE_PROXY_URL` (off the command line), capture at its
/// default.
pub async fn sandbox(proxy_url: &str, flags: &[&str], argv: &[String]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_egressgate"));
    cmd.args(["sandbox", "run"])
        .args(flags)
        .arg("--")
        .args(argv)
        .env("EGRESSGATE_PROXY_URL", proxy_url)
        .current_dir("/")
        .stdin(Stdio::null());
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Python lines that connect to `host:port` and start TLS there naming `sni` in the
/// ClientHello instead (domain fronting), with the `ssl` context `ctx` the script defined
/// before (it imports `socket` and `ssl`): they print `fronted: handshake completed`, or
/// `fronted: refused` when the handshake fails.
pub fn fronting_probe(host: &str, port: u16, sni: &str) -> String {
    format!(
        r#"raw = socket.create_connection(("{host}", {port}), timeout=20)
try:
    ctx.wrap_socket(raw, server_hostname="{sni}")
    print("fronted: handshake completed")
except (ssl.SSLError, OSError) as e:
    print("fronted: refused")
"#
    )
}

pub fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A loopback origin and a gate that resolves `hosts` to it and allows its port, for a test
/// whose sandboxed command runs `tool`: `None` when `tool` is not installed (the test then
/// returns early; in CI [`have`] fails it loudly instead).
pub async fn capture_bench(tool: &str, hosts: &[&str]) -> Option<(Origin, Gate)> {
    if !have(tool) {
        return None;
    }
    let o = origin().await;
    let g = gate_for(hosts, &[o.port()], &[]);
    Some((o, g))
}

/// A gate that resolves `hosts` to the loopback origins and allows their ports.
pub fn gate_for(hosts: &[&str], ports: &[u16], extra: &[&str]) -> Gate {
    let mut builder = gate().args(&["--allow-cidr", "127.0.0.0/8"]);
    for host in hosts {
        builder = builder.resolve(host, "127.0.0.1");
    }
    for port in ports {
        builder = builder.args(&["--allow-port", &port.to_string()]);
    }
    builder.args(extra).start()
}
