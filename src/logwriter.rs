//! Where log lines go: standard error, each line written whole. A runtime worker, once it has
//! parked for the first time, appends its lines to a buffer of its own and writes it when it
//! next runs out of work (tokio's park hook), when the buffer passes [`BATCH`] bytes, or when
//! its oldest line is [`HOLD`] old. Under load many decision lines then share one `write(2)`,
//! nothing crosses threads and no lock is taken; a quiet process writes each line as soon as
//! the worker that logged it goes idle, which is at once. Any other thread (the blocking pool,
//! start-up and shut-down) writes straight through.

use std::cell::RefCell;
use std::io::{self, Write as _};
use std::time::{Duration, Instant};

/// A worker's buffer is written once it holds this much.
const BATCH: usize = 32 * 1024;

/// Nor is a line held longer than this (a worker busy for a long stretch).
const HOLD: Duration = Duration::from_millis(50);

/// One worker's unwritten lines.
struct Batch {
    buf: Vec<u8>,
    oldest: Option<Instant>,
}

impl Batch {
    fn write_out(&mut self) {
        if !self.buf.is_empty() {
            let _ = io::stderr().lock().write_all(&self.buf);
            self.buf.clear();
        }
        self.oldest = None;
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.write_out();
    }
}

thread_local! {
    static LINES: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// The runtime's park hook: writes what this worker holds, and from now on lets it hold
/// lines (only workers park, so only they ever hold any).
pub fn on_park() {
    let _ = LINES.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            match l.as_mut() {
                Some(batch) => batch.write_out(),
                None => {
                    *l = Some(Batch {
                        buf: Vec::with_capacity(BATCH),
                        oldest: None,
                    });
                }
            }
        }
    });
}

/// The runtime's thread-stop hook: writes what the thread holds.
pub fn on_stop() {
    let _ = LINES.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && let Some(batch) = l.as_mut()
        {
            batch.write_out();
        }
    });
}

/// The subscriber's writer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}

impl io::Write for Stderr {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let held = LINES
            .try_with(|l| {
                let Ok(mut l) = l.try_borrow_mut() else {
                    return false;
                };
                let Some(batch) = l.as_mut() else {
                    return false;
                };
                batch.buf.extend_from_slice(line);
                let oldest = *batch.oldest.get_or_insert_with(Instant::now);
                if batch.buf.len() >= BATCH || oldest.elapsed() >= HOLD {
                    batch.write_out();
                }
                true
            })
            .unwrap_or(false);
        if !held {
            io::stderr().lock().write_all(line)?;
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Before its first park a thread holds nothing; after it, lines wait for the next park.
    #[test]
    fn only_a_parked_worker_holds_lines() {
        let held = || LINES.with_borrow(|l| l.as_ref().map(|b| b.buf.len()));
        let mut w = Stderr;
        assert!(w.write_all(b"straight through\n").is_ok());
        assert_eq!(held(), None);
        on_park();
        assert!(w.write_all(b"held\n").is_ok());
        assert_eq!(held(), Some(5));
        on_park();
        assert_eq!(held(), Some(0));
        assert!(w.write_all(&[b'x'; BATCH]).is_ok());
        assert_eq!(held(), Some(0), "a full buffer is written at once");
    }
}
