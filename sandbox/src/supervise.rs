//! Waits for a child while forwarding signals to it, and turns its end into an exit code.

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::signals::{Event, Signals};

/// Which children to reap while waiting.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reap {
    /// Only the supervised child.
    Child,
    /// Every child, as PID 1 of a PID namespace must (orphans are re-parented to it).
    All,
}

/// Forwards signals to `child` until it ends; returns its exit code (128 + signal number
/// when a signal killed it, as shells report).
pub(crate) fn supervise(child: Pid, reap: Reap, signals: &Signals) -> nix::Result<i32> {
    loop {
        if let Some(code) = reap_ended(child, reap)? {
            return Ok(code);
        }
        match signals.next()? {
            Event::Child => {}
            // The child may be gone already; the next SIGCHLD says so.
            Event::Forward(signal) => {
                let _ = kill(child, signal);
            }
        }
    }
}

/// Reaps what has ended without blocking; `Some(code)` once `child` has.
fn reap_ended(child: Pid, reap: Reap) -> nix::Result<Option<i32>> {
    let target = (reap == Reap::Child).then_some(child);
    loop {
        match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(Some(code)),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                return Ok(Some(128 + signal as i32));
            }
            // An orphan reaped, or a report that is not an end: keep going.
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits for `child` without forwarding anything (used once it is known to be ending).
pub(crate) fn reap_blocking(child: Pid) {
    while let Err(Errno::EINTR) = waitpid(child, None) {}
}
