//! `loadgen miss`: cache-miss decisions per second. Every request names a host its turn has
//! never named, so nothing in the proxy's memory decides it: the proxy asks the database and
//! records the refusal (a `403` is only sent once the refusal is committed). Turns are opened
//! before the clock starts; each client takes the next unused turn, opens a connection for it
//! and sends `--per-turn` requests for as many new hosts (below the per-turn refusal cap, so
//! every one is a real record), then takes the next turn. With two proxy processes the
//! clients alternate between them. One table row per repetition, and where the CPU went: the
//! proxies, the database server (PostgreSQL's process tree, when given) and the load
//! generator itself, so the row says when the database is the limit.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::{self, Conn};
use crate::control::{self, Turn};
use crate::rows::{self, Cpu};
use crate::work::{Meas, REQUEST_TIMEOUT, measured};

/// What `miss` needs.
#[derive(clap::Parser, Clone, Debug)]
pub struct MissArgs {
    /// A proxy process: ADDR,PID (repeat for several processes on one database).
    #[arg(long = "proxy", value_parser = rows::parse_proc, required = true)]
    pub proxies: Vec<(SocketAddr, u32)>,
    /// The control plane that opens the turns.
    #[arg(long)]
    pub control: SocketAddr,
    /// The database server's process (PostgreSQL's postmaster): its tree's CPU is reported.
    #[arg(long, conflicts_with = "db_in_proxy")]
    pub db_pid: Option<u32>,
    /// The database runs inside the proxy (SQLite): its CPU is the proxy's.
    #[arg(long)]
    pub db_in_proxy: bool,
    /// Port in the refused URLs (an allowed port, so the refusal is `not_approved`).
    #[arg(long)]
    pub port: u16,
    /// The setup, as the table's first column says it.
    #[arg(long)]
    pub setup: String,
    /// Distinguishes this run's chats and hosts from another's.
    #[arg(long, default_value = "miss")]
    pub label: String,
    /// Clients, seconds per repetition, repetitions.
    #[command(flatten)]
    pub pace: crate::args::Pace,
    /// New hosts per turn (below `max-refusals-per-turn`, 256 by default).
    #[arg(long, default_value_t = 200)]
    pub per_turn: usize,
    /// Turns opened per repetition (the most decisions a repetition can make is this times
    /// `--per-turn`).
    #[arg(long, default_value_t = 400)]
    pub turns: usize,
    /// Print the section's title and the table head first.
    #[arg(long)]
    pub with_head: bool,
}

/// Refusals answered per turn index, to check one turn's record afterwards.
type Answered = Arc<Mutex<HashMap<usize, u64>>>;

/// What every client of one repetition shares.
struct Shared {
    turns: Vec<Turn>,
    next: AtomicUsize,
    answered: Answered,
    per_turn: usize,
    port: u16,
    label: String,
    deadline: Instant,
}

/// One client: a turn at a time, a connection per turn, a new host per request.
async fn client(proxy: SocketAddr, s: Arc<Shared>) -> Meas {
    let mut m = Meas::default();
    while Instant::now() < s.deadline {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        let Some(turn) = s.turns.get(i) else { break };
        let mut conn = match Conn::connect(proxy).await {
            Ok(c) => c,
            Err(e) => {
                m.errors += 1;
                m.problem(format!("connect: {e}"));
                continue;
            }
        };
        m.conns += 1;
        let mut refused = 0;
        for h in 0..s.per_turn {
            if Instant::now() >= s.deadline {
                break;
            }
            let host = format!("h{h}.t{i}.{}.miss.example.net", s.label);
            let req = format!(
                "GET http://{host}:{port}/x HTTP/1.1\r\nHost: {host}:{port}\r\nProxy-Authorization: {}\r\n\r\n",
                turn.auth,
                port = s.port
            );
            let t0 = Instant::now();
            let r = tokio::time::timeout(REQUEST_TIMEOUT, conn.exchange(req.as_bytes())).await;
            let us = u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX);
            match r {
                Ok(Ok((head, _))) => {
                    m.lat_us.push(us);
                    if head.status == 403 {
                        m.ok += 1;
                        refused += 1;
                    } else {
                        m.bad_status += 1;
                        m.problem(format!("status {} (expected 403)", head.status));
                    }
                    if head.close {
                        break;
                    }
                }
                Ok(Err(e)) => {
                    m.errors += 1;
                    m.problem(format!("{e}"));
                    break;
                }
                Err(_) => {
                    m.errors += 1;
                    m.problem(format!("request timed out after {REQUEST_TIMEOUT:?}"));
                    break;
                }
            }
        }
        if let Ok(mut a) = s.answered.lock() {
            a.insert(i, refused);
        }
    }
    m
}

