//! `loadgen gate`: the approval gate's own latencies, as a sandbox and a person meet them.
//!
//! - click to first allowed byte: from sending the resume that approves a card to the
//!   sandbox's next request for that host answered `200` (a new connection, as a refused
//!   script's retry is), through `--proxy2`;
//! - revoke to closed: from sending `DELETE` of the approval to the open tunnel's close (the
//!   tunnel through `--proxy2`, opened and carrying a `GET` first);
//! - an expiring grant: from a user-scope approval's `expires_at` to its open tunnel's close
//!   (the deployment runs with a short `--user-grant-ttl`; these trials wait for it, in
//!   batches).
//!
//! With two proxies and a control process on one PostgreSQL (bench/gate.sh), the refusal is
//! made through `--proxy`, the 200 and the tunnel through `--proxy2`, the decisions through
//! `--control`: every step crosses processes.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::AsyncReadExt as _;

use crate::cards::{self, Card};
use crate::client::{self, Conn};
use crate::control::{self, Caller};

/// What `gate` needs.
#[derive(clap::Parser, Clone, Debug)]
pub struct GateArgs {
    /// The proxy the first (refused) request goes through.
    #[arg(long)]
    pub proxy: SocketAddr,
    /// The proxy of the request after the click and of the tunnels (default: `--proxy`).
    #[arg(long)]
    pub proxy2: Option<SocketAddr>,
    /// egressgate's control plane.
    #[arg(long)]
    pub control: SocketAddr,
    /// The host the sandbox asks for (the proxies resolve it to the origin).
    #[arg(long, default_value = "bench.example.com")]
    pub host: String,
    /// The origin's port.
    #[arg(long)]
    pub port: u16,
    /// Click and revoke trials (one after another).
    #[arg(long, default_value_t = 200)]
    pub trials: usize,
    /// Untimed click and revoke trials first (connection pools filled, code paths warm).
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Expiring-grant trials.
    #[arg(long, default_value_t = 60)]
    pub expiry_trials: usize,
    /// Expiring-grant trials run at once (each waits for its grant's expiry).
    #[arg(long, default_value_t = 20)]
    pub expiry_batch: usize,
    /// Distinguishes this run's users and chats from another's on the same database.
    #[arg(long, default_value = "run")]
    pub label: String,
}

/// Longest a trial waits for a tunnel to close before it counts as failed.
const CLOSE_LIMIT: Duration = Duration::from_secs(30);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A GET of `/small` on the host through `proxy` on a new connection, absolute form.
async fn get(a: &GateArgs, proxy: SocketAddr, auth: &str) -> io::Result<u16> {
    let mut c = Conn::connect(proxy).await?;
    let req = format!(
        "GET http://{h}:{p}/small HTTP/1.1\r\nHost: {h}:{p}\r\nProxy-Authorization: {auth}\r\nConnection: close\r\n\r\n",
        h = a.host,
        p = a.port
    );
    Ok(c.exchange(req.as_bytes()).await?.0.status)
}

/// A tunnel to the host through `--proxy2` that carried one `GET` (so it is established,
/// decided and registered).
async fn tunnel(a: &GateArgs, auth: &str) -> io::Result<Conn> {
    let mut c = Conn::connect(a.proxy2.unwrap_or(a.proxy)).await?;
    let (h, p) = (&a.host, a.port);
    let req =
        format!("CONNECT {h}:{p} HTTP/1.1\r\nHost: {h}:{p}\r\nProxy-Authorization: {auth}\r\n\r\n");
    c.send(req.as_bytes()).await?;
    let head = c.read_head(true).await?;
    if head.status != 200 {
        return Err(io::Error::other(format!(
            "CONNECT answered {}",
            head.status
        )));
    }
    let get = format!("GET /small HTTP/1.1\r\nHost: {h}:{p}\r\n\r\n");
    let (head, _) = c.exchange(get.as_bytes()).await?;
    if head.status != 200 {
        return Err(io::Error::other(format!(
            "GET in the tunnel answered {}",
            head.status
        )));
    }
    Ok(c)
}

/// Waits for the proxy to close the tunnel; fails if it carries bytes or outlives the limit.
async fn closed(c: &mut Conn) -> io::Result<()> {
    let mut buf = [0u8; 512];
    match tokio::time::timeout(CLOSE_LIMIT, c.stream.read(&mut buf)).await {
        Ok(Ok(0)) => Ok(()),
        // A reset is a close too.
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
        Ok(Ok(n)) => Err(io::Error::other(format!(
            "{n} unexpected bytes in the tunnel"
        ))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("the tunnel stayed open")),
    }
}

