//! The suite's raw log: one timestamped line per measurement, on stderr and in `--raw`.

use std::io::Write as _;

use crate::work::{Idle, Meas, Target};

/// Where the lines go besides stderr.
pub struct Raw(Option<std::fs::File>);

impl Raw {
    /// Creates (truncates) the `--raw` file, if one is given.
    pub fn create(path: Option<&std::path::Path>) -> std::io::Result<Self> {
        Ok(Self(path.map(std::fs::File::create).transpose()?))
    }

    /// One line, prefixed with the UTC time of day.
    pub fn line(&mut self, line: &str) {
        let line = format!("{} {line}", utc_hms());
        eprintln!("{line}");
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "{line}");
        }
    }
}

fn utc_hms() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{:02}:{:02}:{:02}Z",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

/// ` first_problem="…"` when there was one.
fn problem(p: Option<&String>) -> String {
    p.map_or(String::new(), |p| format!(" first_problem={p:?}"))
}

/// A request or bulk measurement, every counter of it.
pub fn describe(w: u8, target: &str, rep: usize, m: &Meas) -> String {
    format!(
        "w{w} {target} rep{rep}: ok={} bad_status={} errors={} conns={} stale_retries={} elapsed={:.2}s rate={:.0}/s mib_s={:.0} p50={:.3}ms p99={:.3}ms cpu_s={} cpu_us_req={}{}",
        m.ok,
        m.bad_status,
        m.errors,
        m.conns,
        m.stale_retries,
        m.elapsed,
        m.rate(),
        m.mib_per_s(),
        m.pct_ms(0.5).unwrap_or(0.0),
        m.pct_ms(0.99).unwrap_or(0.0),
        m.cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
        m.cpu_us_per_req().map_or("-".into(), |c| format!("{c:.1}")),
        problem(m.first_problem.as_ref()),
    )
}

/// An idle-tunnel run of `n` tunnels over `turns` credentials (none: one).
pub fn describe_idle(t: &Target, n: usize, turns: usize, r: &Idle) -> String {
    format!(
        "w7 {} idle={n} turns={}: opened={} open_secs={:.2} rss_before={}KiB rss_after={}KiB per_tunnel={:.2}KiB alive={}/{}{}",
        t.name,
        turns.max(1),
        r.opened,
        r.open_secs,
        r.rss_before_kib,
        r.rss_after_kib,
        r.per_tunnel_kib(),
        r.alive,
        r.checked,
        problem(r.first_problem.as_ref()),
    )
}
