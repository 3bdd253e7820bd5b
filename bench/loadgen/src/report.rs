//! The markdown report: medians per workload and target, CPU per request, latency, idle
//! tunnel memory, the refusal check, and the targets next to what was measured.

use std::fmt::Write as _;

use crate::cli::SuiteArgs;
use crate::results::Results;
use crate::work::{Meas, REQUEST_WORKLOADS};

const EG: &str = "egressgate";

fn median(mut v: Vec<f64>) -> Option<f64> {
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

fn runs<'a>(res: &'a Results, w: u8, target: &str) -> Vec<&'a Meas> {
    res.runs
        .iter()
        .filter(|(rw, t, _)| *rw == w && t == target)
        .map(|(_, _, m)| m)
        .collect()
}

fn med(res: &Results, w: u8, target: &str, f: impl Fn(&Meas) -> Option<f64>) -> Option<f64> {
    median(runs(res, w, target).into_iter().filter_map(f).collect())
}

/// Workloads 5 and 6 move bulk data (MiB/s); the others count requests or tunnels.
fn is_bulk(w: u8) -> bool {
    w == 5 || w == 6
}

fn throughput(w: u8, m: &Meas) -> f64 {
    if is_bulk(w) { m.mib_per_s() } else { m.rate() }
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x >= 100.0 => group(x.round() as u64),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn times(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}×"))
}

fn mib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

