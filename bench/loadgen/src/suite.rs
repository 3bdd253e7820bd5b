//! `loadgen suite`: every chosen workload against the origin itself ("direct") and each
//! proxy, repetition by repetition, one line per measurement in the raw log; then the report.

mod raw;

use std::net::SocketAddr;
use std::time::Duration;

use crate::args::SuiteArgs;
use crate::logwatch::LogWatch;
use crate::results::Results;
use crate::work::{self, Kind, Load, REQUEST_WORKLOADS, Target};
use crate::{client, control, proc, report};

use raw::Raw;
pub use raw::describe;

/// Between measurements: the proxies settle and egressgate's log catches up.
const PAUSE: Duration = Duration::from_millis(500);

/// egressgate's control plane and the runtime token, to open turns.
type Control = (SocketAddr, String);

/// A measurement that repeats per target: request loops or bulk downloads.
#[derive(Clone, Copy)]
enum Job {
    Requests(Kind),
    Bulk { streams: usize },
}

/// What the suite carries from one measurement to the next.
struct Run {
    raw: Raw,
    watch: Option<LogWatch>,
    res: Results,
}

impl Run {
    /// Waits `settle`, then counts what egressgate logged during the last measurement.
    async fn settle(&mut self, settle: Duration, w: u8, target: &str, rep: usize) {
        tokio::time::sleep(settle).await;
        let Some(watch) = &mut self.watch else {
            return;
        };
        let g = watch.take();
        if g.warn + g.err > 0 {
            self.raw.line(&format!(
                "w{w} {target} rep{rep}: egressgate logged {} WARN, {} ERROR; first: {}",
                g.warn, g.err, g.first
            ));
            self.res
                .log_findings
                .push((w, target.to_owned(), rep, g.warn, g.err, g.first));
        }
    }

    /// Notes every measured process that is gone.
    fn check_alive(&mut self, targets: &[Target]) {
        for t in targets {
            if let Some(pid) = t.pid
                && !proc::alive(pid)
            {
                self.res
                    .problems
                    .push(format!("{} (pid {pid}) is no longer running", t.name));
            }
        }
    }
}

/// Runs the suite and writes the report; `Ok(false)` when a measurement failed.
pub async fn run(args: SuiteArgs) -> std::io::Result<bool> {
    client::check_loopback(args.origin)?;
    let raw = Raw::create(args.raw.as_deref())?;
    let load = load(&args)?;
    let (targets, egress) = targets(&args).await?;
    sanity(&targets, &load).await?;
    let mut run = Run {
        raw,
        watch: args.egressgate_log.clone().map(LogWatch::new),
        res: Results {
            targets: targets.iter().map(|t| t.name.clone()).collect(),
            ..Results::default()
        },
    };
    let jobs = REQUEST_WORKLOADS
        .iter()
        .map(|&(w, kind, _)| (w, Job::Requests(kind)))
        .chain([
            (5, Job::Bulk { streams: 1 }),
            (
                6,
                Job::Bulk {
                    streams: args.bulk_streams,
                },
            ),
        ]);
    for (w, job) in jobs {
        if args.workloads.contains(&w) {
            repeated(&args, &targets, &load, &mut run, w, job).await;
        }
    }
    if args.workloads.contains(&8)
        && let Some(control) = &egress
        && let Some(eg) = targets.iter().find(|t| t.name == "egressgate")
    {
        refusals(&args, eg, control, &load, &mut run).await?;
        run.check_alive(&targets);
    }
    if args.workloads.contains(&7) {
        idle(&args, &targets, egress.as_ref(), &load, &mut run).await?;
        run.check_alive(&targets);
    }

    let (text, ok) = report::render(&args, &run.res);
    if let Some(p) = &args.out {
        std::fs::write(p, &text)?;
    }
    println!("{text}");
    Ok(ok)
}

/// The common parameters of every measurement.
fn load(args: &SuiteArgs) -> std::io::Result<Load> {
    Ok(Load {
        origin: args.origin,
        host: args.host.clone(),
        path: "/small".into(),
        conns: args.pace.conns,
        duration: Duration::from_secs_f64(args.pace.duration),
        max_requests: args.max_requests,
        expect_status: 200,
        tls: match (&args.tls_origin, &args.tls_cert) {
            (Some(origin), Some(cert)) => {
                client::check_loopback(*origin)?;
                Some(work::TlsLoad::new(*origin, std::fs::read(cert)?)?)
            }
            _ => None,
        },
    })
}

