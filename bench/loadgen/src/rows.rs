//! What egressgate's own rows share (`loadgen miss`, `loadgen inspected`): they measure the
//! gate alone, outside `suite`, and print markdown sections that bench/run.sh appends to the
//! report. Here: parsing a process on the command line, the CPU of several process groups
//! over one measurement, and the cells every row writes the same way.

use std::net::SocketAddr;

use crate::proc;
use crate::work::{Meas, Target};

pub use crate::report::num_cell as cell;

/// `ADDR,PID` of a process the load goes to, its address checked to be loopback.
pub fn parse_proc(s: &str) -> Result<(SocketAddr, u32), String> {
    let (addr, pid) = s.split_once(',').ok_or("expected ADDR,PID")?;
    let addr: SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    crate::client::check_loopback(addr).map_err(|e| e.to_string())?;
    let pid = pid.parse().map_err(|e| format!("{pid}: {e}"))?;
    Ok((addr, pid))
}

/// A target whose process is not read (the caller reads the CPU of several itself).
pub fn unmeasured(name: &str) -> Target {
    Target {
        name: name.to_owned(),
        proxy: None,
        pid: None,
        auth: None,
        host: None,
    }
}

/// The machine's cores, as the CPU columns count them.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// CPU seconds of the proxies' trees, the database's tree and this process, at the start.
pub struct Cpu {
    proxies: Vec<u32>,
    db: Option<u32>,
    at_start: [Option<f64>; 3],
}

/// CPU seconds each group used over a measurement of `elapsed` seconds.
pub struct Used {
    pub proxies: Option<f64>,
    pub db: Option<f64>,
    pub me: Option<f64>,
    elapsed: f64,
}

impl Cpu {
    fn read(&self) -> [Option<f64>; 3] {
        let proxies = self
            .proxies
            .iter()
            .map(|p| proc::cpu_seconds(*p))
            .sum::<Option<f64>>();
        [
            proxies,
            self.db.and_then(proc::cpu_seconds),
            proc::cpu_seconds(std::process::id()),
        ]
    }

    /// Reads every group now.
    pub fn start(proxies: &[u32], db: Option<u32>) -> Self {
        let mut c = Self {
            proxies: proxies.to_vec(),
            db,
            at_start: [None; 3],
        };
        c.at_start = c.read();
        c
    }

    /// What each group used since [`Cpu::start`].
    pub fn stop(self, elapsed: f64) -> Used {
        let end = self.read();
        let d = |i: usize| self.at_start[i].zip(end[i]).map(|(a, b)| b - a);
        Used {
            proxies: d(0),
            db: d(1),
            me: d(2),
            elapsed,
        }
    }
}

impl Used {
    /// `proxies / database / load generator` in cores; `no_db` stands for the database's
    /// figure when no database process was read.
    pub fn cores(&self, no_db: &str) -> String {
        let c = |v: Option<f64>| {
            v.filter(|_| self.elapsed > 0.0)
                .map_or("–".to_owned(), |s| format!("{:.2}", s / self.elapsed))
        };
        let db = if self.db.is_some() {
            c(self.db)
        } else {
            no_db.to_owned()
        };
        format!("{} / {db} / {}", c(self.proxies), c(self.me))
    }
}

/// A measurement's p50 and p99 in ms.
pub fn p50_p99(m: &Meas) -> String {
    let f = |p| m.pct_ms(p).map_or("–".to_owned(), |v| format!("{v:.2}"));
    format!("{} / {}", f(0.5), f(0.99))
}

/// CPU microseconds per answer.
pub fn per_req(cpu_s: Option<f64>, m: &Meas) -> String {
    let n = m.ok + m.bad_status;
    cell(cpu_s.filter(|_| n > 0).map(|c| c * 1e6 / n as f64))
}

/// A rate as the report writes figures.
pub fn num(v: f64) -> String {
    cell(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_and_cells() {
        assert_eq!(
            parse_proc("127.0.0.1:3128,42").unwrap(),
            ("127.0.0.1:3128".parse().unwrap(), 42)
        );
        assert!(parse_proc("10.0.0.1:3128,42").is_err());
        assert_eq!(
            parse_proc("127.0.0.1:3128").unwrap_err(),
            "expected ADDR,PID"
        );
        let m = Meas {
            ok: 4,
            lat_us: vec![1000, 2000, 3000, 4000],
            ..Meas::default()
        };
        assert_eq!(p50_p99(&m), "3.00 / 4.00");
        assert_eq!(per_req(Some(0.001), &m), "250");
        assert_eq!(per_req(None, &m), "–");
        let u = Used {
            proxies: Some(1.0),
            db: None,
            me: Some(0.5),
            elapsed: 2.0,
        };
        assert_eq!(u.cores("in the proxy"), "0.50 / in the proxy / 0.25");
    }
}