/// Renders the report; the flag is false when any measurement failed.
pub fn render(args: &SuiteArgs, res: &Results) -> (String, bool) {
    let mut s = String::new();
    let mut ok = res.problems.is_empty();
    let peers: Vec<&String> = res
        .targets
        .iter()
        .filter(|t| *t != "direct" && *t != EG)
        .collect();
    let has_eg = res.targets.iter().any(|t| t == EG);
    let best_peer = |w: u8, f: &dyn Fn(&Meas) -> Option<f64>, higher: bool| -> Option<f64> {
        let vals: Vec<f64> = peers.iter().filter_map(|p| med(res, w, p, f)).collect();
        if higher {
            vals.into_iter().reduce(f64::max)
        } else {
            vals.into_iter().reduce(f64::min)
        }
    };
    let mut failed_cells = Vec::new();
    for (w, t, m) in &res.runs {
        if m.failed() {
            ok = false;
            failed_cells.push(format!(
                "workload {w}, {t}: {} ok, {} unexpected status, {} errors; first: {}",
                m.ok,
                m.bad_status,
                m.errors,
                m.first_problem.as_deref().unwrap_or("no answer")
            ));
        }
    }
    let marked = |w: u8, t: &str| {
        if runs(res, w, t).iter().any(|m| m.failed()) {
            " ⚠"
        } else {
            ""
        }
    };

    let _ = writeln!(s, "# egressgate benchmark\n");
    if !args.note.is_empty() {
        let _ = writeln!(s, "{}\n", args.note);
    }
    let _ = writeln!(
        s,
        "Parameters: {} client connections, {} s per request measurement, {} repetitions (medians shown), \
         bulk {} MiB per stream ({} streams in workload 6), idle tunnels {} per proxy and {} for egressgate. \
         All traffic on 127.0.0.1. ⚠ marks a cell where a repetition had errors (listed at the end).\n",
        args.conns,
        args.duration,
        args.reps,
        args.bulk_mib,
        args.bulk_streams,
        args.idle,
        args.idle_egressgate
    );

    // Throughput.
    let _ = write!(s, "## Throughput (median)\n\n| workload |");
    for t in &res.targets {
        let _ = write!(s, " {t} |");
    }
    let _ = writeln!(s, " egressgate/direct | egressgate/best peer |");
    let _ = write!(s, "|---|");
    for _ in &res.targets {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s, "---:|---:|");
    let mut rows: Vec<(u8, String)> = REQUEST_WORKLOADS
        .iter()
        .map(|(w, _, l)| (*w, (*l).to_owned()))
        .collect();
    rows.push((
        5,
        format!(
            "5. one bulk download, {} MiB, through a tunnel (MiB/s)",
            args.bulk_mib
        ),
    ));
    rows.push((
        6,
        format!(
            "6. {} parallel bulk downloads, {} MiB each (MiB/s, total)",
            args.bulk_streams, args.bulk_mib
        ),
    ));
    for (w, label) in &rows {
        if !res.runs.iter().any(|(rw, _, _)| rw == w) {
            continue;
        }
        let _ = write!(s, "| {label} |");
        for t in &res.targets {
            let _ = write!(
                s,
                " {}{} |",
                num(med(res, *w, t, |m| Some(throughput(*w, m)))),
                marked(*w, t)
            );
        }
        let eg = med(res, *w, EG, |m| Some(throughput(*w, m)));
        let direct = med(res, *w, "direct", |m| Some(throughput(*w, m)));
        let best = best_peer(*w, &|m| Some(throughput(*w, m)), true);
        let _ = writeln!(
            s,
            " {} | {} |",
            times(ratio(eg, direct)),
            times(ratio(eg, best))
        );
    }

    // CPU.
    let _ = write!(
        s,
        "\n## Proxy CPU per request (µs of user+system time, median)\n\n| workload |"
    );
    for t in res.targets.iter().filter(|t| *t != "direct") {
        let _ = write!(s, " {t} |");
    }
    let _ = writeln!(s, " egressgate/best peer |");
    let _ = write!(s, "|---|");
    for _ in res.targets.iter().filter(|t| *t != "direct") {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s, "---:|");
    for (w, label) in rows.iter().filter(|(w, _)| !is_bulk(*w)) {
        if !res.runs.iter().any(|(rw, _, _)| rw == w) {
            continue;
        }
        let _ = write!(s, "| {label} |");
        for t in res.targets.iter().filter(|t| *t != "direct") {
            let _ = write!(s, " {} |", num(med(res, *w, t, Meas::cpu_us_per_req)));
        }
        let eg = med(res, *w, EG, Meas::cpu_us_per_req);
        let _ = writeln!(
            s,
            " {} |",
            times(ratio(eg, best_peer(*w, &Meas::cpu_us_per_req, false)))
        );
    }
    let cpu_per_gib = |m: &Meas| {
        m.cpu_s
            .filter(|_| m.bytes > 0)
            .map(|c| c / (m.bytes as f64 / 1_073_741_824.0))
    };
    for (w, label) in rows.iter().filter(|(w, _)| is_bulk(*w)) {
        if !res.runs.iter().any(|(rw, _, _)| rw == w) {
            continue;
        }
        let _ = write!(
            s,
            "| {} — CPU seconds per GiB |",
            label.split(" (").next().unwrap_or(label)
        );
        for t in res.targets.iter().filter(|t| *t != "direct") {
            let _ = write!(
                s,
                " {} |",
                med(res, *w, t, cpu_per_gib).map_or("–".into(), |v| format!("{v:.2}"))
            );
        }
        let eg = med(res, *w, EG, cpu_per_gib);
        let _ = writeln!(
            s,
            " {} |",
            times(ratio(eg, best_peer(*w, &cpu_per_gib, false)))
        );
    }

    // Latency.
    let _ = write!(
        s,
        "\n## Latency per request, p50 / p99 (ms, median over repetitions)\n\n| workload |"
    );
    for t in &res.targets {
        let _ = write!(s, " {t} |");
    }
    let _ = writeln!(s);
    let _ = write!(s, "|---|");
    for _ in &res.targets {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s);
    for (w, label) in rows.iter().filter(|(w, _)| !is_bulk(*w)) {
        if !res.runs.iter().any(|(rw, _, _)| rw == w) {
            continue;
        }
        let _ = write!(s, "| {label} |");
        for t in &res.targets {
            let p50 = med(res, *w, t, |m| m.pct_ms(0.5));
            let p99 = med(res, *w, t, |m| m.pct_ms(0.99));
            let _ = write!(
                s,
                " {} / {} |",
                p50.map_or("–".into(), |v| format!("{v:.2}")),
                p99.map_or("–".into(), |v| format!("{v:.2}"))
            );
        }
        let _ = writeln!(s);
    }

    // Connection reuse.
    if res.runs.iter().any(|(w, _, _)| *w == 2 || *w == 4) {
        let _ = write!(
            s,
            "\n## Requests per client connection in keep-alive workloads (median)\n\nA proxy that closes a kept-alive connection without `Connection: close` makes the client re-send on a new connection, as HTTP clients do; those re-sends are counted.\n\n| workload |"
        );
        for t in &res.targets {
            let _ = write!(s, " {t} |");
        }
        let _ = writeln!(s);
        let _ = write!(s, "|---|");
        for _ in &res.targets {
            let _ = write!(s, "---:|");
        }
        let _ = writeln!(s);
        for (w, label) in rows.iter().filter(|(w, _)| *w == 2 || *w == 4) {
            let _ = write!(s, "| {label} |");
            for t in &res.targets {
                let v = med(res, *w, t, |m| {
                    (m.conns > 0).then(|| (m.ok + m.bad_status) as f64 / m.conns as f64)
                });
                let stale = med(res, *w, t, |m| Some(m.stale_retries as f64)).unwrap_or(0.0);
                let note = if stale > 0.0 {
                    format!(" ({} re-sent after a silent close)", num(Some(stale)))
                } else {
                    String::new()
                };
                let _ = write!(s, " {}{note} |", num(v));
            }
            let _ = writeln!(s);
        }
    }

    // Idle tunnels.
    let mut idle_eg_big = None;
    if !res.idle.is_empty() {
        let _ = writeln!(
            s,
            "\n## Idle tunnels: proxy resident memory (VmRSS)\n\n| proxy | tunnels open | RSS before | RSS with tunnels open | per tunnel | tunnels still carrying a GET |\n|---|---:|---:|---:|---:|---:|"
        );
        for (t, r) in &res.idle {
            if r.failed() {
                ok = false;
                failed_cells.push(format!(
                    "workload 7, {t}: {} of {} tunnels opened, {}/{} checked alive; first: {}",
                    r.opened,
                    r.wanted,
                    r.alive,
                    r.checked,
                    r.first_problem.as_deref().unwrap_or("-")
                ));
            }
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
            if t == EG && r.wanted == args.idle_egressgate {
                idle_eg_big = Some(r.clone());
            }
        }
    }

    // Refusals.
    let mut refusal_rate = None;
    let mut all_recorded = None;
    if !res.refusals.is_empty() {
        let _ = writeln!(
            s,
            "\n## Refusals (egressgate; keep-alive GETs to an unapproved host, fresh turn per repetition)\n\n| repetition | 403s received | other answers / errors | refusals/s | CPU µs per refusal | p99 ms | recorded count (GET /v1/turns/{{id}}/refusals) | every refusal recorded |\n|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        let mut rates = Vec::new();
        let mut every = true;
        for (i, (m, recorded)) in res.refusals.iter().enumerate() {
            rates.push(m.rate());
            let matches = matches!(recorded, Ok(n) if *n == m.ok);
            if !matches || m.failed() {
                every = false;
                ok = false;
                failed_cells.push(format!(
                    "workload 8, repetition {}: {} 403s, {} other statuses, {} errors, recorded {:?}; first: {}",
                    i + 1,
                    m.ok,
                    m.bad_status,
                    m.errors,
                    recorded,
                    m.first_problem.as_deref().unwrap_or("-")
                ));
            }
            let _ = writeln!(
                s,
                "| {} | {} | {} / {} | {} | {} | {} | {} | {} |",
                i + 1,
                group(m.ok),
                m.bad_status,
                m.errors,
                num(Some(m.rate())),
                num(m.cpu_us_per_req()),
                m.pct_ms(0.99).map_or("–".into(), |v| format!("{v:.2}")),
                match recorded {
                    Ok(n) => group(*n),
                    Err(e) => format!("error: {e}"),
                },
                if matches { "yes" } else { "**no**" }
            );
        }
        refusal_rate = median(rates);
        all_recorded = Some(every);
    }

    // Targets.
    if has_eg {
        let _ = writeln!(
            s,
            "\n## The issue's targets against this run\n\n| target | measured | met |\n|---|---|---|"
        );
        let mut target_row = |name: String, measured: String, met: Option<bool>| {
            let verdict = match met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "–",
            };
            let _ = writeln!(s, "| {name} | {measured} | {verdict} |");
        };
        for (w, what, goal) in [
            (3u8, "new tunnels/s (CONNECT + GET + close)", 1.5),
            (
                9,
                "new TLS tunnels/s (CONNECT + TLS 1.3 + GET + close)",
                1.2,
            ),
            (1, "forwarded req/s (new connections)", 1.5),
            (2, "forwarded req/s (keep-alive)", 1.5),
        ] {
            let r = ratio(
                med(res, w, EG, |m| Some(m.rate())),
                best_peer(w, &|m| Some(m.rate()), true),
            );
            if let Some(r) = r {
                target_row(
                    format!("{what} ≥ {goal}× best peer"),
                    format!("{r:.2}×"),
                    Some(r >= goal),
                );
            }
        }
        if let Some(cpu) = med(res, 3, EG, Meas::cpu_us_per_req) {
            target_row(
                "proxy CPU ≤ 50 µs per tunnel (CONNECT + GET + close)".into(),
                format!("{cpu:.1} µs"),
                Some(cpu <= 50.0),
            );
        }
        for (w, what, goal) in [
            (4u8, "keep-alive GETs in tunnels ≥ 0.6× direct", 0.6),
            (2, "keep-alive forwarding ≥ 0.4× direct", 0.4),
            (5, "one bulk stream ≥ 0.6× direct", 0.6),
        ] {
            if let Some(r) = ratio(
                med(res, w, EG, |m| Some(throughput(w, m))),
                med(res, w, "direct", |m| Some(throughput(w, m))),
            ) {
                target_row(what.into(), format!("{r:.2}×"), Some(r >= goal));
            }
        }
        for (w, _, label) in REQUEST_WORKLOADS {
            if let Some(r) = ratio(
                med(res, w, EG, Meas::cpu_us_per_req),
                best_peer(w, &Meas::cpu_us_per_req, false),
            ) {
                target_row(
                    format!(
                        "CPU per request ≤ 0.5× best peer — {}",
                        label.split(" (").next().unwrap_or(label)
                    ),
                    format!("{r:.2}×"),
                    Some(r <= 0.5),
                );
            }
        }
        for (w, _, label) in REQUEST_WORKLOADS {
            let eg = med(res, w, EG, |m| m.pct_ms(0.99));
            let best = best_peer(w, &|m| m.pct_ms(0.99), false);
            if let (Some(e), Some(b)) = (eg, best) {
                target_row(
                    format!(
                        "p99 no worse than best peer — {}",
                        label.split(" (").next().unwrap_or(label)
                    ),
                    format!("{e:.2} ms vs {b:.2} ms"),
                    Some(e <= b),
                );
            }
        }
        if let Some(r) = &idle_eg_big {
            let at = r.rss_at_kib(10_000);
            let measured = if r.opened >= 10_000 {
                format!(
                    "{} with {} tunnels",
                    mib(r.rss_after_kib as f64),
                    group(r.opened as u64)
                )
            } else {
                format!(
                    "{} with {} tunnels; {} extrapolated to 10,000",
                    mib(r.rss_after_kib as f64),
                    group(r.opened as u64),
                    mib(at)
                )
            };
            target_row(
                "10,000 idle tunnels (over many turns) ≤ 40 MiB RSS".into(),
                measured,
                Some(at <= 40.0 * 1024.0 && !r.failed()),
            );
        }
        if let (Some(rate), Some(every)) = (refusal_rate, all_recorded) {
            target_row(
                "refusals ≥ 10,000/s, every refusal recorded".into(),
                format!(
                    "{}/s, every refusal recorded: {}",
                    num(Some(rate)),
                    if every { "yes" } else { "no" }
                ),
                Some(rate >= 10_000.0 && every),
            );
        }
    }

    if !res.log_findings.is_empty() {
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

    if !failed_cells.is_empty() || !res.problems.is_empty() {
        let _ = writeln!(s, "\n## Problems\n");
        for p in res.problems.iter().chain(failed_cells.iter()) {
            let _ = writeln!(s, "- {p}");
        }
    }
    (s, ok)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::work::Idle;

    fn meas(ok: u64, elapsed: f64, lat_us: &[u32], cpu_s: Option<f64>) -> Meas {
        Meas {
            ok,
            conns: ok / 10 + 1,
            elapsed,
            lat_us: lat_us.to_vec(),
            cpu_s,
            bytes: ok * 100,
            ..Meas::default()
        }
    }

    fn args(extra: &[&str]) -> SuiteArgs {
        let base = ["loadgen", "--origin", "127.0.0.1:1"];
        SuiteArgs::parse_from(base.iter().chain(extra))
    }

    /// Every section with every kind of cell: medians of two repetitions, a failed cell, a
    /// missing CPU figure, silent-close re-sends, idle tunnels over and under the 10,000 mark,
    /// a refusal count that does not match and one that could not be read, a log finding with
    /// a `|` in it, and a process that died.
    fn everything() -> Results {
        let targets = ["direct", "egressgate", "tinyproxy", "squid"];
        let mut res = Results {
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            ..Results::default()
        };
        for (i, t) in targets.iter().enumerate() {
            let cpu = (*t != "direct").then_some(0.4 + i as f64 / 10.0);
            for w in [1u8, 2, 3, 4, 9] {
                for rep in 0..2u64 {
                    let ok = 20_000 + 1_000 * w as u64 + 3_000 * i as u64 + 500 * rep;
                    let lat = [
                        90 + 10 * i as u32,
                        150 + 20 * i as u32,
                        400 + 100 * w as u32 - 30 * i as u32,
                    ];
                    let mut m = meas(ok, 5.0, &lat, cpu);
                    if *t == "tinyproxy" && w == 2 {
                        m.stale_retries = 3 + rep;
                    }
                    if *t == "squid" && w == 3 && rep == 1 {
                        m.bad_status = 2;
                        m.first_problem = Some("status 502 (expected 200)".into());
                    }
                    res.runs.push((w, (*t).to_owned(), m));
                }
            }
            for (w, mib) in [(5u8, 256u64), (6, 2048)] {
                let m = Meas {
                    bytes: mib << 20,
                    ..meas(1, 0.9 + i as f64 / 5.0, &[900_000], cpu)
                };
                res.runs.push((w, (*t).to_owned(), m));
            }
        }
        for (t, wanted, opened, after) in [
            ("egressgate", 500, 500, 11_000),
            ("egressgate", 10_000, 9_000, 40_000),
            ("tinyproxy", 500, 500, 9_000),
            ("squid", 500, 500, 30_000),
        ] {
            res.idle.push((
                t.to_owned(),
                Idle {
                    wanted,
                    opened,
                    rss_before_kib: 8_000,
                    rss_after_kib: after,
                    checked: 20,
                    alive: if opened < wanted { 19 } else { 20 },
                    open_secs: 1.5,
                    first_problem: (opened < wanted).then(|| "Too many open files".to_owned()),
                },
            ));
        }
        res.refusals
            .push((meas(60_000, 5.0, &[50, 60, 700], Some(1.2)), Ok(60_000)));
        res.refusals
            .push((meas(61_000, 5.0, &[55, 65, 800], Some(1.3)), Ok(60_999)));
        res.refusals.push((
            meas(59_000, 5.0, &[52, 62, 750], None),
            Err("connection refused".into()),
        ));
        res.log_findings.push((
            3,
            "squid".into(),
            1,
            2,
            0,
            "WARN relay: origin closed | early".into(),
        ));
        res.problems
            .push("squid (pid 42) is no longer running".into());
        res
    }

    #[test]
    fn the_report_keeps_its_shape() {
        let a = args(&["--note", "A note.", "--idle-egressgate", "10000"]);
        let (text, ok) = render(&a, &everything());
        assert!(
            !ok,
            "a failed cell, a refusal mismatch and a dead process fail the run"
        );
        assert_eq!(
            text,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/testdata/report-full.md"
            ))
        );
    }

    #[test]
    fn a_direct_only_report_has_no_comparisons() {
        let mut res = Results {
            targets: vec!["direct".into()],
            ..Results::default()
        };
        res.runs
            .push((1, "direct".into(), meas(12_345, 1.0, &[80, 90, 300], None)));
        let (text, ok) = render(&args(&["--duration", "1", "--reps", "1"]), &res);
        assert!(ok);
        assert_eq!(
            text,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/testdata/report-direct.md"
            ))
        );
    }
}
