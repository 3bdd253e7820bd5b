//! What one suite run measured, as the report reads it.

use crate::work::{Idle, Meas};

/// Everything measured, for the report.
#[derive(Default)]
pub struct Results {
    pub targets: Vec<String>,
    /// (workload number, target name) → repetitions.
    pub runs: Vec<(u8, String, Meas)>,
    /// Refusal repetitions: measurement, recorded count.
    pub refusals: Vec<(Meas, Result<u64, String>)>,
    /// (target, idle result).
    pub idle: Vec<(String, Idle)>,
    pub problems: Vec<String>,
    /// (workload, target, repetition, warnings, errors, first message) logged by egressgate
    /// during a measurement.
    pub log_findings: Vec<(u8, String, usize, u64, u64, String)>,
}
