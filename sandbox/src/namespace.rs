//! Moves the inside half into fresh user, network and PID namespaces.
//!
//! A user namespace is made even when running as root: root's commands then hold capabilities
//! only inside it, so they cannot `setns` back into the host's network namespace (through
//! `/proc/1/ns/net`) or otherwise reach outside. As root the maps are the identity over every
//! id the current namespace knows, so files and ids look the same to the command; otherwise
//! the current uid and gid are mapped to themselves, so the command stays unprivileged.

use std::fs::File;
use std::io::{Read, Write};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getegid, geteuid, getpid, pipe2};

use crate::error::SandboxError;
use crate::fork::fork_single_threaded;
use crate::report::Failure;

/// Fails unless this process has exactly one thread: forking a threaded process is unsafe and
/// the kernel refuses `unshare(CLONE_NEWUSER)` to it.
pub(crate) fn ensure_single_threaded() -> Result<(), SandboxError> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map_err(|e| SandboxError::setup("counting this process's threads", e))?
        .count();
    if threads == 1 {
        Ok(())
    } else {
        Err(SandboxError::NotSingleThreaded(threads))
    }
}

/// The id maps the new user namespace gets, worked out before unsharing.
pub(crate) struct IdMaps {
    uid_map: String,
    gid_map: String,
    /// Unprivileged writers must give up `setgroups` before writing a gid map.
    deny_setgroups: bool,
}

impl IdMaps {
    /// Maps for the current user (see the module comment).
    pub(crate) fn for_current_user() -> Result<Self, Failure> {
        if geteuid().is_root() {
            Ok(Self {
                uid_map: identity(&read_proc("/proc/self/uid_map")?),
                gid_map: identity(&read_proc("/proc/self/gid_map")?),
                deny_setgroups: false,
            })
        } else {
            Ok(Self {
                uid_map: format!("{0} {0} 1\n", geteuid()),
                gid_map: format!("{0} {0} 1\n", getegid()),
                deny_setgroups: true,
            })
        }
    }
}

/// Unshares the user, network and PID namespaces (the PID one takes effect for the next
/// child), and a mount namespace when `mounts` is set (capture mounts its resolver's files),
/// and has the id maps written.
///
/// The maps are written by a helper forked beforehand, which stays in the parent user
/// namespace: only a writer there may map more than its own id (root's identity map), and an
/// unprivileged one may map its own. Must be called single-threaded.
pub(crate) fn enter(maps: &IdMaps, mounts: bool) -> Result<(), Failure> {
    let setup = |what: &str, e: nix::Error| Failure::Setup(format!("{what}: {e}"));
    // The helper can open our /proc/PID files only while we are dumpable (the launcher made
    // itself non-dumpable before forking us); nothing untrusted runs yet.
    prctl::set_dumpable(true).map_err(|e| setup("prctl(PR_SET_DUMPABLE)", e))?;
    let (go, go_writer) = pipe2(OFlag::O_CLOEXEC).map_err(|e| setup("creating a pipe", e))?;
    let target = getpid();
    let helper = match fork_single_threaded().map_err(|e| setup("forking", e))? {
        ForkResult::Child => {
            drop(go_writer);
            std::process::exit(map_helper(File::from(go), target, maps))
        }
        ForkResult::Parent { child } => child,
    };
    drop(go);
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWPID;
    if mounts {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    let unshared = unshare(flags);
    // One byte tells the helper to write the maps; closing without it tells it to give up.
    let mut go_writer = File::from(go_writer);
    let poked = unshared.is_ok() && go_writer.write_all(b"m").is_ok();
    drop(go_writer);
    let helped = waitpid(helper, None);
    unshared.map_err(|e| {
        Failure::Isolation(format!(
            "unshare(user, network, PID{} namespaces) failed: {e}",
            if mounts { " and mount" } else { "" }
        ))
    })?;
    match helped {
        Ok(WaitStatus::Exited(_, 0)) if poked => {}
        Ok(WaitStatus::Exited(_, errno)) if errno != 0 => {
            return Err(Failure::Isolation(format!(
                "writing the new user namespace's id maps failed: {}",
                Errno::from_raw(errno)
            )));
        }
        other => {
            return Err(Failure::Setup(format!(
                "the id map helper ended: {other:?}"
            )));
        }
    }
    prctl::set_dumpable(false).map_err(|e| setup("prctl(PR_SET_DUMPABLE)", e))
}

/// The helper's whole life: wait for the go byte, write `target`'s maps, exit with 0 or the
/// errno of the failed write.
fn map_helper(mut go: File, target: Pid, maps: &IdMaps) -> i32 {
    let mut byte = [0u8; 1];
    if !matches!(go.read(&mut byte), Ok(1)) {
        return 0;
    }
    let proc = format!("/proc/{target}");
    let result = if maps.deny_setgroups {
        std::fs::write(format!("{proc}/setgroups"), "deny\n")
    } else {
        Ok(())
    }
    .and_then(|()| std::fs::write(format!("{proc}/uid_map"), &maps.uid_map))
    .and_then(|()| std::fs::write(format!("{proc}/gid_map"), &maps.gid_map));
    match result {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(Errno::EIO as i32),
    }
}

/// Turns each `inside outside count` line of a parent map into `inside inside count`: the ids
/// of the current namespace, unchanged, in the new one.
fn identity(parent_map: &str) -> String {
    parent_map
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let inside = fields.next()?;
            let count = fields.nth(1)?;
            Some(format!("{inside} {inside} {count}\n"))
        })
        .collect()
}

fn read_proc(path: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| Failure::Isolation(format!("reading {path} failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_keeps_every_range_of_the_parent_map() {
        let parent = "         0          0 4294967295\n";
        assert_eq!(identity(parent), "0 0 4294967295\n");
        let nested = "0 100000 65536\n65536 1000 1\n";
        assert_eq!(identity(nested), "0 0 65536\n65536 65536 1\n");
    }

    #[test]
    fn a_test_harness_is_threaded_so_it_is_refused() {
        let worker =
            std::thread::spawn(|| std::thread::park_timeout(std::time::Duration::from_secs(5)));
        let refused =
            matches!(ensure_single_threaded(), Err(SandboxError::NotSingleThreaded(n)) if n > 1);
        worker.thread().unpark();
        let _ = worker.join();
        assert!(refused);
    }
}