/// "direct" and every `--proxy`; egressgate's gets a turn credential.
async fn targets(args: &SuiteArgs) -> std::io::Result<(Vec<Target>, Option<Control>)> {
    let mut targets = vec![Target {
        name: "direct".into(),
        proxy: None,
        pid: None,
        auth: None,
        host: None,
    }];
    let mut egress = None;
    for p in &args.proxies {
        let mut t = p.clone();
        if t.name == "egressgate" {
            let control = args
                .control
                .ok_or_else(|| std::io::Error::other("--control is needed for egressgate"))?;
            client::check_loopback(control)?;
            let token = control::runtime_token()?;
            let turn = control::open_turn(control, &token, "bench-load", &[&args.host]).await?;
            t.auth = Some(turn.auth);
            egress = Some((control, token));
        }
        targets.push(t);
    }
    Ok((targets, egress))
}

/// Every target answers a forwarded GET and a GET inside a tunnel (and over TLS when there
/// is a TLS origin) before anything is measured.
async fn sanity(targets: &[Target], load: &Load) -> std::io::Result<()> {
    for t in targets {
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
    Ok(())
}

/// Workload `w` against every target, `--reps` times.
async fn repeated(
    args: &SuiteArgs,
    targets: &[Target],
    load: &Load,
    run: &mut Run,
    w: u8,
    job: Job,
) {
    for rep in 0..args.pace.reps {
        for i in 0..targets.len() {
            // Rotate the order per repetition so background load spreads evenly.
            let t = &targets[(i + rep) % targets.len()];
            let m = match job {
                Job::Requests(kind) => work::requests(t, kind, load).await,
                Job::Bulk { streams } => {
                    let limit = Duration::from_secs_f64(args.bulk_limit);
                    work::bulk(t, load, streams, args.bulk_mib, limit).await
                }
            };
            run.raw.line(&describe(w, &t.name, rep, &m));
            run.res.runs.push((w, t.name.clone(), m));
            run.settle(PAUSE, w, &t.name, rep).await;
        }
    }
    run.check_alive(targets);
}

/// Workload 8: keep-alive GETs to a host nobody approved, on a fresh turn per repetition; the
/// 403s received are compared with the refusals the control plane recorded.
async fn refusals(
    args: &SuiteArgs,
    eg: &Target,
    (control, token): &Control,
    load: &Load,
    run: &mut Run,
) -> std::io::Result<()> {
    for rep in 0..args.pace.reps {
        let chat = format!("bench-refusals-{rep}");
        let turn = control::open_turn(*control, token, &chat, &[&args.host]).await?;
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
        run.raw.line(&format!(
            "{} recorded={recorded:?}",
            describe(8, "egressgate", rep, &m)
        ));
        run.res.refusals.push((m, recorded));
        run.settle(PAUSE, 8, "egressgate", rep).await;
    }
    Ok(())
}

/// Workload 7: `--idle` idle tunnels against every proxy (and `--idle-egressgate` more
/// against egressgate, spread over turns below the per-turn cap), the proxy's RSS with them.
async fn idle(
    args: &SuiteArgs,
    targets: &[Target],
    egress: Option<&Control>,
    load: &Load,
    run: &mut Run,
) -> std::io::Result<()> {
    let settle = Duration::from_secs_f64(args.idle_settle);
    for t in targets.iter().filter(|t| t.proxy.is_some()) {
        let mut counts = vec![args.idle];
        if t.name == "egressgate" && args.idle_egressgate != args.idle {
            counts.push(args.idle_egressgate);
        }
        for n in counts {
            // egressgate's tunnels are spread over many turns, each below the per-turn cap.
            let mut auths = Vec::new();
            if t.name == "egressgate"
                && let Some((control, token)) = egress
            {
                for i in 0..n.div_ceil(args.idle_per_turn.max(1)) {
                    let label = format!("bench-idle-{n}-{i}");
                    let turn = control::open_turn(*control, token, &label, &[&args.host]).await?;
                    auths.push(turn.auth);
                }
            }
            let r = work::idle(t, load, n, settle, &auths).await;
            run.raw.line(&raw::describe_idle(t, n, auths.len(), &r));
            run.res.idle.push((t.name.clone(), r));
            // Let the proxy notice the closes before the next run.
            run.settle(Duration::from_secs(2), 7, &t.name, 0).await;
        }
    }
    Ok(())
}
