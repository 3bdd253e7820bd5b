//! The markdown report: medians per workload and target, CPU per request, latency, idle
//! tunnel memory, the refusal check, and the targets next to what was measured.
//! bench/README.md and bench/sweep.sh read it; its shape is pinned by the tests below.

mod checks;
mod fmt;
mod medians;
mod tables;
mod targets;

use std::fmt::Write as _;

use crate::args::SuiteArgs;
use crate::results::Results;
use crate::work::REQUEST_WORKLOADS;

pub use fmt::num as num_cell;
use medians::Medians;
pub use medians::median;
use tables::Row;

/// Renders the report; the flag is false when any measurement failed.
pub fn render(args: &SuiteArgs, res: &Results) -> (String, bool) {
    let failures = checks::failures(res);
    let ok = res.problems.is_empty() && failures.is_empty();
    let v = Medians::new(res);
    let rows = rows(args);
    let mut s = String::new();
    parameters(&mut s, args);
    tables::throughput_table(&mut s, &v, &rows);
    tables::cpu_table(&mut s, &v, &rows);
    tables::latency_table(&mut s, &v, &rows);
    tables::reuse_table(&mut s, &v, &rows);
    checks::idle_table(&mut s, res);
    checks::refusal_table(&mut s, res);
    targets::targets_table(&mut s, args, &v);
    checks::log_table(&mut s, res);
    checks::problem_list(&mut s, res, &failures);
    (s, ok)
}

/// The title, the run's note, and what every measurement was made of.
fn parameters(s: &mut String, args: &SuiteArgs) {
    let _ = writeln!(s, "# egressgate benchmark\n");
    if !args.note.is_empty() {
        let _ = writeln!(s, "{}\n", args.note);
    }
    let _ = writeln!(
        s,
        "Parameters: {} client connections, {} s per request measurement, {} repetitions (medians shown), \
         bulk {} MiB per stream ({} streams in workload 6), idle tunnels {} per proxy and {} for egressgate. \
         All traffic on 127.0.0.1. ⚠ marks a cell where a repetition had errors (listed at the end).\n",
        args.pace.conns,
        args.pace.duration,
        args.pace.reps,
        args.bulk_mib,
        args.bulk_streams,
        args.idle,
        args.idle_egressgate
    );
}

/// Every throughput workload in report order: the request workloads, then the bulk ones
/// (their labels carry the sizes of this run).
fn rows(args: &SuiteArgs) -> Vec<Row> {
    let mut rows: Vec<Row> = REQUEST_WORKLOADS
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
    rows
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::work::{Idle, Meas};

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
        let targets = ["direct", "egressgate", "tinyproxy", "squid", "apache"];
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
            ("apache", 500, 500, 20_000),
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

    /// `text` is the pinned file `testdata/NAME`; `LOADGEN_UPDATE_TESTDATA=1` rewrites the
    /// file instead (then review the diff).
    fn pinned(text: &str, name: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(name);
        if std::env::var_os("LOADGEN_UPDATE_TESTDATA").is_some() {
            std::fs::write(&path, text).unwrap();
        }
        assert_eq!(text, std::fs::read_to_string(&path).unwrap());
    }

    #[test]
    fn the_report_keeps_its_shape() {
        let a = args(&["--note", "A note.", "--idle-egressgate", "10000"]);
        let (text, ok) = render(&a, &everything());
        assert!(
            !ok,
            "a failed cell, a refusal mismatch and a dead process fail the run"
        );
        pinned(&text, "report-full.md");
    }

    /// Every peer counts toward "best peer": with apache the fastest peer in workload 3 (and
    /// the cheapest in CPU), the ratios are against apache's figures, not squid's.
    #[test]
    fn the_best_peer_is_any_peer() {
        let mut res = everything();
        res.runs.retain(|(w, _, _)| *w == 3);
        for (_, t, m) in &mut res.runs {
            match t.as_str() {
                "apache" => {
                    m.ok = 100_000;
                    m.cpu_s = Some(0.5);
                }
                "egressgate" => m.ok = 150_000,
                _ => {}
            }
        }
        let v = Medians::new(&res);
        let best = v.best_peer(3, &|m| Some(m.rate()), true).unwrap();
        assert_eq!(best, 20_000.0);
        let cheapest = v.best_peer(3, &Meas::cpu_us_per_req, false).unwrap();
        assert_eq!(cheapest, 5.0);
        let (text, _) = render(&args(&[]), &res);
        assert!(
            text.contains(
                "| new tunnels/s (CONNECT + GET + close) ≥ 1.5× best peer | 1.50× | yes |"
            ),
            "{text}"
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
        pinned(&text, "report-direct.md");
    }
}
