//! The arguments several subcommands share, apart from the command line that gathers them
//! (cli.rs), so a measuring module reads its pace and a suite's settings without importing the
//! command line above it.

use std::net::SocketAddr;

use clap::Parser;

use crate::client;
use crate::work::Target;

/// How many clients, how long and how often: every measuring subcommand's first three flags.
#[derive(clap::Args, Clone, Debug)]
pub struct Pace {
    /// Client connections for request workloads.
    #[arg(long, default_value_t = 32)]
    pub conns: usize,
    /// Seconds per request measurement.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Repetitions (the report shows medians).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
}

/// What a suite run measures and how long; bench/run.sh and profile.sh set most of it.
#[derive(Parser, Clone, Debug)]
pub struct SuiteArgs {
    /// The origin's address.
    #[arg(long)]
    pub origin: SocketAddr,
    /// Host name requests name (proxies resolve it to the origin).
    #[arg(long, default_value = "bench.example.com")]
    pub host: String,
    /// A host nobody approved (refusal workload).
    #[arg(long, default_value = "unapproved.example.net")]
    pub blocked_host: String,
    /// A proxy to measure: NAME,ADDR,PID (repeat). The one named `egressgate` gets a turn
    /// credential from the control plane.
    #[arg(long = "proxy", value_parser = parse_proxy)]
    pub proxies: Vec<Target>,
    /// egressgate's control plane.
    #[arg(long)]
    pub control: Option<SocketAddr>,
    /// The origin's TLS listener (workload 9).
    #[arg(long, requires = "tls_cert")]
    pub tls_origin: Option<SocketAddr>,
    /// The TLS origin's certificate (DER), the only one the client trusts.
    #[arg(long)]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Idle tunnels per turn in workload 7 (egressgate): the tunnels are spread over as many
    /// turns as this needs, each below the default `max-connections-per-turn` (256).
    #[arg(long, default_value_t = 200)]
    pub idle_per_turn: usize,
    /// Client connections, seconds per request measurement, repetitions.
    #[command(flatten)]
    pub pace: Pace,
    /// Most requests in one measurement.
    #[arg(long, default_value_t = 3_000_000)]
    pub max_requests: u64,
    /// MiB per bulk download.
    #[arg(long, default_value_t = 256)]
    pub bulk_mib: u64,
    /// Parallel bulk downloads in workload 6.
    #[arg(long, default_value_t = 8)]
    pub bulk_streams: usize,
    /// Seconds one bulk measurement may take before it counts as failed.
    #[arg(long, default_value_t = 60.0)]
    pub bulk_limit: f64,
    /// Idle tunnels opened against every proxy.
    #[arg(long, default_value_t = 500)]
    pub idle: usize,
    /// Idle tunnels opened against egressgate in the large run.
    #[arg(long, default_value_t = 10_000)]
    pub idle_egressgate: usize,
    /// Seconds idle tunnels settle before RSS is sampled.
    #[arg(long, default_value_t = 2.0)]
    pub idle_settle: f64,
    /// Clock ticks per second (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100)]
    pub clk_tck: u64,
    /// Workloads to run (comma-separated numbers 1-9).
    #[arg(long, default_value = "1,2,3,4,5,6,7,8,9", value_delimiter = ',')]
    pub workloads: Vec<u8>,
    /// Markdown report.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// One line per measurement.
    #[arg(long)]
    pub raw: Option<std::path::PathBuf>,
    /// egressgate's log file: warnings and errors it gains during each measurement are counted.
    #[arg(long)]
    pub egressgate_log: Option<std::path::PathBuf>,
    /// Free text for the report's header (machine, versions, command).
    #[arg(long, default_value = "")]
    pub note: String,
}

fn parse_proxy(s: &str) -> Result<Target, String> {
    let parts: Vec<&str> = s.split(',').collect();
    let (name, addr, pid, host) = match parts[..] {
        [name, addr, pid] => (name, addr, pid, None),
        [name, addr, pid, host] => (name, addr, pid, Some(host.to_owned())),
        _ => return Err("expected NAME,ADDR,PID[,HOST]".into()),
    };
    let addr: SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    client::check_loopback(addr).map_err(|e| e.to_string())?;
    let pid: u32 = pid.parse().map_err(|e| format!("{pid}: {e}"))?;
    Ok(Target {
        name: name.to_owned(),
        proxy: Some(addr),
        pid: Some(pid),
        auth: None,
        host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_specs() {
        let t = parse_proxy("tinyproxy,127.0.0.1:3128,42,127.0.0.1").unwrap();
        assert_eq!((t.pid, t.host.as_deref()), (Some(42), Some("127.0.0.1")));
        assert_eq!(parse_proxy("squid,127.0.0.1:3128,7").unwrap().host, None);
        assert_eq!(
            parse_proxy("squid,127.0.0.1:3128").unwrap_err(),
            "expected NAME,ADDR,PID[,HOST]"
        );
        let off = parse_proxy("squid,10.0.0.1:3128,7").unwrap_err();
        assert!(off.contains("not a loopback address"), "{off}");
    }
}
