//! `loadgen inspected`: what inspection costs. Workload 9's tunnel (CONNECT + TLS 1.3 + GET +
//! close, the certificate verified by the client) through egressgate twice in each repetition:
//! to the benchmark host, relayed as opaque bytes, and to a host egressgate inspects (it ends
//! the client's TLS with a leaf minted under the deployment CA, judges the GET, and opens its
//! own TLS connection to the same origin, verifying the origin's certificate). Then the cost
//! of minting: one client, one name after another, the first request for a new name (a leaf
//! minted) against the second request for the same name (the leaf cached).

use std::net::SocketAddr;
use std::time::Duration;

use crate::work::{self, Kind, Load, Meas, Target, TlsLoad};
use crate::{client, control, rows};

/// What `inspected` needs.
#[derive(clap::Parser, Clone, Debug)]
pub struct InspectedArgs {
    /// egressgate's proxy: ADDR,PID.
    #[arg(long, value_parser = rows::parse_proc)]
    pub proxy: (SocketAddr, u32),
    #[arg(long)]
    pub control: SocketAddr,
    /// The origin's TLS listener.
    #[arg(long)]
    pub tls_origin: SocketAddr,
    /// The origin's certificate (DER): what the client trusts for the opaque host.
    #[arg(long)]
    pub tls_cert: std::path::PathBuf,
    /// The deployment CA (DER): what the client trusts for the inspected hosts.
    #[arg(long)]
    pub ca: std::path::PathBuf,
    /// The opaque host (not inspected).
    #[arg(long, default_value = "bench.example.com")]
    pub host: String,
    /// The inspected hosts are `NAME.SUFFIX` (egressgate runs with `--inspect '*.SUFFIX'` and
    /// resolves `i.SUFFIX` and `m0.SUFFIX` … `m{N-1}.SUFFIX`).
    #[arg(long, default_value = "inspect.bench.example.com")]
    pub suffix: String,
    /// Names minted one after another (`m0` …).
    #[arg(long, default_value_t = 300)]
    pub mint_names: usize,
    /// Clients, seconds per repetition, repetitions.
    #[command(flatten)]
    pub pace: crate::args::Pace,
}

/// One request, alone, to `host` over TLS trusting `tls`: its latency in ms, or what failed.
async fn one(t: &Target, load: &Load, host: &str) -> Result<f64, String> {
    let single = Load {
        host: host.to_owned(),
        conns: 1,
        max_requests: 1,
        ..load.clone()
    };
    let m = work::requests(t, Kind::TunTlsClose, &single).await;
    match (m.ok, m.pct_ms(0.5)) {
        (1, Some(ms)) => Ok(ms),
        _ => Err(m.first_problem.unwrap_or_else(|| "no answer".into())),
    }
}

/// The `p` quantile of unsorted values.
fn quantile(v: &mut [f64], p: f64) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round();
    (!v.is_empty()).then(|| v[i as usize])
}

