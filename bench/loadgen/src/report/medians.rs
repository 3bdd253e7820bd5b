//! Picking figures out of the results: the median over repetitions of one workload and
//! target, the best peer's, and whether a cell had a failed repetition.

use crate::results::Results;
use crate::work::Meas;

/// The proxy under test; every other proxy is a peer.
pub const EG: &str = "egressgate";

/// The median of the finite values (the mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Workloads 5 and 6 move bulk data (MiB/s); the others count requests or tunnels.
pub fn is_bulk(w: u8) -> bool {
    w == 5 || w == 6
}

/// A measurement's throughput in its workload's unit.
pub fn throughput(w: u8, m: &Meas) -> f64 {
    if is_bulk(w) { m.mib_per_s() } else { m.rate() }
}

/// The results, read per workload and target.
pub struct Medians<'a> {
    pub res: &'a Results,
    /// The targets that are neither direct nor egressgate.
    peers: Vec<&'a String>,
}

impl<'a> Medians<'a> {
    pub fn new(res: &'a Results) -> Self {
        let peers = res
            .targets
            .iter()
            .filter(|t| *t != "direct" && *t != EG)
            .collect();
        Self { res, peers }
    }

    /// Every repetition of workload `w` against `target`.
    fn runs(&self, w: u8, target: &str) -> impl Iterator<Item = &'a Meas> {
        self.res
            .runs
            .iter()
            .filter(move |(rw, t, _)| *rw == w && t == target)
            .map(|(_, _, m)| m)
    }

    /// Whether workload `w` ran at all (its rows are left out otherwise).
    pub fn ran(&self, w: u8) -> bool {
        self.res.runs.iter().any(|(rw, _, _)| *rw == w)
    }

    /// The median of `f` over the repetitions of workload `w` against `target`.
    pub fn med(&self, w: u8, target: &str, f: impl Fn(&Meas) -> Option<f64>) -> Option<f64> {
        median(self.runs(w, target).filter_map(f).collect())
    }

    /// The best peer's median of `f`: the highest when `higher`, else the lowest.
    pub fn best_peer(&self, w: u8, f: &dyn Fn(&Meas) -> Option<f64>, higher: bool) -> Option<f64> {
        let vals = self.peers.iter().filter_map(|p| self.med(w, p, f));
        if higher {
            vals.reduce(f64::max)
        } else {
            vals.reduce(f64::min)
        }
    }

    /// ` ⚠` after a cell where a repetition failed.
    pub fn marked(&self, w: u8, target: &str) -> &'static str {
        if self.runs(w, target).any(Meas::failed) {
            " ⚠"
        } else {
            ""
        }
    }
}
