//! Carries a setup failure from the inside half back to the launcher over a pipe, so the
//! launcher can print it as its one error line. Silence (every write end closed) means the
//! command was started.

use std::fs::File;
use std::io::{Read, Write};

use nix::fcntl::OFlag;
use nix::unistd::pipe2;

use crate::error::SandboxError;

/// A failure of the inside half before the command started.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A namespace step the kernel refused: isolation is impossible here.
    Isolation(String),
    /// Capture could not be set up (the kernel refused the ruleset, say); nothing was
    /// changed yet, so `--capture auto` may go on without it.
    Capture(String),
    /// Any other setup step.
    Setup(String),
}

impl From<Failure> for SandboxError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Isolation(m) => SandboxError::IsolationUnavailable(m),
            Failure::Capture(m) => SandboxError::CaptureUnavailable(m),
            Failure::Setup(m) => SandboxError::InsideSetup(m),
        }
    }
}

/// The launcher's end: learns whether setup inside succeeded.
pub(crate) struct Reader(File);

/// The inside half's end (close-on-exec, so the command never holds it).
pub(crate) struct Writer(File);

/// Opens the report pipe; both ends are close-on-exec.
pub(crate) fn channel() -> Result<(Reader, Writer), SandboxError> {
    let (read, write) =
        pipe2(OFlag::O_CLOEXEC).map_err(|e| SandboxError::setup("creating a pipe", e))?;
    Ok((Reader(File::from(read)), Writer(File::from(write))))
}

/// Upper bound on a report, so a confused writer cannot make the launcher buffer without end.
const MAX_REPORT: u64 = 4096;

impl Writer {
    /// Sends `failure` to the launcher. Best effort: if the launcher is gone, nobody reads it.
    pub(crate) fn fail(mut self, failure: &Failure) {
        let (tag, message) = match failure {
            Failure::Isolation(m) => ('I', m),
            Failure::Capture(m) => ('C', m),
            Failure::Setup(m) => ('S', m),
        };
        let _ = write!(self.0, "{tag}{}", message.replace(['\n', '\r'], " "));
    }
}

impl Reader {
    /// Blocks until every copy of the write end is closed; `Ok` if none reported a failure.
    pub(crate) fn wait(self) -> Result<(), Failure> {
        let mut report = Vec::new();
        if let Err(e) = self.0.take(MAX_REPORT).read_to_end(&mut report) {
            return Err(Failure::Setup(format!("reading the setup report: {e}")));
        }
        let report = String::from_utf8_lossy(&report);
        let mut chars = report.chars();
        match chars.next() {
            None => Ok(()),
            Some('I') => Err(Failure::Isolation(chars.as_str().to_owned())),
            Some('C') => Err(Failure::Capture(chars.as_str().to_owned())),
            Some(_) => Err(Failure::Setup(chars.as_str().to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_success_and_a_failure_arrives_on_one_line() -> Result<(), SandboxError> {
        let (reader, writer) = channel()?;
        drop(writer);
        assert_eq!(reader.wait(), Ok(()));

        let (reader, writer) = channel()?;
        writer.fail(&Failure::Isolation("unshare failed:\nEPERM".into()));
        assert_eq!(
            reader.wait(),
            Err(Failure::Isolation("unshare failed: EPERM".into()))
        );

        let (reader, writer) = channel()?;
        writer.fail(&Failure::Capture("nft refused".into()));
        assert_eq!(reader.wait(), Err(Failure::Capture("nft refused".into())));

        let (reader, writer) = channel()?;
        writer.fail(&Failure::Setup("bind failed".into()));
        assert_eq!(reader.wait(), Err(Failure::Setup("bind failed".into())));
        Ok(())
    }
}
