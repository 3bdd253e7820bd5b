//! The checks beside the tables: idle-tunnel memory, the refusal count against what was
//! recorded, what egressgate logged, and the list of everything that failed.

use std::fmt::Write as _;

use super::fmt::{fixed2, group, mib, num};
use crate::results::Results;
use crate::work::Meas;

/// A refusal repetition in which every 403 received was recorded, and nothing else went wrong.
pub fn refusals_held(m: &Meas, recorded: &Result<u64, String>) -> bool {
    recorded_all(m, recorded) && !m.failed()
}

fn recorded_all(m: &Meas, recorded: &Result<u64, String>) -> bool {
    matches!(recorded, Ok(n) if *n == m.ok)
}

/// Every failed cell, idle run and refusal repetition, in report order.
pub fn failures(res: &Results) -> Vec<String> {
    let mut out = Vec::new();
    for (w, t, m) in res.runs.iter().filter(|(_, _, m)| m.failed()) {
        out.push(format!(
            "workload {w}, {t}: {} ok, {} unexpected status, {} errors; first: {}",
            m.ok,
            m.bad_status,
            m.errors,
            m.first_problem.as_deref().unwrap_or("no answer")
        ));
    }
    for (t, r) in res.idle.iter().filter(|(_, r)| r.failed()) {
        out.push(format!(
            "workload 7, {t}: {} of {} tunnels opened, {}/{} checked alive; first: {}",
            r.opened,
            r.wanted,
            r.alive,
            r.checked,
            r.first_problem.as_deref().unwrap_or("-")
        ));
    }
    for (i, (m, recorded)) in res.refusals.iter().enumerate() {
        if !refusals_held(m, recorded) {
            out.push(format!(
                "workload 8, repetition {}: {} 403s, {} other statuses, {} errors, recorded {:?}; first: {}",
                i + 1,
                m.ok,
                m.bad_status,
                m.errors,
                recorded,
                m.first_problem.as_deref().unwrap_or("-")
            ));
        }
    }
    out
}

/// Each proxy's resident memory before and with its idle tunnels open.
pub fn idle_table(s: &mut String, res: &Results) {
    if res.idle.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Idle tunnels: proxy resident memory (VmRSS)\n\n| proxy | tunnels open | RSS before | RSS with tunnels open | per tunnel | tunnels still carrying a GET |\n|---|---:|---:|---:|---:|---:|"
    );
    for (t, r) in &res.idle {
        let _ = writeln!(
            s,
            "| {t} | {} of {}{} | {} | {} | {:.1} KiB | {}/{} |",
            group(r.opened as u64),
            group(r.wanted as u64),
            if r.failed() { " ⚠" } else { "" },
            mib(r.rss_before_kib as f64),
            mib(r.rss_after_kib as f64),
            r.per_tunnel_kib(),
            r.alive,
            r.checked
        );
    }
}

/// One row per refusal repetition: the 403s received against the count recorded.
pub fn refusal_table(s: &mut String, res: &Results) {
    if res.refusals.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Refusals (egressgate; keep-alive GETs to an unapproved host, fresh turn per repetition)\n\n| repetition | 403s received | other answers / errors | refusals/s | CPU µs per refusal | p99 ms | recorded count (GET /v1/turns/{{id}}/refusals) | every refusal recorded |\n|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for (i, (m, recorded)) in res.refusals.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} / {} | {} | {} | {} | {} | {} |",
            i + 1,
            group(m.ok),
            m.bad_status,
            m.errors,
            num(Some(m.rate())),
            num(m.cpu_us_per_req()),
            fixed2(m.pct_ms(0.99)),
            match recorded {
                Ok(n) => group(*n),
                Err(e) => format!("error: {e}"),
            },
            if recorded_all(m, recorded) {
                "yes"
            } else {
                "**no**"
            }
        );
    }
}

/// What egressgate logged at WARN or ERROR, per measurement.
pub fn log_table(s: &mut String, res: &Results) {
    if res.log_findings.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## What egressgate logged at WARN / ERROR, per measurement\n\nCounted in egressgate's log while each measurement ran (and its 0.5 s pause), whichever target was being measured.\n\n| workload | target measured | repetition | WARN | ERROR | first message |\n|---:|---|---:|---:|---:|---|"
    );
    for (w, t, rep, warn, err, first) in &res.log_findings {
        let first = first.replace('|', "\\|");
        let _ = writeln!(
            s,
            "| {w} | {t} | {} | {warn} | {err} | `{first}` |",
            rep + 1
        );
    }
}

/// The processes that died, then every failure.
pub fn problem_list(s: &mut String, res: &Results, failures: &[String]) {
    if failures.is_empty() && res.problems.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Problems\n");
    for p in res.problems.iter().chain(failures) {
        let _ = writeln!(s, "- {p}");
    }
}
