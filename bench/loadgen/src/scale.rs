//! `loadgen scale`: the cost of the two database-bound steps, as a user meets them. Each sample
//! opens a fresh turn in a fresh chat, then times (a) the proxy's cache-miss decision: a GET for
//! a host this turn has never named, which the proxy must ask the database about and record as
//! refused, on an already open client connection; and (b) the approval tool's merge for that
//! turn (`POST /v1/turns/{id}/approval-requests`, which must answer `ask`). Run it against an
//! empty database and a loaded one (bench/scale.sh) and compare.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use crate::client::{self, Conn};
use crate::control;

/// What `scale` needs.
#[derive(clap::Parser, Clone, Debug)]
pub struct ScaleArgs {
    /// egressgate's proxy.
    #[arg(long)]
    pub proxy: SocketAddr,
    /// egressgate's control plane.
    #[arg(long)]
    pub control: SocketAddr,
    /// Port in the refused URLs (an allowed port, so the refusal is `not_approved`).
    #[arg(long)]
    pub port: u16,
    /// Timed samples (after `warmup` untimed ones).
    #[arg(long, default_value_t = 400)]
    pub samples: usize,
    #[arg(long, default_value_t = 40)]
    pub warmup: usize,
    /// Distinguishes the chats of one run from another's.
    #[arg(long, default_value = "run")]
    pub label: String,
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// One sample: (decision µs, merge µs).
async fn sample(a: &ScaleArgs, token: &str, i: usize) -> io::Result<(u64, u64)> {
    let chat = format!("scale-{}-{i}", a.label);
    let turn = control::open_turn(a.control, token, &chat, &[]).await?;
    let host = format!("miss-{i}.{}.scale.example.net", a.label);
    let mut c = Conn::connect(a.proxy).await?;
    let req = format!(
        "GET http://{host}:{}/x HTTP/1.1\r\nHost: {host}:{}\r\nProxy-Authorization: {}\r\n\r\n",
        a.port, a.port, turn.auth
    );
    let t0 = Instant::now();
    let (head, _) = c.exchange(req.as_bytes()).await?;
    let decision = t0.elapsed();
    if head.status != 403 {
        return Err(io::Error::other(format!(
            "the GET for {host} answered {} (expected 403)",
            head.status
        )));
    }
    let t1 = Instant::now();
    let (status, outcome) = control::approval_request(a.control, token, &turn.id).await?;
    let merge = t1.elapsed();
    if status != 200 || outcome.as_deref() != Some("ask") {
        return Err(io::Error::other(format!(
            "the approval request answered {status} {outcome:?} (expected 200 ask)"
        )));
    }
    let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    Ok((us(decision), us(merge)))
}

/// Runs the samples one after another and prints one line:
/// `decision_p50_us=… decision_p99_us=… merge_p50_us=… merge_p99_us=… samples=…`.
pub async fn run(a: ScaleArgs) -> io::Result<()> {
    client::check_loopback(a.proxy)?;
    client::check_loopback(a.control)?;
    let token = control::runtime_token()?;
    let (mut dec, mut merge) = (Vec::new(), Vec::new());
    for i in 0..a.warmup + a.samples {
        let (d, m) = sample(&a, &token, i).await?;
        if i >= a.warmup {
            dec.push(d);
            merge.push(m);
        }
    }
    dec.sort_unstable();
    merge.sort_unstable();
    println!(
        "decision_p50_us={} decision_p99_us={} merge_p50_us={} merge_p99_us={} samples={}",
        pct(&dec, 0.5),
        pct(&dec, 0.99),
        pct(&merge, 0.5),
        pct(&merge, 0.99),
        dec.len()
    );
    Ok(())
}