/// Opens `n` turns for chats `{label}-r{rep}-{i}`, eight at a time.
async fn open_turns(a: &MissArgs, token: &str, rep: usize) -> std::io::Result<Vec<Turn>> {
    let mut turns = Vec::with_capacity(a.turns);
    for start in (0..a.turns).step_by(8) {
        let batch = (start..(start + 8).min(a.turns)).map(|i| {
            let chat = format!("{}-r{rep}-{i}", a.label);
            let (control, token) = (a.control, token.to_owned());
            tokio::spawn(async move { control::open_turn(control, &token, &chat, &[]).await })
        });
        for h in batch.collect::<Vec<_>>() {
            turns.push(h.await.map_err(std::io::Error::other)??);
        }
    }
    Ok(turns)
}

/// Runs the repetitions and prints the table rows (and the head with `--with-head`); `Ok(false)`
/// when a repetition failed or a turn's record does not match what it was answered.
pub async fn run(a: MissArgs) -> std::io::Result<bool> {
    client::check_loopback(a.control)?;
    for (addr, _) in &a.proxies {
        client::check_loopback(*addr)?;
    }
    let token = control::runtime_token()?;
    if a.with_head {
        println!(
            "\n## Cache-miss decisions (egressgate)\n\nEvery request names a host its turn has never named ({} new hosts per turn, a connection per turn, {} clients, {} s per repetition): nothing in memory decides it, so the proxy asks the database and commits the refusal before the `403` goes out. Turns are opened before the clock starts. CPU is each group's user+system time over the repetition, in cores (the machine has {}): where the database runs in its own processes, its share says when it is the limit. Recorded: `GET /v1/turns/{{id}}/refusals` of the first turn against the 403s it was sent.\n\n| setup | repetition | decisions/s | p50 / p99 ms | proxy CPU µs per decision | database CPU µs per decision | CPU cores used: proxies / database / load generator | first turn: 403s / recorded |\n|---|---:|---:|---:|---:|---:|---|---:|",
            a.per_turn,
            a.pace.conns,
            a.pace.duration,
            rows::cores()
        );
    }
    let mut ok = true;
    let mut rates = Vec::new();
    for rep in 0..a.pace.reps {
        let turns = open_turns(&a, &token, rep).await?;
        let first = turns.first().map(|t| t.id.clone());
        let shared = Arc::new(Shared {
            turns,
            next: AtomicUsize::new(0),
            answered: Answered::default(),
            per_turn: a.per_turn,
            port: a.port,
            label: format!("{}r{rep}", a.label),
            deadline: Instant::now() + Duration::from_secs_f64(a.pace.duration),
        });
        let proxies: Vec<u32> = a.proxies.iter().map(|(_, p)| *p).collect();
        let cpu = Cpu::start(&proxies, a.db_pid);
        let none = rows::unmeasured("miss");
        let m = measured(&none, |_| {
            (0..a.pace.conns)
                .map(|k| tokio::spawn(client(a.proxies[k % a.proxies.len()].0, shared.clone())))
                .collect()
        })
        .await;
        let used = cpu.stop(m.elapsed);
        let sent = shared
            .answered
            .lock()
            .map_or(0, |h| h.get(&0).copied().unwrap_or(0));
        let recorded = match &first {
            Some(id) => control::refusal_count(a.control, &token, id)
                .await
                .map(|(n, _)| n),
            None => Ok(0),
        };
        let held = matches!(&recorded, Ok(n) if *n == sent) && !m.failed();
        ok &= held;
        rates.push(m.rate());
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {sent} / {}{} |",
            a.setup,
            rep + 1,
            rows::num(m.rate()),
            rows::p50_p99(&m),
            rows::per_req(used.proxies, &m),
            rows::per_req(used.db, &m),
            used.cores(if a.db_in_proxy {
                "in the proxy"
            } else {
                "not measured"
            }),
            recorded.map_or_else(|e| format!("error: {e}"), |n| n.to_string()),
            if held { "" } else { " ⚠" },
        );
        if let Some(p) = &m.first_problem {
            eprintln!("miss {} rep{rep}: first problem: {p}", a.setup);
        }
    }
    println!(
        "| {} | median | {} | | | | | |",
        a.setup,
        rows::num(crate::report::median(rates).unwrap_or(0.0))
    );
    Ok(ok)
}
