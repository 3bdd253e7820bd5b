//! Real package registries on loopback for the package tests: pypiserver (PyPI's simple
//! index and files) with wheels written by the test, and verdaccio (npm) with packages
//! published into it; plus the real installers (`pip`, `npm`) driven through the proxy.
//! The scheme the installers use is [`SCHEME`], in one place, so the tests can move to
//! inspected HTTPS by changing it (and trusting the deployment CA). Longer than most rooms
//! because it drives two real registries and two real installers; `registry/mirror.rs` holds
//! the gate built around them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::{Api, GateBuilder, Turn, gate};

pub mod file_mirror;
pub mod mirror;

/// How the installers reach the registries through the proxy.
pub const SCHEME: &str = "http";

/// Whether `cmd args…` runs. In CI (`CI` set) a missing tool fails the test loudly, since
/// `.ci/run` installs it; elsewhere the test says why it skipped.
pub fn tool(cmd: &str, args: &[&str]) -> bool {
    let ok = Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").is_err(),
            "{cmd} {args:?} failed; .ci/run installs it"
        );
        eprintln!("skipped: {cmd} {args:?} is not available");
    }
    ok
}

/// Whether pip and pypiserver are here (loudly not, in CI).
pub fn pip_tools() -> bool {
    tool("python3", &["-m", "pip", "--version"])
        && tool("python3", &["-m", "pypiserver", "--version"])
}

/// A child process killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` (a registry server, output discarded) and waits (bounded) until something
/// accepts on `127.0.0.1:port`, or the child exited.
fn serve(mut cmd: Command, port: u16, what: &str) -> Server {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Server { child, port }
}

/// Runs a registry-side setup step to completion and asserts it succeeded (its stderr in the
/// message): a test must not go on against a registry that is missing what it was given.
fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// pypiserver serving `dir`, with no fallback to the public index (an unknown package is a
/// `404`, never a redirect off this machine).
pub fn pypiserver(dir: &Path) -> Server {
    let port = super::free_port();
    let mut cmd = Command::new("python3");
    cmd.args([
        "-m",
        "pypiserver",
        "run",
        "--disable-fallback",
        "-i",
        "127.0.0.1",
    ])
    .args(["-p", &port.to_string()])
    .arg(dir);
    serve(cmd, port, "pypiserver")
}

/// Writes a minimal pure-Python wheel `name-version-py3-none-any.whl` into `dir` whose
/// METADATA requires `requires` (as pip reads it from the wheel: pypiserver publishes no
/// PEP 658 metadata).
pub fn write_wheel(dir: &Path, name: &str, version: &str, requires: &[&str]) -> PathBuf {
    let script = r#"
import sys, zipfile
d, name, version, *requires = sys.argv[1:]
dist = name.replace("-", "_")
path = f"{d}/{dist}-{version}-py3-none-any.whl"
info = f"{dist}-{version}.dist-info"
meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
files = {
    f"{dist}/__init__.py": f"VERSION = {version!r}\n",
    f"{info}/METADATA": meta,
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: egressgate-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    for p, text in files.items():
        z.writestr(p, text)
    z.writestr(f"{info}/RECORD", record)
print(path)
"#;
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script])
        .arg(dir)
        .args([name, version])
        .args(requires);
    let out = run_ok(&mut cmd, &format!("write wheel {name}-{version}"));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The proxy URL with the turn's credential, as the sandbox gets it.
pub fn proxy_url(proxy: SocketAddr, turn: &Turn) -> String {
    format!("http://{}@{proxy}", turn.credential)
}

/// `pip install` of `specs` into a fresh target directory under `work`, from the index
/// `http://HOST:PORT/simple/` through the proxy; no cache, no version check, nothing from
/// the test's own environment.
pub fn pip_install(
    proxy: SocketAddr,
    turn: &Turn,
    index_host: &'static str,
    port: u16,
    work: &Path,
    specs: &[&str],
) -> Output {
    let index = Index {
        url: format!("{SCHEME}://{index_host}:{port}/simple/"),
        host: index_host,
        cert: None,
    };
    pip_install_from(proxy, turn, &index, work, specs)
}

