//! `--no-isolate`: runs the command with the proxy variables set and nothing else, for
//! platforms without namespaces. A script that ignores the variables reaches the network.

use std::ffi::OsString;

use nix::sys::prctl;

use crate::command::{self, Started};
use crate::env::command_env;
use crate::error::SandboxError;
use crate::proxy_url::ProxyUrl;
use crate::signals::Signals;
use crate::supervise::{Reap, supervise};

/// Runs `program args...` unisolated and returns its exit code.
pub(crate) fn run(
    proxy: &ProxyUrl,
    program: &OsString,
    args: &[OsString],
    bundle: Option<&std::path::Path>,
) -> Result<i32, SandboxError> {
    eprintln!(
        "egressgate sandbox: warning: --no-isolate: the command's network is not isolated; \
         only the proxy variables are set"
    );
    let signals = Signals::hold()?;
    prctl::set_dumpable(false)
        .map_err(|e| SandboxError::setup("making the launcher non-dumpable", e))?;
    let env = command_env(std::env::vars_os(), &proxy.direct(), bundle);
    match command::start(program, args, env, signals.original_mask()) {
        Started::Failed(code) => Ok(code),
        Started::Running(pid) => supervise(pid, Reap::Child, &signals)
            .map_err(|e| SandboxError::setup("waiting for the command", e)),
    }
}
