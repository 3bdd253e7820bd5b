//! `--no-isolate`: runs the command with the proxy variables set and nothing else, for
//! platforms without namespaces. A script that ignores the variables reaches the network.
//!
//! A root launcher still runs the command as its unprivileged user (`--as-user`): with no user
//! namespace there is nothing to map, so a forked child becomes that user (no supplementary
//! group, `no_new_privs`) and starts and waits for the command, while the launcher, still
//! root, waits for the child and removes its own files (the CA bundle) at the end.

use std::ffi::OsString;

use nix::sys::prctl;
use nix::unistd::ForkResult;

use crate::command::{self, Started};
use crate::env::command_env;
use crate::error::{EXIT_LAUNCHER_ERROR, SandboxError};
use crate::fork::fork_single_threaded;
use crate::identity::Identity;
use crate::namespace::ensure_single_threaded;
use crate::proxy_url::ProxyUrl;
use crate::signals::Signals;
use crate::supervise::{Reap, supervise};

/// Runs `program args...` unisolated and returns its exit code.
pub(crate) fn run(
    proxy: &ProxyUrl,
    program: &OsString,
    args: &[OsString],
    bundle: Option<&std::path::Path>,
    identity: &Identity,
) -> Result<i32, SandboxError> {
    eprintln!(
        "egressgate sandbox: warning: --no-isolate: the command's network is not isolated; \
         only the proxy variables are set"
    );
    let signals = Signals::hold()?;
    prctl::set_dumpable(false)
        .map_err(|e| SandboxError::setup("making the launcher non-dumpable", e))?;
    let env = command_env(std::env::vars_os(), &proxy.direct(), bundle);
    let start = |env| match command::start(program, args, env, signals.original_mask()) {
        Started::Failed(code) => Ok(code),
        Started::Running(pid) => supervise(pid, Reap::Child, &signals),
    };
    let waited = if let Identity::User(_) = identity {
        ensure_single_threaded()?;
        match fork_single_threaded().map_err(|e| SandboxError::setup("forking", e))? {
            ForkResult::Child => {
                let code = match identity.assume() {
                    Ok(()) => start(env).unwrap_or(EXIT_LAUNCHER_ERROR),
                    Err(why) => {
                        eprintln!("egressgate sandbox: {why}");
                        EXIT_LAUNCHER_ERROR
                    }
                };
                std::process::exit(code)
            }
            ForkResult::Parent { child } => supervise(child, Reap::Child, &signals),
        }
    } else {
        start(env)
    };
    waited.map_err(|e| SandboxError::setup("waiting for the command", e))
}
