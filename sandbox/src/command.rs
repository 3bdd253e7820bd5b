//! Starts the command with its environment, telling "not found" from "not executable".

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawnp};
use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;

use crate::error::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};

/// The outcome of starting the command.
pub(crate) enum Started {
    /// It runs, with this pid (as seen from the starting process).
    Running(Pid),
    /// It could not run; the reason is on stderr and this is the exit code (126 or 127).
    Failed(i32),
}

/// Spawns `program args...` (searched in `PATH`) with exactly `env`, inheriting stdin, stdout
/// and stderr, with signal mask `mask` and SIGPIPE back to its default.
///
/// The launcher holds signals blocked (see `signals`), and std's `Command` no longer resets
/// the mask of the child, so this uses `posix_spawnp` to hand the command the mask the
/// launcher itself started with, as `tini` does.
pub(crate) fn start(
    program: &OsString,
    args: &[OsString],
    env: Vec<(OsString, OsString)>,
    mask: &SigSet,
) -> Started {
    match spawn(program, args, env, mask) {
        Ok(pid) => Started::Running(pid),
        Err(errno) => {
            let (code, why) = match errno {
                Errno::ENOENT => (EXIT_NOT_FOUND, "command not found".to_owned()),
                Errno::EACCES if !in_some_path_directory(program) => {
                    (EXIT_NOT_FOUND, "command not found".to_owned())
                }
                Errno::EACCES => (EXIT_NOT_EXECUTABLE, "permission denied".to_owned()),
                other => (EXIT_NOT_EXECUTABLE, other.desc().to_owned()),
            };
            eprintln!("egressgate sandbox: {}: {why}", program.to_string_lossy());
            Started::Failed(code)
        }
    }
}

fn spawn(
    program: &OsString,
    args: &[OsString],
    env: Vec<(OsString, OsString)>,
    mask: &SigSet,
) -> nix::Result<Pid> {
    let path = c_string(program.as_bytes())?;
    let argv = std::iter::once(program)
        .chain(args)
        .map(|arg| c_string(arg.as_bytes()))
        .collect::<nix::Result<Vec<_>>>()?;
    let envp = env
        .iter()
        .map(|(name, value)| c_string(&[name.as_bytes(), b"=", value.as_bytes()].concat()))
        .collect::<nix::Result<Vec<_>>>()?;
    let mut attr = PosixSpawnAttr::init()?;
    let mut defaults = SigSet::empty();
    defaults.add(Signal::SIGPIPE);
    attr.set_sigdefault(&defaults)?;
    attr.set_sigmask(mask)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK,
    )?;
    posix_spawnp(&path, &PosixSpawnFileActions::init()?, &attr, &argv, &envp)
}

/// Whether `program` (a name without `/`) is a file in some `PATH` directory this process may
/// search; a path is taken as found. `execvp` says `EACCES` when it met a directory it may not
/// search (root's `PATH` holds some that `--as-user`'s user may not), even where the name is in
/// none; a shell says "command not found", and so does the launcher.
fn in_some_path_directory(program: &OsStr) -> bool {
    if program.as_bytes().contains(&b'/') {
        return true;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| dir.join(program).exists())
}

/// Arguments and environment strings cannot hold NUL bytes; `EINVAL` if one does.
fn c_string(bytes: &[u8]) -> nix::Result<CString> {
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}
