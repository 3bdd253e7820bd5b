//! `egressgate sandbox run`: runs a command whose only route out is the egress proxy.
//!
//! On Linux the command runs in fresh user, network, PID and mount namespaces whose only
//! interface is loopback; a forwarder on `127.0.0.1` inside relays through a Unix socket to this
//! process, which dials the proxy. A root launcher runs the command as an unprivileged user
//! (`--as-user`, default `nobody`), and refuses to start where that user could reach the
//! gate's data directory. See `README.md` in this crate for what that does and does not stop.
//!
//! Call [`run`] before the process starts any thread (before building a tokio runtime): it
//! forks, and the kernel only lets a single-threaded process create a user namespace.

mod capture;
mod command;
mod direct;
mod env;
mod error;
mod fork;
mod guard;
mod identity;
mod isolated;
mod loopback;
mod namespace;
mod proxy_url;
mod relay;
mod report;
mod signals;
mod supervise;
mod trust;
mod url_source;

use std::ffi::OsString;
use std::path::PathBuf;

pub use capture::Capture;
pub use error::{
    EXIT_ISOLATION_UNAVAILABLE, EXIT_LAUNCHER_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND,
    SandboxError,
};
pub use trust::CaSource;
pub use url_source::{PROXY_URL_ENV, hide_proxy_url_from_argv, proxy_url_from};

/// Options parsed from `egressgate sandbox run` (the binary builds this with clap).
#[derive(Clone)]
pub struct RunOptions {
    /// `--proxy-url`: the proxy and the turn's credential, `http://USER:PASS@HOST:PORT`.
    pub proxy_url: String,
    /// `false` with `--no-isolate`: only set the proxy variables, for platforms without
    /// namespaces.
    pub isolate: bool,
    /// `--capture`: whether connections that ignore the proxy settings are captured (only
    /// when isolated; `--no-isolate` has nothing to capture with).
    pub capture: Capture,
    /// Where the deployment CA comes from (`--ca-file`, `--control-url`): the command then
    /// gets a bundle of the system roots plus it. `None`: the trust store is left alone.
    pub ca: Option<CaSource>,
    /// `--as-user`: the user (name or uid) a root launcher runs the command as; `None` for
    /// `nobody`. An unprivileged launcher runs the command as itself and accepts only its own.
    pub as_user: Option<String>,
    /// `--gate-data-dir`: the gate's data directories, which the command's user must not be
    /// able to reach (besides `EGRESSGATE_DATA_DIR` and `./egressgate-data`, when they exist).
    pub gate_data_dirs: Vec<PathBuf>,
    /// The command and its arguments (after `--`).
    pub command: Vec<OsString>,
}

impl std::fmt::Debug for RunOptions {
    // `proxy_url` carries the turn's credential: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("proxy_url", &"<redacted>")
            .field("isolate", &self.isolate)
            .field("capture", &self.capture)
            .field("ca", &self.ca)
            .field("as_user", &self.as_user)
            .field("gate_data_dirs", &self.gate_data_dirs)
            .field("command", &self.command)
            .finish()
    }
}

/// Runs the command and returns the exit code the launcher process should exit with: the
/// command's own (128 + signal number if a signal killed it; 126/127 if it could not be
/// executed or found).
///
/// Never returns `Err` for the command's own failure; `Err` only for the launcher's, which the
/// caller prints as one line and exits with [`SandboxError::exit_code`] (125, or
/// [`EXIT_ISOLATION_UNAVAILABLE`] when isolation is impossible here). Must be called while the
/// process is single-threaded (it forks to run as the command's user).
pub fn run(opts: RunOptions) -> Result<i32, SandboxError> {
    let proxy = proxy_url::ProxyUrl::parse(&opts.proxy_url)?;
    let Some((program, args)) = opts.command.split_first() else {
        return Err(SandboxError::NoCommand);
    };
    let identity = identity::Identity::resolve(opts.as_user.as_deref())?;
    guard::check(&identity, &opts.gate_data_dirs)?;
    // Kept until the command ended (the launcher removes its directory when it returns).
    let bundle = opts.ca.as_ref().map(trust::prepare).transpose()?;
    let bundle_path = bundle.as_ref().map(trust::Bundle::path);
    if opts.isolate {
        let capture = capture::decide(opts.capture, &proxy)?;
        isolated::run(&proxy, program, args, capture, bundle_path, &identity)
    } else {
        direct::run(&proxy, program, args, bundle_path, &identity)
    }
}