/// A package index as pip is pointed at it.
pub struct Index {
    /// The simple index URL (`http://…/simple/` or `https://…/simple/`).
    pub url: String,
    /// Its host (trusted without TLS when the URL is plain HTTP).
    pub host: &'static str,
    /// The only CA bundle pip trusts (`--cert`), for an HTTPS index.
    pub cert: Option<PathBuf>,
}

/// [`pip_install`] from any [`Index`], plain or HTTPS.
pub fn pip_install_from(
    proxy: SocketAddr,
    turn: &Turn,
    index: &Index,
    work: &Path,
    specs: &[&str],
) -> Output {
    let target = tempfile::tempdir_in(work).unwrap().keep();
    let proxy = proxy_url(proxy, turn);
    let mut cmd = Command::new("python3");
    cmd.args([
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
    ])
    .args(["--no-input", "--retries", "0", "--timeout", "20"])
    .arg("--index-url")
    .arg(&index.url);
    match &index.cert {
        Some(cert) => cmd.arg("--cert").arg(cert),
        None => cmd.args(["--trusted-host", index.host]),
    };
    cmd.arg("--target")
        .arg(&target)
        .args(specs)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", work)
        .env("http_proxy", &proxy)
        .env("https_proxy", &proxy)
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .expect("pip")
}

/// A gate that knows `host` (resolved to loopback, `port` allowed) as a private mirror of
/// `ecosystem` (`pypi` or `npm`), not yet started.
pub fn mirror_gate(ecosystem: &str, host: &str, port: u16) -> GateBuilder {
    mirrors_gate(&[(ecosystem, host)], port)
}

/// A gate that knows each (ecosystem, host) as a private mirror, every host resolved to
/// loopback and served on `port` (allowed), not yet started.
pub fn mirrors_gate(mirrors: &[(&str, &str)], port: u16) -> GateBuilder {
    let mut g = gate().args(&[
        "--allow-cidr",
        "127.0.0.1/32",
        "--allow-port",
        &port.to_string(),
    ]);
    for (ecosystem, host) in mirrors {
        g = g
            .resolve(host, "127.0.0.1")
            .args(&["--registry-mirror", &format!("{ecosystem}={host}")]);
    }
    g
}

/// Runs the approval tool naming `packages` (plus what the turn was refused), registers the
/// interrupt and returns (the card, interrupt id, resume secret).
pub async fn ask_packages(
    api: &Api,
    turn: &Turn,
    packages: &[&str],
) -> (serde_json::Value, String, String) {
    let body =
        serde_json::json!({"reason": "the script installs what it needs", "packages": packages});
    super::ask_with(api, turn, body).await
}

/// The administrators list `packages` (maybe pinned), then user `u` opens a turn in chat `c`:
/// where most package rows run.
pub async fn listed_turn(api: &Api, packages: &[&str]) -> Turn {
    for name in packages {
        api.admin_package(name).await;
    }
    api.turn("u", "c", &[]).await
}

