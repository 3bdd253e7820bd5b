//! What one measurement counted, and the one way every workload's clients are timed and
//! summed into it.

use std::time::Instant;

use tokio::task::JoinHandle;

use super::load::Target;
use crate::proc;

/// The result of one measurement.
#[derive(Clone, Debug, Default)]
pub struct Meas {
    /// Answers with the expected status.
    pub ok: u64,
    /// Answers with another status.
    pub bad_status: u64,
    /// I/O errors and timeouts.
    pub errors: u64,
    /// Client connections opened.
    pub conns: u64,
    /// Requests re-sent on a fresh connection because the server had closed a kept-alive one
    /// without saying so.
    pub stale_retries: u64,
    /// Wall-clock seconds from the first client started to the last one done.
    pub elapsed: f64,
    /// Sorted latencies in microseconds.
    pub lat_us: Vec<u32>,
    /// Target process CPU (user + system) during the measurement, seconds.
    pub cpu_s: Option<f64>,
    /// Body bytes received.
    pub bytes: u64,
    /// The first error or unexpected answer, for the report's problem list.
    pub first_problem: Option<String>,
}

impl Meas {
    /// Expected answers per second: the throughput of request workloads.
    pub fn rate(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.ok as f64 / self.elapsed
        } else {
            0.0
        }
    }
    /// Body MiB per second: the throughput of bulk workloads.
    pub fn mib_per_s(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.bytes as f64 / 1_048_576.0 / self.elapsed
        } else {
            0.0
        }
    }
    /// The `p` quantile of the latencies, in milliseconds (none without answers).
    pub fn pct_ms(&self, p: f64) -> Option<f64> {
        if self.lat_us.is_empty() {
            return None;
        }
        let idx = ((self.lat_us.len() as f64 - 1.0) * p).round() as usize;
        Some(f64::from(self.lat_us[idx]) / 1000.0)
    }
    /// The target's CPU microseconds per answer (none without a process or answers).
    pub fn cpu_us_per_req(&self) -> Option<f64> {
        let n = self.ok + self.bad_status;
        self.cpu_s.filter(|_| n > 0).map(|c| c * 1e6 / n as f64)
    }
    /// True when something went wrong (errors or unexpected statuses).
    pub fn failed(&self) -> bool {
        self.errors > 0 || self.bad_status > 0 || self.ok == 0
    }
    /// Keeps the first thing that went wrong; later ones are counted, not kept.
    pub fn problem(&mut self, p: String) {
        self.first_problem.get_or_insert(p);
    }
    /// Adds one client's counts (its `elapsed` and `cpu_s` are not its own: the measurement
    /// times all clients together).
    fn merge(&mut self, o: Meas) {
        self.ok += o.ok;
        self.bad_status += o.bad_status;
        self.errors += o.errors;
        self.conns += o.conns;
        self.stale_retries += o.stale_retries;
        self.bytes += o.bytes;
        self.lat_us.extend(o.lat_us);
        if self.first_problem.is_none() {
            self.first_problem = o.first_problem;
        }
    }
}

/// Times the clients `spawn` starts (it is given the start, for deadlines) against the
/// target's CPU, waits for them all and sums what each counted; latencies come out sorted.
pub async fn measured(t: &Target, spawn: impl FnOnce(Instant) -> Vec<JoinHandle<Meas>>) -> Meas {
    let cpu0 = t.pid.and_then(proc::cpu_seconds);
    let start = Instant::now();
    let handles = spawn(start);
    let mut m = Meas::default();
    for h in handles {
        match h.await {
            Ok(client) => m.merge(client),
            Err(e) => {
                m.errors += 1;
                m.problem(format!("worker panicked: {e}"));
            }
        }
    }
    m.elapsed = start.elapsed().as_secs_f64();
    let cpu1 = t.pid.and_then(proc::cpu_seconds);
    m.cpu_s = cpu0.zip(cpu1).map(|(a, b)| b - a);
    m.lat_us.sort_unstable();
    m
}
