//! The command's trust store: the system's CA bundle plus the deployment CA (which signs the
//! certificates the proxy presents for inspected hosts), written to one file of its own. The
//! usual variables point at it, and in the command's own mount namespace it is bind-mounted
//! over the system bundle too, for tools that read only the default path. Everything in it is
//! public, and the command may run as another user than the launcher (`--as-user`), so it is
//! readable by everyone; only the launcher may change it.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};

use crate::error::SandboxError;

/// Where systems keep their bundle (Debian/Ubuntu/Alpine, Fedora/RHEL, openSUSE, BSD/macOS).
pub(crate) const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Variables that name the bundle: OpenSSL's (`SSL_CERT_FILE`: Python, Ruby, many more),
/// Python requests', pip's, curl's, Node's (which adds to its own roots), npm's and git's.
pub(crate) const TRUST_VARS: [&str; 7] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "npm_config_cafile",
    "GIT_SSL_CAINFO",
];

/// Largest CA answer accepted from the control plane.
const MAX_CA_BYTES: u64 = 64 * 1024;

/// Where the deployment CA comes from.
#[derive(Clone, Debug)]
pub enum CaSource {
    /// A PEM file (`--ca-file`).
    File(PathBuf),
    /// The control plane's `GET /v1/ca.pem` at this base URL (`--control-url`, `http://` only).
    ControlUrl(String),
}

/// The written bundle; its directory is removed when this is dropped (by the launcher, after
/// the command ended).
pub(crate) struct Bundle {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Bundle {
    /// The bundle file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads the deployment CA and writes the bundle (system roots first, then it).
pub(crate) fn prepare(source: &CaSource) -> Result<Bundle, SandboxError> {
    let bad = |why: String| SandboxError::Trust(why);
    let ca = match source {
        CaSource::File(p) => std::fs::read_to_string(p)
            .map_err(|e| bad(format!("cannot read --ca-file {}: {e}", p.display())))?,
        CaSource::ControlUrl(url) => fetch(url).map_err(bad)?,
    };
    if !ca.contains("-----BEGIN CERTIFICATE-----") || ca.contains("PRIVATE KEY") {
        return Err(bad("the deployment CA is not a PEM certificate".into()));
    }
    let system = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let dir = tempfile::Builder::new()
        .prefix("egressgate-ca-")
        .tempdir()
        .map_err(|e| SandboxError::setup("creating a directory for the CA bundle", e))?;
    let path = dir.path().join("ca-bundle.pem");
    let mut text = system;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&ca);
    let readable =
        |p: &Path, mode: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| readable(&path, 0o644))
        .and_then(|()| readable(dir.path(), 0o755))
        .map_err(|e| SandboxError::setup("writing the CA bundle", e))?;
    Ok(Bundle { _dir: dir, path })
}

/// `GET BASE/v1/ca.pem` over plain HTTP/1.0 (the launcher is single-threaded and outside the
/// sandbox here: a blocking socket, bounded in time and size).
fn fetch(base: &str) -> Result<String, String> {
    let rest = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("--control-url {base:?}: only http:// URLs are supported"))?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("--control-url {base:?}: expected http://HOST:PORT"));
    }
    let addr = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let failed = |e: std::io::Error| format!("cannot fetch the CA from {base}: {e}");
    let timeout = Duration::from_secs(10);
    let sock = std::net::ToSocketAddrs::to_socket_addrs(&addr)
        .map_err(failed)?
        .next()
        .ok_or_else(|| format!("--control-url {base:?}: the host does not resolve"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, timeout).map_err(failed)?;
    s.set_read_timeout(Some(timeout)).map_err(failed)?;
    s.write_all(format!("GET /v1/ca.pem HTTP/1.0\r\nHost: {authority}\r\n\r\n").as_bytes())
        .map_err(failed)?;
    let mut answer = Vec::new();
    s.take(MAX_CA_BYTES)
        .read_to_end(&mut answer)
        .map_err(failed)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("cannot fetch the CA from {base}: no HTTP answer"))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("cannot fetch the CA from {base}: status {status}"));
    }
    Ok(body.to_owned())
}

/// The variables naming `bundle`.
pub(crate) fn vars(bundle: &Path) -> Vec<(OsString, OsString)> {
    TRUST_VARS
        .iter()
        .map(|v| ((*v).into(), bundle.as_os_str().to_owned()))
        .collect()
}

/// Inside a new mount namespace whose mounts are private to it: mounts `bundle`, read-only,
/// over each system bundle path that exists.
pub(crate) fn mount_over_system(bundle: &Path) -> Result<(), String> {
    let none: Option<&str> = None;
    for target in SYSTEM_BUNDLES {
        // A symlink is followed by the mount, as by every reader of the path.
        match mount(Some(bundle), target, none, MsFlags::MS_BIND, none) {
            Ok(()) => {}
            Err(Errno::ENOENT | Errno::ENOTDIR) => continue,
            Err(e) => return Err(format!("mounting the CA bundle over {target}: {e}")),
        }
        let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        mount(none, target, none, read_only, none)
            .map_err(|e| format!("making {target} read-only: {e}"))?;
    }
    Ok(())
}
