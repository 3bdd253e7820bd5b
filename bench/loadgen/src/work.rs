//! The workloads: request loops (forwarded or tunnelled, new connection or keep-alive), bulk
//! downloads, idle tunnels with RSS sampling. Every loop is bounded by a deadline and a count.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::Conn;
use crate::proc;

/// One request may take this long (connect, CONNECT, request, answer) before it is an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where requests go.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    /// `None`: straight to the origin (the physical limit).
    pub proxy: Option<SocketAddr>,
    pub pid: Option<u32>,
    /// `Proxy-Authorization` value (egressgate only).
    pub auth: Option<String>,
    /// The host this target's requests name instead of the load's (the peers get the
    /// origin's IP address, so they resolve nothing).
    pub host: Option<String>,
}

/// What the requests ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Absolute-form GET through the proxy, one connection per request.
    FwdClose,
    /// Absolute-form GETs, many per client connection.
    FwdKeep,
    /// CONNECT, one GET inside, close.
    TunClose,
    /// CONNECT once, many GETs inside.
    TunKeep,
    /// CONNECT to the TLS origin, a TLS 1.3 handshake inside (the certificate verified), one
    /// GET, close. Direct: TCP connect + the same handshake and GET.
    TunTlsClose,
}

impl Kind {
    fn tunnel(self) -> bool {
        matches!(self, Kind::TunClose | Kind::TunKeep | Kind::TunTlsClose)
    }
    fn keep(self) -> bool {
        matches!(self, Kind::FwdKeep | Kind::TunKeep)
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

/// Common parameters of one measurement.
#[derive(Clone, Debug)]
pub struct Load {
    pub origin: SocketAddr,
    /// Host name the requests name (the proxies resolve it to the origin).
    pub host: String,
    pub path: String,
    pub conns: usize,
    pub duration: Duration,
    pub max_requests: u64,
    pub expect_status: u16,
    /// The origin's TLS listener, for [`Kind::TunTlsClose`].
    pub tls: Option<TlsLoad>,
}

/// The TLS origin and the client config that trusts its certificate.
#[derive(Clone, Debug)]
pub struct TlsLoad {
    pub origin: SocketAddr,
    pub config: Arc<rustls::ClientConfig>,
}

impl TlsLoad {
    /// A TLS 1.3-only client config that trusts exactly the origin's certificate (DER).
    pub fn new(origin: SocketAddr, cert_der: Vec<u8>) -> io::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(cert_der))
            .map_err(io::Error::other)?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Self {
            origin,
            config: Arc::new(config),
        })
    }
}

/// The result of one measurement.
#[derive(Clone, Debug, Default)]
pub struct Meas {
    /// Answers with the expected status.
    pub ok: u64,
    /// Answers with another status.
    pub bad_status: u64,
    /// I/O errors and timeouts.
    pub errors: u64,
    /// Client connections opened.
    pub conns: u64,
    /// Requests re-sent on a fresh connection because the server had closed a kept-alive one
    /// without saying so.
    pub stale_retries: u64,
    pub elapsed: f64,
    /// Sorted latencies in microseconds.
    pub lat_us: Vec<u32>,
    /// Target process CPU (user + system) during the measurement, seconds.
    pub cpu_s: Option<f64>,
    /// Body bytes received.
    pub bytes: u64,
    pub first_problem: Option<String>,
}

impl Meas {
    pub fn rate(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.ok as f64 / self.elapsed
        } else {
            0.0
        }
    }
    pub fn mib_per_s(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.bytes as f64 / 1_048_576.0 / self.elapsed
        } else {
            0.0
        }
    }
    pub fn pct_ms(&self, p: f64) -> Option<f64> {
        if self.lat_us.is_empty() {
            return None;
        }
        let idx = ((self.lat_us.len() as f64 - 1.0) * p).round() as usize;
        Some(f64::from(self.lat_us[idx]) / 1000.0)
    }
    pub fn cpu_us_per_req(&self) -> Option<f64> {
        let n = self.ok + self.bad_status;
        self.cpu_s.filter(|_| n > 0).map(|c| c * 1e6 / n as f64)
    }
    /// True when something went wrong (errors or unexpected statuses).
    pub fn failed(&self) -> bool {
        self.errors > 0 || self.bad_status > 0 || self.ok == 0
    }
    fn merge(&mut self, o: Worker) {
        self.ok += o.ok;
        self.bad_status += o.bad_status;
        self.errors += o.errors;
        self.conns += o.conns;
        self.stale_retries += o.stale_retries;
        self.bytes += o.bytes;
        self.lat_us.extend(o.lat_us);
        if self.first_problem.is_none() {
            self.first_problem = o.first_problem;
        }
    }
}

