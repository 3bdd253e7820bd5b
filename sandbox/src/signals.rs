//! Holds back the signals the launcher forwards and reads them from a signalfd, one at a time.
//!
//! Blocking them (before the first fork, so every half inherits it) means a SIGINT or SIGTERM
//! is never lost or fatal while the launcher is busy; the command starts with the mask the
//! launcher started with (see `command`). A signal that the kernel sent to the whole process group (Ctrl-C, Ctrl-\ at a
//! terminal) already reached the command, which shares the group, so only signals sent by a
//! process (`kill`) are forwarded: the command never gets the same Ctrl-C twice.

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::error::SandboxError;

/// The signals passed on to the command.
const FORWARDED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// What woke the supervisor.
pub(crate) enum Event {
    /// Some child changed state: time to reap.
    Child,
    /// A signal to pass on to the supervised child.
    Forward(Signal),
}

/// The forwarded signals and SIGCHLD, blocked and readable from a close-on-exec signalfd.
///
/// After a fork the child's copy reads the child's own signals, so one `Signals` serves
/// every half. Dropping it (in the launcher) restores the previous signal mask.
pub(crate) struct Signals {
    fd: SignalFd,
    previous: SigSet,
}

impl Signals {
    /// Blocks the signals and opens the signalfd.
    pub(crate) fn hold() -> Result<Self, SandboxError> {
        let mut set = SigSet::empty();
        for signal in FORWARDED {
            set.add(signal);
        }
        set.add(Signal::SIGCHLD);
        let mut previous = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut previous))
            .map_err(|e| SandboxError::setup("blocking signals", e))?;
        match SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC) {
            Ok(fd) => Ok(Self { fd, previous }),
            Err(e) => {
                let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
                Err(SandboxError::setup("opening a signalfd", e))
            }
        }
    }

    /// The signal mask from before [`Signals::hold`], for the command to start with.
    pub(crate) fn original_mask(&self) -> &SigSet {
        &self.previous
    }

    /// Waits for the next event worth acting on.
    pub(crate) fn next(&self) -> nix::Result<Event> {
        loop {
            let Some(info) = self.fd.read_signal()? else {
                continue;
            };
            let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
                continue;
            };
            if signal == Signal::SIGCHLD {
                return Ok(Event::Child);
            }
            // si_code <= 0 means sent by a process (SI_USER, SI_QUEUE, SI_TKILL); positive
            // codes (SI_KERNEL) are the terminal's signals to the whole process group.
            if info.ssi_code <= 0 {
                return Ok(Event::Forward(signal));
            }
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.previous), None);
    }
}
