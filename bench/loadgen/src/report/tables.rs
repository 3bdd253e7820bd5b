//! The measurement tables: throughput, proxy CPU, latency, and connection reuse, one row per
//! workload that ran and one column per target.

use std::fmt::Write as _;

use super::fmt::{fixed2, num, ratio, short, table_head, times};
use super::medians::{EG, Medians, is_bulk, throughput};
use crate::work::Meas;

/// One report row: the workload and its label.
pub type Row = (u8, String);

/// Medians of every target, with egressgate against direct and against the best peer.
pub fn throughput_table(s: &mut String, v: &Medians, rows: &[Row]) {
    let _ = write!(s, "## Throughput (median)\n\n");
    let extra = ["egressgate/direct", "egressgate/best peer"];
    table_head(s, &v.res.targets, &extra);
    for (w, label) in rows.iter().filter(|(w, _)| v.ran(*w)) {
        let _ = write!(s, "| {label} |");
        for t in &v.res.targets {
            let cell = num(v.med(*w, t, |m| Some(throughput(*w, m))));
            let _ = write!(s, " {cell}{} |", v.marked(*w, t));
        }
        let eg = v.med(*w, EG, |m| Some(throughput(*w, m)));
        let direct = v.med(*w, "direct", |m| Some(throughput(*w, m)));
        let best = v.best_peer(*w, &|m| Some(throughput(*w, m)), true);
        let _ = writeln!(
            s,
            " {} | {} |",
            times(ratio(eg, direct)),
            times(ratio(eg, best))
        );
    }
}

/// The proxies' CPU per request (per GiB for the bulk workloads), egressgate against the
/// best peer.
pub fn cpu_table(s: &mut String, v: &Medians, rows: &[Row]) {
    let proxies: Vec<&String> = v.res.targets.iter().filter(|t| *t != "direct").collect();
    let _ = write!(
        s,
        "\n## Proxy CPU per request (µs of user+system time, median)\n\n"
    );
    table_head(s, proxies.iter().copied(), &["egressgate/best peer"]);
    for (w, label) in rows.iter().filter(|(w, _)| !is_bulk(*w) && v.ran(*w)) {
        let _ = write!(s, "| {label} |");
        for t in &proxies {
            let _ = write!(s, " {} |", num(v.med(*w, t, Meas::cpu_us_per_req)));
        }
        let eg = v.med(*w, EG, Meas::cpu_us_per_req);
        let best = v.best_peer(*w, &Meas::cpu_us_per_req, false);
        let _ = writeln!(s, " {} |", times(ratio(eg, best)));
    }
    let cpu_per_gib = |m: &Meas| {
        m.cpu_s
            .filter(|_| m.bytes > 0)
            .map(|c| c / (m.bytes as f64 / 1_073_741_824.0))
    };
    for (w, label) in rows.iter().filter(|(w, _)| is_bulk(*w) && v.ran(*w)) {
        let _ = write!(s, "| {} — CPU seconds per GiB |", short(label));
        for t in &proxies {
            let _ = write!(s, " {} |", fixed2(v.med(*w, t, cpu_per_gib)));
        }
        let eg = v.med(*w, EG, cpu_per_gib);
        let best = v.best_peer(*w, &cpu_per_gib, false);
        let _ = writeln!(s, " {} |", times(ratio(eg, best)));
    }
}

/// p50 and p99 of every target for the request workloads.
pub fn latency_table(s: &mut String, v: &Medians, rows: &[Row]) {
    let _ = write!(
        s,
        "\n## Latency per request, p50 / p99 (ms, median over repetitions)\n\n"
    );
    table_head(s, &v.res.targets, &[]);
    for (w, label) in rows.iter().filter(|(w, _)| !is_bulk(*w) && v.ran(*w)) {
        let _ = write!(s, "| {label} |");
        for t in &v.res.targets {
            let p50 = fixed2(v.med(*w, t, |m| m.pct_ms(0.5)));
            let p99 = fixed2(v.med(*w, t, |m| m.pct_ms(0.99)));
            let _ = write!(s, " {p50} / {p99} |");
        }
        let _ = writeln!(s);
    }
}

/// Requests per client connection in the keep-alive workloads (2 and 4), with the re-sends
/// a silent close forced.
pub fn reuse_table(s: &mut String, v: &Medians, rows: &[Row]) {
    let keep_alive = |w: u8| w == 2 || w == 4;
    if !v.res.runs.iter().any(|(w, _, _)| keep_alive(*w)) {
        return;
    }
    let _ = write!(
        s,
        "\n## Requests per client connection in keep-alive workloads (median)\n\nA proxy that closes a kept-alive connection without `Connection: close` makes the client re-send on a new connection, as HTTP clients do; those re-sends are counted.\n\n"
    );
    table_head(s, &v.res.targets, &[]);
    for (w, label) in rows.iter().filter(|(w, _)| keep_alive(*w)) {
        let _ = write!(s, "| {label} |");
        for t in &v.res.targets {
            let per_conn = v.med(*w, t, |m| {
                (m.conns > 0).then(|| (m.ok + m.bad_status) as f64 / m.conns as f64)
            });
            let stale = v
                .med(*w, t, |m| Some(m.stale_retries as f64))
                .unwrap_or(0.0);
            let note = if stale > 0.0 {
                format!(" ({} re-sent after a silent close)", num(Some(stale)))
            } else {
                String::new()
            };
            let _ = write!(s, " {}{note} |", num(per_conn));
        }
        let _ = writeln!(s);
    }
}