#[derive(Default)]
struct Worker {
    ok: u64,
    bad_status: u64,
    errors: u64,
    conns: u64,
    stale_retries: u64,
    bytes: u64,
    lat_us: Vec<u32>,
    first_problem: Option<String>,
}

impl Worker {
    fn problem(&mut self, p: String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(p);
        }
    }
}

/// The origin address a workload talks to (the TLS listener for the TLS workload).
fn origin_of(kind: Kind, load: &Load) -> io::Result<SocketAddr> {
    match (kind, &load.tls) {
        (Kind::TunTlsClose, Some(tls)) => Ok(tls.origin),
        (Kind::TunTlsClose, None) => Err(io::Error::other("no TLS origin given (--tls-origin)")),
        _ => Ok(load.origin),
    }
}

fn authority(t: &Target, kind: Kind, load: &Load) -> String {
    let port = origin_of(kind, load).map_or(0, |a| a.port());
    format!("{}:{port}", t.host.as_deref().unwrap_or(&load.host))
}

/// The request bytes for one GET.
fn get_request(t: &Target, kind: Kind, load: &Load, path: &str, close: bool) -> Vec<u8> {
    let auth_line = |t: &Target| {
        t.auth
            .as_ref()
            .map(|a| format!("Proxy-Authorization: {a}\r\n"))
            .unwrap_or_default()
    };
    let conn = if close { "Connection: close\r\n" } else { "" };
    let host = authority(t, kind, load);
    let (target, auth) = if t.proxy.is_some() && !kind.tunnel() {
        (format!("http://{host}{path}"), auth_line(t))
    } else {
        (path.to_owned(), String::new())
    };
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{auth}User-Agent: egressgate-bench/0.1\r\nAccept: */*\r\n{conn}\r\n")
        .into_bytes()
}

/// Opens a client connection ready for GETs: to the origin (direct), to the proxy
/// (forwarding), or to the proxy with an established CONNECT tunnel.
pub async fn open(t: &Target, kind: Kind, load: &Load) -> io::Result<Conn> {
    let Some(proxy) = t.proxy else {
        return Conn::connect(origin_of(kind, load)?).await;
    };
    let mut c = Conn::connect(proxy).await?;
    if kind.tunnel() {
        let host = authority(t, kind, load);
        let auth = t
            .auth
            .as_ref()
            .map(|a| format!("Proxy-Authorization: {a}\r\n"))
            .unwrap_or_default();
        c.send(format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n").as_bytes())
            .await?;
        let head = c.read_head(true).await?;
        if head.status != 200 {
            let _ = c.read_body(&head).await;
            return Err(io::Error::other(format!(
                "CONNECT answered {}",
                head.status
            )));
        }
    }
    Ok(c)
}

/// Sends one GET on `conn` (opening it first when needed) and reads the whole answer.
async fn one_request(
    t: &Target,
    kind: Kind,
    load: &Load,
    req: &[u8],
    conn: &mut Option<Conn>,
    w: &mut Worker,
) -> io::Result<(u16, bool, u64)> {
    let reused = conn.is_some();
    match attempt(t, kind, load, req, conn, w).await {
        // A kept-alive connection the server had already closed: what every HTTP client does
        // is open a fresh one and send again (nothing of the answer had arrived).
        Err(e) if reused && stale(&e) => {
            *conn = None;
            w.stale_retries += 1;
            attempt(t, kind, load, req, conn, w).await
        }
        r => r,
    }
}

fn stale(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

async fn attempt(
    t: &Target,
    kind: Kind,
    load: &Load,
    req: &[u8],
    conn: &mut Option<Conn>,
    w: &mut Worker,
) -> io::Result<(u16, bool, u64)> {
    if kind == Kind::TunTlsClose {
        w.conns += 1;
        return tls_once(t, load, req).await;
    }
    if conn.is_none() {
        *conn = Some(open(t, kind, load).await?);
        w.conns += 1;
    }
    let Some(c) = conn.as_mut() else {
        return Err(io::Error::other("no connection"));
    };
    c.send(req).await?;
    let head = c.read_head(false).await?;
    let n = c.read_body(&head).await?;
    Ok((head.status, head.close, n))
}

/// One TLS request: the tunnel (or a TCP connect), the handshake with certificate
/// verification, the GET, the whole answer, and the server's close.
async fn tls_once(t: &Target, load: &Load, req: &[u8]) -> io::Result<(u16, bool, u64)> {
    let tls = load
        .tls
        .as_ref()
        .ok_or_else(|| io::Error::other("no TLS origin given (--tls-origin)"))?;
    let c = open(t, Kind::TunTlsClose, load).await?;
    let mut c = c.into_tls(&tls.config, &load.host).await?;
    c.send(req).await?;
    let head = c.read_head(false).await?;
    let n = c.read_body(&head).await?;
    c.wait_close().await;
    Ok((head.status, true, n))
}

async fn worker(
    t: Target,
    kind: Kind,
    load: Arc<Load>,
    deadline: Instant,
    count: Arc<AtomicU64>,
) -> Worker {
    let mut w = Worker {
        lat_us: Vec::with_capacity(16 * 1024),
        ..Worker::default()
    };
    let close = !kind.keep();
    let req = get_request(&t, kind, &load, &load.path, close);
    let mut conn: Option<Conn> = None;
    while Instant::now() < deadline && count.fetch_add(1, Ordering::Relaxed) < load.max_requests {
        let t0 = Instant::now();
        let r = tokio::time::timeout(
            REQUEST_TIMEOUT,
            one_request(&t, kind, &load, &req, &mut conn, &mut w),
        )
        .await;
        let us = u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX);
        match r {
            Ok(Ok((status, server_closes, n))) => {
                w.lat_us.push(us);
                w.bytes += n;
                if status == load.expect_status {
                    w.ok += 1;
                } else {
                    w.bad_status += 1;
                    w.problem(format!("status {status} (expected {})", load.expect_status));
                }
                if (close || server_closes)
                    && let Some(mut c) = conn.take()
                    && close
                {
                    c.wait_close().await;
                }
            }
            Ok(Err(e)) => {
                w.errors += 1;
                w.problem(format!("{e}"));
                conn = None;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(_) => {
                w.errors += 1;
                w.problem(format!("request timed out after {REQUEST_TIMEOUT:?}"));
                conn = None;
            }
        }
    }
    w
}

/// Runs `load.conns` clients for `load.duration` (or `load.max_requests`).
pub async fn requests(t: &Target, kind: Kind, load: &Load) -> Meas {
    let load = Arc::new(load.clone());
    let count = Arc::new(AtomicU64::new(0));
    let cpu0 = t.pid.and_then(proc::cpu_seconds);
    let start = Instant::now();
    let deadline = start + load.duration;
    let handles: Vec<_> = (0..load.conns)
        .map(|_| {
            tokio::spawn(worker(
                t.clone(),
                kind,
                load.clone(),
                deadline,
                count.clone(),
            ))
        })
        .collect();
    let mut m = Meas::default();
    for h in handles {
        match h.await {
            Ok(w) => m.merge(w),
            Err(e) => {
                m.errors += 1;
                m.first_problem
                    .get_or_insert(format!("worker panicked: {e}"));
            }
        }
    }
    m.elapsed = start.elapsed().as_secs_f64();
    let cpu1 = t.pid.and_then(proc::cpu_seconds);
    m.cpu_s = cpu0.zip(cpu1).map(|(a, b)| b - a);
    m.lat_us.sort_unstable();
    m
}

/// `streams` parallel downloads of `mib` MiB each through a tunnel (or straight to the
/// origin), all within `limit`.
pub async fn bulk(t: &Target, load: &Load, streams: usize, mib: u64, limit: Duration) -> Meas {
    let cpu0 = t.pid.and_then(proc::cpu_seconds);
    let start = Instant::now();
    let handles: Vec<_> = (0..streams)
        .map(|_| {
            let (t, load) = (t.clone(), load.clone());
            tokio::spawn(async move {
                let mut w = Worker::default();
                let r = tokio::time::timeout(limit, async {
                    let t0 = Instant::now();
                    let mut c = open(&t, Kind::TunKeep, &load).await?;
                    w.conns += 1;
                    let req =
                        get_request(&t, Kind::TunKeep, &load, &format!("/bulk?mib={mib}"), true);
                    c.send(&req).await?;
                    let head = c.read_head(false).await?;
                    let n = c.read_body(&head).await?;
                    Ok::<_, io::Error>((head.status, n, t0.elapsed()))
                })
                .await;
                match r {
                    Ok(Ok((status, n, took))) => {
                        w.bytes += n;
                        w.lat_us
                            .push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
                        if status == 200 && n == mib << 20 {
                            w.ok += 1;
                        } else {
                            w.bad_status += 1;
                            w.problem(format!(
                                "status {status}, {n} bytes (expected 200, {} bytes)",
                                mib << 20
                            ));
                        }
                    }
                    Ok(Err(e)) => {
                        w.errors += 1;
                        w.problem(e.to_string());
                    }
                    Err(_) => {
                        w.errors += 1;
                        w.problem(format!("download not finished within {limit:?}"));
                    }
                }
                w
            })
        })
        .collect();
    let mut m = Meas::default();
    for h in handles {
        if let Ok(w) = h.await {
            m.merge(w);
        } else {
            m.errors += 1;
        }
    }
    m.elapsed = start.elapsed().as_secs_f64();
    let cpu1 = t.pid.and_then(proc::cpu_seconds);
    m.cpu_s = cpu0.zip(cpu1).map(|(a, b)| b - a);
    m.lat_us.sort_unstable();
    m
}

/// Idle tunnels and the proxy's memory.
#[derive(Clone, Debug, Default)]
pub struct Idle {
    pub wanted: usize,
    pub opened: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    pub checked: usize,
    pub alive: usize,
    pub open_secs: f64,
    pub first_problem: Option<String>,
}

impl Idle {
    pub fn per_tunnel_kib(&self) -> f64 {
        if self.opened == 0 {
            return 0.0;
        }
        (self.rss_after_kib as f64 - self.rss_before_kib as f64) / self.opened as f64
    }
    /// RSS extrapolated linearly to `n` tunnels.
    pub fn rss_at_kib(&self, n: usize) -> f64 {
        self.rss_before_kib as f64 + self.per_tunnel_kib() * n as f64
    }
    pub fn failed(&self) -> bool {
        self.opened < self.wanted || self.alive < self.checked
    }
}

/// Opens `n` tunnels (64 at a time), lets them settle, samples the proxy's RSS, checks that
/// a few of them still carry a GET, then closes them all. With `auths`, tunnel `i` uses
/// credential `i % auths.len()`: the tunnels are spread over many turns, as real sandboxes
/// are (one turn may hold at most `max-connections-per-turn`).
pub async fn idle(t: &Target, load: &Load, n: usize, settle: Duration, auths: &[String]) -> Idle {
    let Some(pid) = t.pid else {
        return Idle::default();
    };
    let mut out = Idle {
        wanted: n,
        rss_before_kib: proc::rss_kib(pid).unwrap_or(0),
        ..Idle::default()
    };
    let sem = Arc::new(tokio::sync::Semaphore::new(64));
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (mut t, load, sem) = (t.clone(), load.clone(), sem.clone());
            if !auths.is_empty() {
                t.auth = Some(auths[i % auths.len()].clone());
            }
            tokio::spawn(async move {
                let _permit = sem.acquire_owned().await;
                tokio::time::timeout(REQUEST_TIMEOUT, open(&t, Kind::TunKeep, &load))
                    .await
                    .unwrap_or_else(|_| Err(io::Error::other("CONNECT timed out")))
            })
        })
        .collect();
    let mut tunnels = Vec::with_capacity(n);
    for h in handles {
        match h.await {
            Ok(Ok(c)) => tunnels.push(c),
            Ok(Err(e)) => {
                out.first_problem.get_or_insert(e.to_string());
            }
            Err(e) => {
                out.first_problem.get_or_insert(e.to_string());
            }
        }
    }
    out.open_secs = start.elapsed().as_secs_f64();
    out.opened = tunnels.len();
    tokio::time::sleep(settle).await;
    out.rss_after_kib = proc::rss_kib(pid).unwrap_or(0);
    // A few tunnels, spread over the set, must still reach the origin.
    let step = (tunnels.len() / 20).max(1);
    let req = get_request(t, Kind::TunKeep, load, "/small", false);
    for c in tunnels.iter_mut().step_by(step).take(20) {
        out.checked += 1;
        let r = tokio::time::timeout(REQUEST_TIMEOUT, async {
            c.send(&req).await?;
            let h = c.read_head(false).await?;
            c.read_body(&h).await?;
            Ok::<_, io::Error>(h.status)
        })
        .await;
        match r {
            Ok(Ok(200)) => out.alive += 1,
            Ok(Ok(s)) => {
                out.first_problem
                    .get_or_insert(format!("GET in idle tunnel answered {s}"));
            }
            Ok(Err(e)) => {
                out.first_problem
                    .get_or_insert(format!("GET in idle tunnel failed: {e}"));
            }
            Err(_) => {
                out.first_problem
                    .get_or_insert("GET in idle tunnel timed out".to_owned());
            }
        }
    }
    drop(tunnels);
    out
}
