//! The idle workload: many open tunnels that carry nothing, and what they cost the proxy in
//! resident memory; a few are checked to still reach the origin afterwards.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::{get_request, open};
use super::load::{Kind, Load, REQUEST_TIMEOUT, Target};
use crate::proc;

/// Idle tunnels and the proxy's memory.
#[derive(Clone, Debug, Default)]
pub struct Idle {
    /// Tunnels asked for.
    pub wanted: usize,
    /// Tunnels the proxy established.
    pub opened: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    /// Tunnels a GET was tried in after the RSS sample, and how many answered 200.
    pub checked: usize,
    pub alive: usize,
    /// Seconds it took to open them all.
    pub open_secs: f64,
    /// The first tunnel that failed to open or to answer, for the report's problem list.
    pub first_problem: Option<String>,
}

impl Idle {
    /// What one more idle tunnel costs the proxy, from the RSS growth.
    pub fn per_tunnel_kib(&self) -> f64 {
        if self.opened == 0 {
            return 0.0;
        }
        (self.rss_after_kib as f64 - self.rss_before_kib as f64) / self.opened as f64
    }
    /// RSS extrapolated linearly to `n` tunnels.
    pub fn rss_at_kib(&self, n: usize) -> f64 {
        self.rss_before_kib as f64 + self.per_tunnel_kib() * n as f64
    }
    /// True when a tunnel could not be opened or no longer carried a GET.
    pub fn failed(&self) -> bool {
        self.opened < self.wanted || self.alive < self.checked
    }
}

/// Opens `n` tunnels (64 at a time), lets them settle, samples the proxy's RSS, checks that
/// a few of them still carry a GET, then closes them all. With `auths`, tunnel `i` uses
/// credential `i % auths.len()`: the tunnels are spread over many turns, as real sandboxes
/// are (one turn may hold at most `max-connections-per-turn`).
pub async fn idle(t: &Target, load: &Load, n: usize, settle: Duration, auths: &[String]) -> Idle {
    let Some(pid) = t.pid else {
        return Idle::default();
    };
    let mut out = Idle {
        wanted: n,
        rss_before_kib: proc::rss_kib(pid).unwrap_or(0),
        ..Idle::default()
    };
    let sem = Arc::new(tokio::sync::Semaphore::new(64));
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (mut t, load, sem) = (t.clone(), load.clone(), sem.clone());
            if !auths.is_empty() {
                t.auth = Some(auths[i % auths.len()].clone());
            }
            tokio::spawn(async move {
                let _permit = sem.acquire_owned().await;
                tokio::time::timeout(REQUEST_TIMEOUT, open(&t, Kind::TunKeep, &load))
                    .await
                    .unwrap_or_else(|_| Err(io::Error::other("CONNECT timed out")))
            })
        })
        .collect();
    let mut tunnels = Vec::with_capacity(n);
    for h in handles {
        match h.await {
            Ok(Ok(c)) => tunnels.push(c),
            Ok(Err(e)) => {
                out.first_problem.get_or_insert(e.to_string());
            }
            Err(e) => {
                out.first_problem.get_or_insert(e.to_string());
            }
        }
    }
    out.open_secs = start.elapsed().as_secs_f64();
    out.opened = tunnels.len();
    tokio::time::sleep(settle).await;
    out.rss_after_kib = proc::rss_kib(pid).unwrap_or(0);
    // A few tunnels, spread over the set, must still reach the origin.
    let step = (tunnels.len() / 20).max(1);
    let req = get_request(t, Kind::TunKeep, load, "/small", false);
    for c in tunnels.iter_mut().step_by(step).take(20) {
        out.checked += 1;
        let r = tokio::time::timeout(REQUEST_TIMEOUT, c.exchange(&req)).await;
        match r {
            Ok(Ok((h, _))) if h.status == 200 => out.alive += 1,
            Ok(Ok((h, _))) => {
                out.first_problem
                    .get_or_insert(format!("GET in idle tunnel answered {}", h.status));
            }
            Ok(Err(e)) => {
                out.first_problem
                    .get_or_insert(format!("GET in idle tunnel failed: {e}"));
            }
            Err(_) => {
                out.first_problem
                    .get_or_insert("GET in idle tunnel timed out".to_owned());
            }
        }
    }
    drop(tunnels);
    out
}
