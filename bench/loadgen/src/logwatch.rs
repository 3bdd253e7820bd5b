//! Following egressgate's log while the suite runs: how many WARN and ERROR lines it gained
//! since the last look, so a warning under load is tied to the measurement that caused it.

use std::io::{Read as _, Seek as _};
use std::path::PathBuf;

/// Follows a growing log file and counts new WARN / ERROR lines.
pub struct LogWatch {
    path: PathBuf,
    offset: u64,
}

/// What the log gained since the last look.
pub struct Gained {
    pub warn: u64,
    pub err: u64,
    /// The first WARN or ERROR line, without its timestamp.
    pub first: String,
}

impl LogWatch {
    /// Starts at the log's current end: what was logged before the suite is not counted.
    pub fn new(path: PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Self { path, offset }
    }

    /// Warnings, errors and the first such line since the last call.
    pub fn take(&mut self) -> Gained {
        let mut out = Gained {
            warn: 0,
            err: 0,
            first: String::new(),
        };
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return out;
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return out;
        }
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        // Only whole lines; a partial last line is read next time.
        let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.offset += end as u64;
        for line in String::from_utf8_lossy(&buf[..end]).lines() {
            let w = line.contains(" WARN ");
            let e = line.contains(" ERROR ");
            out.warn += u64::from(w);
            out.err += u64::from(e);
            if (w || e) && out.first.is_empty() {
                out.first = line
                    .split_once(' ')
                    .map_or(line, |(_, rest)| rest)
                    .trim()
                    .to_owned();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_whole_new_lines() {
        let path =
            std::env::temp_dir().join(format!("loadgen-logwatch-{}.log", std::process::id()));
        std::fs::write(&path, "t0  WARN before the suite\n").unwrap();
        let mut watch = LogWatch::new(path.clone());
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write as _;
        write!(
            log,
            "t1  INFO fine\nt2  WARN relay: slow\nt3 ERROR store: gone\nt4  WARN half"
        )
        .unwrap();
        let g = watch.take();
        assert_eq!(
            (g.warn, g.err, g.first.as_str()),
            (1, 1, "WARN relay: slow")
        );
        writeln!(log, " a line").unwrap();
        let g = watch.take();
        assert_eq!(
            (g.warn, g.err, g.first.as_str()),
            (1, 0, "WARN half a line")
        );
        let g = watch.take();
        assert_eq!((g.warn, g.err, g.first.as_str()), (0, 0, ""));
        let _ = std::fs::remove_file(&path);
    }
}
