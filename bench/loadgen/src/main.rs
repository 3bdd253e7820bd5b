//! Load generator for the egressgate benchmark. `origin` runs the loopback origin; `suite`
//! measures every workload against the origin itself and each proxy and writes the report.
//! Everything stays on 127.0.0.0/8; every loop is bounded by time and count.

mod client;
mod control;
mod origin;
mod proc;
mod report;
mod scale;
mod work;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::work::{Kind, Load, Target};

#[derive(Parser)]
#[command(about = "egressgate benchmark: loopback origin and load generator")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the loopback origin (`/small`, `/bulk?mib=N`), and the same over TLS 1.3.
    Origin {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Also serve TLS 1.3 here, with a fresh self-signed certificate for `--tls-name`.
        #[arg(long, requires = "cert_out")]
        tls_listen: Option<SocketAddr>,
        /// The TLS certificate's name.
        #[arg(long, default_value = "bench.example.com")]
        tls_name: String,
        /// Where the TLS certificate (DER) is written, for the clients to trust.
        #[arg(long)]
        cert_out: Option<std::path::PathBuf>,
    },
    /// Run every workload against direct and each proxy; write the markdown report.
    Suite(Box<SuiteArgs>),
    /// Time the cache-miss decision and the approval tool's merge (bench/scale.sh).
    Scale(scale::ScaleArgs),
    /// Print `count` currently free TCP ports on 127.0.0.1 (for proxies that need a fixed port).
    FreePorts {
        #[arg(default_value_t = 1)]
        count: usize,
    },
}

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
    /// Client connections for request workloads.
    #[arg(long, default_value_t = 32)]
    pub conns: usize,
    /// Seconds per request measurement.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Repetitions (the report shows medians).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.cmd {
        Cmd::Origin {
            listen,
            tls_listen,
            tls_name,
            cert_out,
        } => {
            for addr in std::iter::once(listen).chain(tls_listen) {
                if let Err(e) = client::check_loopback(addr) {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            }
            let tls = tls_listen
                .zip(cert_out)
                .map(|(listen, cert_out)| origin::TlsOrigin {
                    listen,
                    name: tls_name,
                    cert_out,
                });
            match rt.block_on(origin::serve(listen, tls)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("origin failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::FreePorts { count } => {
            // Hold every listener until all are chosen, so the ports differ.
            let listeners: Vec<_> = (0..count)
                .filter_map(|_| std::net::TcpListener::bind("127.0.0.1:0").ok())
                .collect();
            if listeners.len() != count {
                eprintln!("cannot find {count} free ports");
                return ExitCode::FAILURE;
            }
            for l in &listeners {
                if let Ok(a) = l.local_addr() {
                    println!("{}", a.port());
                }
            }
            ExitCode::SUCCESS
        }
        Cmd::Scale(args) => match rt.block_on(scale::run(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("scale failed: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Suite(args) => {
            proc::CLK_TCK.store(args.clk_tck, std::sync::atomic::Ordering::Relaxed);
            match rt.block_on(suite(*args)) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => {
                    eprintln!("suite finished with failures (see the report)");
                    ExitCode::from(2)
                }
                Err(e) => {
                    eprintln!("suite failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The request workloads, in report order.
pub const REQUEST_WORKLOADS: [(u8, Kind, &str); 5] = [
    (
        1,
        Kind::FwdClose,
        "1. forwarded GET, new connection per request (req/s)",
    ),
    (2, Kind::FwdKeep, "2. forwarded GETs, keep-alive (req/s)"),
    (
        3,
        Kind::TunClose,
        "3. CONNECT + one GET + close (tunnels/s)",
    ),
    (
        4,
        Kind::TunKeep,
        "4. keep-alive GETs inside tunnels (req/s)",
    ),
    (
        9,
        Kind::TunTlsClose,
        "9. CONNECT + TLS 1.3 + GET + close (tunnels/s)",
    ),
];

/// Everything measured, for the report.
#[derive(Default)]
pub struct Results {
    pub targets: Vec<String>,
    /// (workload number, target name) → repetitions.
    pub runs: Vec<(u8, String, work::Meas)>,
    /// Refusal repetitions: measurement, recorded count.
    pub refusals: Vec<(work::Meas, Result<u64, String>)>,
    /// (target, idle result).
    pub idle: Vec<(String, work::Idle)>,
    pub problems: Vec<String>,
    /// (workload, target, repetition, warnings, errors, first message) logged by egressgate
    /// during a measurement.
    pub log_findings: Vec<(u8, String, usize, u64, u64, String)>,
}

/// Follows a growing log file and counts new WARN / ERROR lines.
struct LogWatch {
    path: std::path::PathBuf,
    offset: u64,
}

impl LogWatch {
    fn new(path: std::path::PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Self { path, offset }
    }

    /// (warnings, errors, first such line) since the last call.
    fn take(&mut self) -> (u64, u64, String) {
        use std::io::{Read as _, Seek as _};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return (0, 0, String::new());
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return (0, 0, String::new());
        }
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        // Only whole lines; a partial last line is read next time.
        let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.offset += end as u64;
        let (mut warn, mut err, mut first) = (0, 0, String::new());
        for line in String::from_utf8_lossy(&buf[..end]).lines() {
            let w = line.contains(" WARN ");
            let e = line.contains(" ERROR ");
            if w {
                warn += 1;
            }
            if e {
                err += 1;
            }
            if (w || e) && first.is_empty() {
                first = line
                    .split_once(' ')
                    .map_or(line, |(_, rest)| rest)
                    .trim()
                    .to_owned();
            }
        }
        (warn, err, first)
    }
}

fn utc_hms() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{:02}:{:02}:{:02}Z",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

fn log_line(raw: &mut Option<std::fs::File>, line: &str) {
    let line = format!("{} {line}", utc_hms());
    eprintln!("{line}");
    if let Some(f) = raw {
        use std::io::Write as _;
        let _ = writeln!(f, "{line}");
    }
}

/// Counts what egressgate logged during the last measurement.
fn note_log(
    watch: &mut Option<LogWatch>,
    res: &mut Results,
    raw: &mut Option<std::fs::File>,
    w: u8,
    target: &str,
    rep: usize,
) {
    if let Some(lw) = watch {
        let (warn, err, first) = lw.take();
        if warn + err > 0 {
            log_line(
                raw,
                &format!(
                    "w{w} {target} rep{rep}: egressgate logged {warn} WARN, {err} ERROR; first: {first}"
                ),
            );
            res.log_findings
                .push((w, target.to_owned(), rep, warn, err, first));
        }
    }
}

fn describe(w: u8, target: &str, rep: usize, m: &work::Meas) -> String {
    format!(
        "w{w} {target} rep{rep}: ok={} bad_status={} errors={} conns={} stale_retries={} elapsed={:.2}s rate={:.0}/s mib_s={:.0} p50={:.3}ms p99={:.3}ms cpu_s={} cpu_us_req={}{}",
        m.ok,
        m.bad_status,
        m.errors,
        m.conns,
        m.stale_retries,
        m.elapsed,
        m.rate(),
        m.mib_per_s(),
        m.pct_ms(0.5).unwrap_or(0.0),
        m.pct_ms(0.99).unwrap_or(0.0),
        m.cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
        m.cpu_us_per_req().map_or("-".into(), |c| format!("{c:.1}")),
        m.first_problem
            .as_ref()
            .map_or(String::new(), |p| format!(" first_problem={p:?}")),
    )
}

async fn suite(args: SuiteArgs) -> std::io::Result<bool> {
    client::check_loopback(args.origin)?;
    let mut raw = match &args.raw {
        Some(p) => Some(std::fs::File::create(p)?),
        None => None,
    };
    let load = Load {
        origin: args.origin,
        host: args.host.clone(),
        path: "/small".into(),
        conns: args.conns,
        duration: Duration::from_secs_f64(args.duration),
        max_requests: args.max_requests,
        expect_status: 200,
        tls: match (&args.tls_origin, &args.tls_cert) {
            (Some(origin), Some(cert)) => {
                client::check_loopback(*origin)?;
                Some(work::TlsLoad::new(*origin, std::fs::read(cert)?)?)
            }
            _ => None,
        },
    };
    let mut targets = vec![Target {
        name: "direct".into(),
        proxy: None,
        pid: None,
        auth: None,
        host: None,
    }];
    let mut egress_control = None;
    for p in &args.proxies {
        let mut t = p.clone();
        if t.name == "egressgate" {
            let control = args
                .control
                .ok_or_else(|| std::io::Error::other("--control is needed for egressgate"))?;
            client::check_loopback(control)?;
            let token = std::env::var("EGRESSGATE_RUNTIME_TOKEN")
                .map_err(|_| std::io::Error::other("EGRESSGATE_RUNTIME_TOKEN is not set"))?;
            let turn = control::open_turn(control, &token, "bench-load", &[&args.host]).await?;
            t.auth = Some(turn.auth);
            egress_control = Some((control, token));
        }
        targets.push(t);
    }
    // Sanity: every target answers a forwarded GET and a GET inside a tunnel.
    for t in &targets {
        let kinds = [Kind::FwdKeep, Kind::TunKeep, Kind::TunTlsClose];
        for &kind in kinds
            .iter()
            .filter(|&&k| k != Kind::TunTlsClose || load.tls.is_some())
        {
            let one = Load {
                duration: Duration::from_secs(5),
                max_requests: 1,
                conns: 1,
                ..load.clone()
            };
            let m = work::requests(t, kind, &one).await;
            if m.ok != 1 {
                return Err(std::io::Error::other(format!(
                    "{} does not answer {kind:?}: {}",
                    t.name,
                    describe(0, &t.name, 0, &m)
                )));
            }
        }
    }
    let mut res = Results {
        targets: targets.iter().map(|t| t.name.clone()).collect(),
        ..Results::default()
    };
    let mut watch = args.egressgate_log.clone().map(LogWatch::new);
    let pause = Duration::from_millis(500);
    let check_alive = |res: &mut Results| {
        for t in &targets {
            if let Some(pid) = t.pid
                && !proc::alive(pid)
            {
                res.problems
                    .push(format!("{} (pid {pid}) is no longer running", t.name));
            }
        }
    };

    for &(w, kind, _) in &REQUEST_WORKLOADS {
        if !args.workloads.contains(&w) {
            continue;
        }
        for rep in 0..args.reps {
            for i in 0..targets.len() {
                // Rotate the order per repetition so background load spreads evenly.
                let t = &targets[(i + rep) % targets.len()];
                let m = work::requests(t, kind, &load).await;
                log_line(&mut raw, &describe(w, &t.name, rep, &m));
                res.runs.push((w, t.name.clone(), m));
                tokio::time::sleep(pause).await;
                note_log(&mut watch, &mut res, &mut raw, w, &t.name, rep);
            }
        }
        check_alive(&mut res);
    }

    for (w, streams) in [(5u8, 1usize), (6, args.bulk_streams)] {
        if !args.workloads.contains(&w) {
            continue;
        }
        for rep in 0..args.reps {
            for i in 0..targets.len() {
                let t = &targets[(i + rep) % targets.len()];
                let m = work::bulk(
                    t,
                    &load,
                    streams,
                    args.bulk_mib,
                    Duration::from_secs_f64(args.bulk_limit),
                )
                .await;
                log_line(&mut raw, &describe(w, &t.name, rep, &m));
                res.runs.push((w, t.name.clone(), m));
                tokio::time::sleep(pause).await;
                note_log(&mut watch, &mut res, &mut raw, w, &t.name, rep);
            }
        }
        check_alive(&mut res);
    }

    if args.workloads.contains(&8)
        && let Some((control, token)) = &egress_control
        && let Some(eg) = targets.iter().find(|t| t.name == "egressgate")
    {
        for rep in 0..args.reps {
            let turn = control::open_turn(
                *control,
                token,
                &format!("bench-refusals-{rep}"),
                &[&args.host],
            )
            .await?;
            let t = Target {
                auth: Some(turn.auth.clone()),
                ..eg.clone()
            };
            let refuse = Load {
                host: args.blocked_host.clone(),
                expect_status: 403,
                ..load.clone()
            };
            let m = work::requests(&t, Kind::FwdKeep, &refuse).await;
            let recorded = control::refusal_count(*control, token, &turn.id)
                .await
                .map(|(n, _)| n)
                .map_err(|e| e.to_string());
            log_line(
                &mut raw,
                &format!(
                    "{} recorded={recorded:?}",
                    describe(8, "egressgate", rep, &m)
                ),
            );
            res.refusals.push((m, recorded));
            tokio::time::sleep(pause).await;
            note_log(&mut watch, &mut res, &mut raw, 8, "egressgate", rep);
        }
        check_alive(&mut res);
    }

    if args.workloads.contains(&7) {
        let settle = Duration::from_secs_f64(args.idle_settle);
        for t in targets.iter().filter(|t| t.proxy.is_some()) {
            let mut runs = vec![args.idle];
            if t.name == "egressgate" && args.idle_egressgate != args.idle {
                runs.push(args.idle_egressgate);
            }
            for n in runs {
                // egressgate's tunnels are spread over many turns, each below the per-turn cap.
                let mut auths = Vec::new();
                if t.name == "egressgate"
                    && let Some((control, token)) = &egress_control
                {
                    for i in 0..n.div_ceil(args.idle_per_turn.max(1)) {
                        let label = format!("bench-idle-{n}-{i}");
                        let turn =
                            control::open_turn(*control, token, &label, &[&args.host]).await?;
                        auths.push(turn.auth);
                    }
                }
                let r = work::idle(t, &load, n, settle, &auths).await;
                log_line(
                    &mut raw,
                    &format!(
                        "w7 {} idle={n} turns={}: opened={} open_secs={:.2} rss_before={}KiB rss_after={}KiB per_tunnel={:.2}KiB alive={}/{}{}",
                        t.name,
                        auths.len().max(1),
                        r.opened,
                        r.open_secs,
                        r.rss_before_kib,
                        r.rss_after_kib,
                        r.per_tunnel_kib(),
                        r.alive,
                        r.checked,
                        r.first_problem
                            .as_ref()
                            .map_or(String::new(), |p| format!(" first_problem={p:?}"))
                    ),
                );
                res.idle.push((t.name.clone(), r));
                // Let the proxy notice the closes before the next run.
                tokio::time::sleep(Duration::from_secs(2)).await;
                note_log(&mut watch, &mut res, &mut raw, 7, &t.name, 0);
            }
        }
        check_alive(&mut res);
    }

    let (text, ok) = report::render(&args, &res);
    if let Some(p) = &args.out {
        std::fs::write(p, &text)?;
    }
    println!("{text}");
    Ok(ok)
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
