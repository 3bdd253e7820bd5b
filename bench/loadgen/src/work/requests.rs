//! The request workloads: `conns` clients each sending GETs (forwarded or in tunnels, a new
//! connection per request or kept alive, or a TLS handshake per tunnel) until the deadline or
//! the request count runs out.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::conn::{get_request, open, tls_of};
use super::load::{Kind, Load, REQUEST_TIMEOUT, Target};
use super::meas::{Meas, measured};
use crate::client::Conn;

/// One client's fixed request: where it goes, which way, and the GET's bytes.
struct Client<'a> {
    t: &'a Target,
    kind: Kind,
    load: &'a Load,
    req: Vec<u8>,
}

/// What one GET got back: status, whether the server closes after it, body bytes.
type Answer = (u16, bool, u64);

impl Client<'_> {
    /// Sends the GET on `conn` (opening it first when needed) and reads the whole answer.
    async fn get(&self, conn: &mut Option<Conn>, m: &mut Meas) -> io::Result<Answer> {
        let reused = conn.is_some();
        match self.attempt(conn, m).await {
            // A kept-alive connection the server had already closed: what every HTTP client
            // does is open a fresh one and send again (nothing of the answer had arrived).
            Err(e) if reused && stale(&e) => {
                *conn = None;
                m.stale_retries += 1;
                self.attempt(conn, m).await
            }
            r => r,
        }
    }

    async fn attempt(&self, conn: &mut Option<Conn>, m: &mut Meas) -> io::Result<Answer> {
        if self.kind == Kind::TunTlsClose {
            m.conns += 1;
            return self.tls_once().await;
        }
        if conn.is_none() {
            *conn = Some(open(self.t, self.kind, self.load).await?);
            m.conns += 1;
        }
        let Some(c) = conn.as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        let (head, n) = c.exchange(&self.req).await?;
        Ok((head.status, head.close, n))
    }

    /// One TLS request: the tunnel (or a TCP connect), the handshake with certificate
    /// verification, the GET, the whole answer, and the server's close.
    async fn tls_once(&self) -> io::Result<Answer> {
        let tls = tls_of(self.load)?;
        let c = open(self.t, Kind::TunTlsClose, self.load).await?;
        let mut c = c.into_tls(&tls.config, &self.load.host).await?;
        let (head, n) = c.exchange(&self.req).await?;
        c.wait_close().await;
        Ok((head.status, true, n))
    }
}

fn stale(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

/// One client's loop: GETs until the deadline or until the shared count reaches the limit.
async fn run_client(
    t: Target,
    kind: Kind,
    load: Arc<Load>,
    deadline: Instant,
    count: Arc<AtomicU64>,
) -> Meas {
    let mut m = Meas {
        lat_us: Vec::with_capacity(16 * 1024),
        ..Meas::default()
    };
    let close = !kind.keep();
    let client = Client {
        t: &t,
        kind,
        load: &load,
        req: get_request(&t, kind, &load, &load.path, close),
    };
    let mut conn: Option<Conn> = None;
    while Instant::now() < deadline && count.fetch_add(1, Ordering::Relaxed) < load.max_requests {
        let t0 = Instant::now();
        let r = tokio::time::timeout(REQUEST_TIMEOUT, client.get(&mut conn, &mut m)).await;
        let us = u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX);
        match r {
            Ok(Ok((status, server_closes, n))) => {
                m.lat_us.push(us);
                m.bytes += n;
                if status == load.expect_status {
                    m.ok += 1;
                } else {
                    m.bad_status += 1;
                    m.problem(format!("status {status} (expected {})", load.expect_status));
                }
                if (close || server_closes)
                    && let Some(mut c) = conn.take()
                    && close
                {
                    c.wait_close().await;
                }
            }
            Ok(Err(e)) => {
                m.errors += 1;
                m.problem(format!("{e}"));
                conn = None;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(_) => {
                m.errors += 1;
                m.problem(format!("request timed out after {REQUEST_TIMEOUT:?}"));
                conn = None;
            }
        }
    }
    m
}

/// Runs `load.conns` clients for `load.duration` (or `load.max_requests`).
pub async fn requests(t: &Target, kind: Kind, load: &Load) -> Meas {
    let load = Arc::new(load.clone());
    let count = Arc::new(AtomicU64::new(0));
    measured(t, |start| {
        let deadline = start + load.duration;
        (0..load.conns)
            .map(|_| {
                tokio::spawn(run_client(
                    t.clone(),
                    kind,
                    load.clone(),
                    deadline,
                    count.clone(),
                ))
            })
            .collect()
    })
    .await
}
