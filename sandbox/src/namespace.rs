//! Moves the inside half into fresh user, network, PID and mount namespaces, and gives the
//! new PID namespace a `/proc` of its own.
//!
//! A user namespace is made even when running as root: the command's capabilities then count
//! only inside it, so it cannot `setns` back into the host's network namespace (through
//! `/proc/1/ns/net`) or otherwise reach outside. Which host ids it maps is the command's
//! [`Identity`]'s business: a root launcher's unprivileged user maps only that user's uid and
//! gid (each to itself, so `id` inside shows the host's numbers); `--as-user root` maps every
//! id the current namespace knows to itself; an unprivileged launcher maps its own uid and gid.

use std::fs::File;
use std::io::{Read, Write};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getegid, geteuid, getpid, pipe2};

use crate::error::SandboxError;
use crate::fork::fork_single_threaded;
use crate::identity::Identity;
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
    /// Maps for the command's identity (see the module comment).
    pub(crate) fn for_identity(who: &Identity) -> Result<Self, Failure> {
        let one = |uid: String, gid: String, deny_setgroups| Self {
            uid_map: format!("{uid} {uid} 1\n"),
            gid_map: format!("{gid} {gid} 1\n"),
            deny_setgroups,
        };
        Ok(match who {
            Identity::Root => Self {
                uid_map: identity(&read_proc("/proc/self/uid_map")?),
                gid_map: identity(&read_proc("/proc/self/gid_map")?),
                deny_setgroups: false,
            },
            // An unprivileged writer must give up setgroups; a root one keeps it, so that init
            // can clear the launcher's supplementary groups before the command starts.
            Identity::User(user) => one(user.uid.to_string(), user.gid.to_string(), false),
            Identity::Caller => one(geteuid().to_string(), getegid().to_string(), true),
        })
    }
}

/// Unshares the user, network, PID and mount namespaces (the PID one takes effect for the
/// next child) and has the id maps written.
///
/// The maps are written by a helper forked beforehand, which stays in the parent user
/// namespace: only a writer there may map more than its own id (root's identity map) or an id
/// other than its own (an unprivileged user's), and an unprivileged one may map its own. Must
/// be called single-threaded.
pub(crate) fn enter(maps: &IdMaps) -> Result<(), Failure> {
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
    let unshared = unshare(
        CloneFlags::CLONE_NEWUSER
            | CloneFlags::CLONE_NEWNET
            | CloneFlags::CLONE_NEWPID
            | CloneFlags::CLONE_NEWNS,
    );
    // One byte tells the helper to write the maps; closing without it tells it to give up.
    let mut go_writer = File::from(go_writer);
    let poked = unshared.is_ok() && go_writer.write_all(b"m").is_ok();
    drop(go_writer);
    let helped = waitpid(helper, None);
    unshared.map_err(|e| {
        Failure::Isolation(format!(
            "unshare(user, network, PID and mount namespaces) failed: {e}"
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

/// In the new PID namespace's first process (init), inside the new mount namespace: makes
/// every mount private to it (nothing mounted here propagates back to the host) and mounts a
/// fresh `/proc`, which shows the new PID namespace's processes only. The host's `/proc`
/// stays underneath; a command that is not root in its user namespace cannot unmount this one.
pub(crate) fn private_mounts_and_proc() -> Result<(), Failure> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| Failure::Setup(format!("making mounts private: {e}")))?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, none).map_err(|e| {
        Failure::Isolation(format!(
            "mounting a /proc for the new PID namespace failed: {e}"
        ))
    })
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