/// Runs the comparison and the mint series; prints the section. `Ok(false)` when anything
/// failed.
pub async fn run(a: InspectedArgs) -> std::io::Result<bool> {
    client::check_loopback(a.control)?;
    client::check_loopback(a.tls_origin)?;
    let token = control::runtime_token()?;
    let inspected_sites = format!("*.{}", a.suffix);
    let turn = control::open_turn(
        a.control,
        &token,
        "bench-inspected",
        &[&a.host, &inspected_sites],
    )
    .await?;
    let t = Target {
        name: "egressgate".into(),
        proxy: Some(a.proxy.0),
        pid: Some(a.proxy.1),
        auth: Some(turn.auth),
        host: None,
    };
    let opaque = Load {
        // The TLS workload dials `tls.origin`; this one is never used.
        origin: a.tls_origin,
        host: a.host.clone(),
        path: "/small".into(),
        conns: a.pace.conns,
        duration: Duration::from_secs_f64(a.pace.duration),
        max_requests: 3_000_000,
        expect_status: 200,
        tls: Some(TlsLoad::new(a.tls_origin, std::fs::read(&a.tls_cert)?)?),
    };
    let inspected = Load {
        host: format!("i.{}", a.suffix),
        tls: Some(TlsLoad::new(a.tls_origin, std::fs::read(&a.ca)?)?),
        ..opaque.clone()
    };
    // The inspected host's leaf is minted here, before anything is timed.
    one(&t, &inspected, &inspected.host)
        .await
        .map_err(|e| std::io::Error::other(format!("inspected host: {e}")))?;
    let mut ok = true;
    let mut runs: [Vec<Meas>; 2] = [Vec::new(), Vec::new()];
    for rep in 0..a.pace.reps {
        for k in 0..2 {
            let which = (k + rep) % 2;
            let load = if which == 0 { &opaque } else { &inspected };
            let m = work::requests(&t, Kind::TunTlsClose, load).await;
            eprintln!(
                "inspected rep{rep} {}: {}",
                load.host,
                crate::suite::describe(9, "egressgate", rep, &m)
            );
            ok &= !m.failed();
            runs[which].push(m);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    println!(
        "\n## Inspected TLS (egressgate)\n\nCONNECT + TLS 1.3 + GET + close, {} clients, {} s, {} repetitions in alternating order, medians: to `{}`, relayed as opaque bytes (the client verifies the origin's certificate), and to `{}`, inspected (egressgate ends the client's TLS with a leaf minted under the deployment CA, which is all the client trusts, judges the GET, and makes its own TLS connection to the same origin, verifying its certificate; the leaf was minted before the clock started).\n\n| host | tunnels/s | p50 / p99 ms | proxy CPU µs per tunnel |\n|---|---:|---:|---:|",
        a.pace.conns, a.pace.duration, a.pace.reps, opaque.host, inspected.host
    );
    let mut rates = [0.0; 2];
    for (which, label) in [(0, "opaque"), (1, "inspected")] {
        let med = |f: &dyn Fn(&Meas) -> Option<f64>| {
            crate::report::median(runs[which].iter().filter_map(f).collect())
        };
        rates[which] = med(&|m| Some(m.rate())).unwrap_or(0.0);
        let p = |q| med(&|m| m.pct_ms(q)).map_or("–".into(), |v| format!("{v:.2}"));
        println!(
            "| {label} | {} | {} / {} | {} |",
            rows::num(rates[which]),
            p(0.5),
            p(0.99),
            rows::cell(med(&Meas::cpu_us_per_req)),
        );
    }
    if rates[0] > 0.0 {
        println!("| inspected / opaque | {:.2}× | | |", rates[1] / rates[0]);
    }
    ok &= mint_series(&a, &t, &inspected).await;
    Ok(ok)
}

/// The mint series: `m{i}.SUFFIX` first (a new leaf), then again (the cached leaf); the
/// cost of minting is each name's first latency less its second.
async fn mint_series(a: &InspectedArgs, t: &Target, inspected: &Load) -> bool {
    let (mut first, mut again, mut paired, mut failed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..a.mint_names {
        let name = format!("m{i}.{}", a.suffix);
        let new = one(t, inspected, &name).await;
        let cached = one(t, inspected, &name).await;
        match (new, cached) {
            (Ok(x), Ok(y)) => {
                first.push(x);
                again.push(y);
                paired.push(x - y);
            }
            (Err(e), _) | (_, Err(e)) => failed.push(format!("{name}: {e}")),
        }
    }
    let ms = |v: &mut Vec<f64>, p| quantile(v, p).map_or("–".into(), |v| format!("{v:.2}"));
    println!(
        "\n### Minting a leaf\n\n{} names below `{}`, one request at a time: the first request for each name (egressgate mints its leaf; its connection to the origin for that name is new too) and at once a second one (the leaf cached). The cost of minting is each name's first latency less its second, p50 and p99 over the names.\n\n| request | p50 ms | p99 ms |\n|---|---:|---:|\n| first for a new name | {} | {} |\n| the same name again | {} | {} |\n| per name, first less second: minting | {} | {} |",
        a.mint_names,
        a.suffix,
        ms(&mut first, 0.5),
        ms(&mut first, 0.99),
        ms(&mut again, 0.5),
        ms(&mut again, 0.99),
        ms(&mut paired, 0.5),
        ms(&mut paired, 0.99)
    );
    if let Some(e) = failed.first() {
        println!(
            "\n⚠ {} of {} requests failed; first: {e}",
            failed.len(),
            2 * a.mint_names
        );
    }
    failed.is_empty() && !first.is_empty()
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles() {
        let mut v = vec![3.0, 1.0, 2.0, 4.0, 5.0];
        assert_eq!(quantile(&mut v, 0.5), Some(3.0));
        assert_eq!(quantile(&mut v, 0.99), Some(5.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