/// A turn of (user, chat) refused the host once through `--proxy`, and its card asking for
/// it: (the turn, the card).
async fn refused_and_asked(
    a: &GateArgs,
    who: Caller<'_>,
    chat: &str,
) -> io::Result<(control::Turn, Card)> {
    let turn = control::open_turn_for(a.control, who, chat, &[]).await?;
    let status = get(a, a.proxy, &turn.auth).await?;
    if status != 403 {
        return Err(io::Error::other(format!(
            "the first GET answered {status} (expected 403)"
        )));
    }
    let url = format!("http://{}:{}/small", a.host, a.port);
    let card = cards::ask(a.control, who, &turn.id, &url).await?;
    Ok((turn, card))
}

/// One click trial and one revoke trial on the same approval: (click ms, revoke ms).
async fn click_then_revoke(a: &GateArgs, token: &str, i: usize) -> io::Result<(f64, f64)> {
    let user = format!("gate-{}", a.label);
    let who = Caller::Runtime { token, user: &user };
    let chat = format!("click-{i}");
    let (turn, card) = refused_and_asked(a, who, &chat).await?;
    let t0 = Instant::now();
    let claim = cards::resume(a.control, &card, r#"{"approved":true}"#).await?;
    let status = get(a, a.proxy2.unwrap_or(a.proxy), &turn.auth).await?;
    let click = t0.elapsed();
    if status != 200 {
        return Err(io::Error::other(format!(
            "the GET after the click answered {status}"
        )));
    }
    cards::complete(a.control, &card, &claim).await?;
    let mut t = tunnel(a, &turn.auth).await?;
    let t0 = Instant::now();
    cards::revoke(a.control, who, &chat, &a.host).await?;
    closed(&mut t).await?;
    Ok((ms(click), ms(t0.elapsed())))
}

/// One expiring-grant trial: how long after its user-scope approval's expiry the tunnel it
/// let through closed, in ms.
async fn expiring(a: &GateArgs, token: &str, i: usize) -> io::Result<f64> {
    let user = format!("gate-{}-exp-{i}", a.label);
    let who = Caller::Runtime { token, user: &user };
    let (turn, card) = refused_and_asked(a, who, "c").await?;
    let claim = cards::resume(a.control, &card, r#"{"approved":true,"scope":"user"}"#).await?;
    cards::complete(a.control, &card, &claim).await?;
    let mut t = tunnel(a, &turn.auth).await?;
    let expires = cards::user_grant_expiry(a.control, who, &a.host).await?;
    closed(&mut t).await?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(io::Error::other)?;
    Ok(ms(now) - expires as f64)
}

/// Runs the trials and prints one line: `click_p50_ms=… click_p99_ms=… revoke_p50_ms=…
/// revoke_p99_ms=… expiry_p50_ms=… expiry_p99_ms=… trials=… expiry_trials=…`.
pub async fn run(a: GateArgs) -> io::Result<()> {
    for addr in [a.proxy, a.control].into_iter().chain(a.proxy2) {
        client::check_loopback(addr)?;
    }
    let token = control::runtime_token()?;
    let (mut click, mut revoke) = (Vec::new(), Vec::new());
    for i in 0..a.warmup + a.trials {
        let (c, r) = click_then_revoke(&a, &token, i)
            .await
            .map_err(|e| io::Error::other(format!("click/revoke trial {i}: {e}")))?;
        if i >= a.warmup {
            click.push(c);
            revoke.push(r);
        }
    }
    let mut expiry = Vec::new();
    let mut next = 0;
    while next < a.expiry_trials {
        let batch: Vec<_> = (next..a.expiry_trials.min(next + a.expiry_batch.max(1)))
            .map(|i| {
                let (a, token) = (a.clone(), token.clone());
                tokio::spawn(async move { (i, expiring(&a, &token, i).await) })
            })
            .collect();
        for h in batch {
            let (i, r) = h.await.map_err(io::Error::other)?;
            expiry.push(r.map_err(|e| io::Error::other(format!("expiry trial {i}: {e}")))?);
            next += 1;
        }
    }
    for v in [&mut click, &mut revoke, &mut expiry] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "click_p50_ms={:.1} click_p99_ms={:.1} revoke_p50_ms={:.1} revoke_p99_ms={:.1} \
         expiry_p50_ms={:.1} expiry_p99_ms={:.1} trials={} expiry_trials={}",
        pct(&click, 0.5),
        pct(&click, 0.99),
        pct(&revoke, 0.5),
        pct(&revoke, 0.99),
        pct(&expiry, 0.5),
        pct(&expiry, 0.99),
        click.len(),
        expiry.len()
    );
    Ok(())
}
