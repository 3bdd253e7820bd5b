//! The targets next to what this run measured: egressgate against the best peer and
//! against direct, its CPU, its p99, idle-tunnel memory at 10,000 tunnels, and refusals.

use std::fmt::Write as _;

use super::checks::refusals_held;
use super::fmt::{group, mib, num, ratio, short};
use super::medians::{EG, Medians, median, throughput};
use crate::args::SuiteArgs;
use crate::work::{Meas, REQUEST_WORKLOADS};

/// One target: what it asks, what was measured, and whether it was met (none: not judged).
fn row(s: &mut String, name: String, measured: String, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "–",
    };
    let _ = writeln!(s, "| {name} | {measured} | {verdict} |");
}

/// The targets table, when egressgate was measured.
pub fn targets_table(s: &mut String, args: &SuiteArgs, v: &Medians) {
    if !v.res.targets.iter().any(|t| t == EG) {
        return;
    }
    let _ = writeln!(
        s,
        "\n## The issue's targets against this run\n\n| target | measured | met |\n|---|---|---|"
    );
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
            v.med(w, EG, |m| Some(m.rate())),
            v.best_peer(w, &|m| Some(m.rate()), true),
        );
        if let Some(r) = r {
            row(
                s,
                format!("{what} ≥ {goal}× best peer"),
                format!("{r:.2}×"),
                Some(r >= goal),
            );
        }
    }
    if let Some(cpu) = v.med(3, EG, Meas::cpu_us_per_req) {
        row(
            s,
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
            v.med(w, EG, |m| Some(throughput(w, m))),
            v.med(w, "direct", |m| Some(throughput(w, m))),
        ) {
            row(s, what.into(), format!("{r:.2}×"), Some(r >= goal));
        }
    }
    for (w, _, label) in REQUEST_WORKLOADS {
        if let Some(r) = ratio(
            v.med(w, EG, Meas::cpu_us_per_req),
            v.best_peer(w, &Meas::cpu_us_per_req, false),
        ) {
            row(
                s,
                format!("CPU per request ≤ 0.5× best peer — {}", short(label)),
                format!("{r:.2}×"),
                Some(r <= 0.5),
            );
        }
    }
    for (w, _, label) in REQUEST_WORKLOADS {
        let eg = v.med(w, EG, |m| m.pct_ms(0.99));
        let best = v.best_peer(w, &|m| m.pct_ms(0.99), false);
        if let (Some(e), Some(b)) = (eg, best) {
            row(
                s,
                format!("p99 no worse than best peer — {}", short(label)),
                format!("{e:.2} ms vs {b:.2} ms"),
                Some(e <= b),
            );
        }
    }
    idle_target(s, args, v);
    refusal_target(s, v);
}

/// egressgate's large idle run, extrapolated to 10,000 tunnels when fewer were opened.
fn idle_target(s: &mut String, args: &SuiteArgs, v: &Medians) {
    let Some((_, r)) = v
        .res
        .idle
        .iter()
        .rev()
        .find(|(t, r)| t == EG && r.wanted == args.idle_egressgate)
    else {
        return;
    };
    let at = r.rss_at_kib(10_000);
    let with = format!(
        "{} with {} tunnels",
        mib(r.rss_after_kib as f64),
        group(r.opened as u64)
    );
    let measured = if r.opened >= 10_000 {
        with
    } else {
        format!("{with}; {} extrapolated to 10,000", mib(at))
    };
    row(
        s,
        "10,000 idle tunnels (over many turns) ≤ 40 MiB RSS".into(),
        measured,
        Some(at <= 40.0 * 1024.0 && !r.failed()),
    );
}

/// The median refusal rate, and whether every repetition recorded every refusal.
fn refusal_target(s: &mut String, v: &Medians) {
    let refusals = &v.res.refusals;
    if refusals.is_empty() {
        return;
    }
    let Some(rate) = median(refusals.iter().map(|(m, _)| m.rate()).collect()) else {
        return;
    };
    let every = refusals.iter().all(|(m, r)| refusals_held(m, r));
    row(
        s,
        "refusals ≥ 10,000/s, every refusal recorded".into(),
        format!(
            "{}/s, every refusal recorded: {}",
            num(Some(rate)),
            if every { "yes" } else { "no" }
        ),
        Some(rate >= 10_000.0 && every),
    );
}