/// Whether an installer's run succeeded; prints its output when it did not.
pub fn installed(out: &Output) -> bool {
    if !out.status.success() {
        eprintln!(
            "the installer failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

/// The refusal rows of `reason` that name a package, as (package, approvable).
pub async fn refused_packages(api: &Api, turn: &Turn) -> Vec<String> {
    let rec = api.refusals(turn).await;
    let mut out: Vec<String> = rec["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == "package_not_approved")
        .filter_map(|r| r["package"].as_str().map(str::to_owned))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether `package` (its canonical spelling) is among the packages refused this turn.
pub async fn was_refused(api: &Api, turn: &Turn, package: &str) -> bool {
    refused_packages(api, turn)
        .await
        .iter()
        .any(|p| p == package)
}

/// Where `.ci/run` installs verdaccio (`EGRESSGATE_TEST_VERDACCIO` overrides).
pub fn verdaccio_bin() -> PathBuf {
    std::env::var_os("EGRESSGATE_TEST_VERDACCIO").map_or_else(
        || PathBuf::from("/var/tmp/egressgate-verdaccio/node_modules/verdaccio/bin/verdaccio"),
        PathBuf::from,
    )
}

/// Whether node, npm and verdaccio are here (loudly not, in CI).
pub fn npm_tools() -> bool {
    tool("npm", &["--version"]) && tool("node", &[verdaccio_bin().to_str().unwrap(), "--version"])
}

/// verdaccio with its storage under `dir`, no uplinks (nothing leaves this machine), and
/// anyone may read and publish.
pub fn verdaccio(dir: &Path) -> Server {
    let port = super::free_port();
    let config = dir.join("verdaccio.yaml");
    std::fs::write(
        &config,
        format!(
            "storage: {storage}\nauth:\n  htpasswd:\n    file: {htpasswd}\n    max_users: -1\n\
             uplinks: {{}}\npackages:\n  '**':\n    access: $all\n    publish: $all\n\
             log: {{ type: stdout, format: pretty, level: error }}\n",
            storage = dir.join("storage").display(),
            htpasswd = dir.join("htpasswd").display(),
        ),
    )
    .unwrap();
    let mut cmd = Command::new("node");
    cmd.arg(verdaccio_bin())
        .arg("--config")
        .arg(&config)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"));
    serve(cmd, port, "verdaccio")
}

/// Publishes `name@version` (depending on `deps`, name → range) straight to verdaccio on
/// `port` (not through the proxy: this is the registry's side).
pub fn npm_publish(port: u16, work: &Path, name: &str, version: &str, deps: &[(&str, &str)]) {
    let dir = tempfile::tempdir_in(work).unwrap().keep();
    let deps: serde_json::Map<String, serde_json::Value> = deps
        .iter()
        .map(|(n, r)| ((*n).to_owned(), (*r).into()))
        .collect();
    let manifest = serde_json::json!({"name": name, "version": version, "main": "index.js", "dependencies": deps});
    std::fs::write(dir.join("package.json"), manifest.to_string()).unwrap();
    std::fs::write(
        dir.join("index.js"),
        format!("module.exports = {version:?};\n"),
    )
    .unwrap();
    // verdaccio lets anyone publish here; npm still wants a token to send.
    std::fs::write(
        dir.join(".npmrc"),
        format!("//127.0.0.1:{port}/:_authToken=test\n"),
    )
    .unwrap();
    // npm publishes a pre-release only under a tag other than `latest`.
    let tag = if version.contains('-') {
        "next"
    } else {
        "latest"
    };
    let mut cmd = Command::new("npm");
    cmd.args(["publish", "--access", "public", "--tag", tag, "--registry"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .current_dir(&dir)
        .env("HOME", &dir)
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY");
    run_ok(&mut cmd, &format!("npm publish {name}@{version}"));
}

/// `npm install` of `specs` into a fresh prefix under `work`, from the registry
/// `http://HOST:PORT/` through the proxy, with a fresh cache (so every file passes the
/// proxy) and no audit.
pub fn npm_install(
    proxy: SocketAddr,
    turn: &Turn,
    registry_host: &str,
    port: u16,
    work: &Path,
    specs: &[&str],
) -> Output {
    let prefix = tempfile::tempdir_in(work).unwrap().keep();
    let proxy = proxy_url(proxy, turn);
    Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--no-update-notifier",
            "--prefer-online",
        ])
        .args(["--fetch-retries", "0", "--registry"])
        .arg(format!("{SCHEME}://{registry_host}:{port}/"))
        .args(["--proxy", &proxy, "--https-proxy", &proxy, "--prefix"])
        .arg(&prefix)
        .arg("--cache")
        .arg(prefix.join(".cache"))
        .args(specs)
        .current_dir(&prefix)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &prefix)
        .output()
        .expect("npm")
}
