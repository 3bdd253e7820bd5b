//! Starts the command with its environment, telling "not found" from "not executable".

use std::ffi::OsString;
use std::io::ErrorKind;
use std::process::Command;

use nix::unistd::Pid;

use crate::error::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};

/// The outcome of starting the command.
pub(crate) enum Started {
    /// It runs, with this pid (as seen from the starting process).
    Running(Pid),
    /// It could not run; the reason is on stderr and this is the exit code (126 or 127).
    Failed(i32),
}

/// Spawns `program args...` with exactly `env`, inheriting stdin, stdout and stderr.
///
/// Std's spawn resets the signal mask and dispositions in the child, so the command starts
/// with default signal handling even though its parent holds signals back.
pub(crate) fn start(program: &OsString, args: &[OsString], env: Vec<(OsString, OsString)>) -> Started {
    let spawned = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .spawn();
    match spawned {
        Ok(child) => match i32::try_from(child.id()) {
            Ok(pid) => Started::Running(Pid::from_raw(pid)),
            Err(_) => Started::Failed(EXIT_NOT_EXECUTABLE),
        },
        Err(e) => {
            let (code, why) = match e.kind() {
                ErrorKind::NotFound => (EXIT_NOT_FOUND, "command not found".to_owned()),
                ErrorKind::PermissionDenied => (EXIT_NOT_EXECUTABLE, "permission denied".to_owned()),
                _ => (EXIT_NOT_EXECUTABLE, e.to_string()),
            };
            eprintln!("egressgate sandbox: {}: {why}", program.to_string_lossy());
            Started::Failed(code)
        }
    }
}
