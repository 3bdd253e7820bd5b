//! CONNECT tunnels: answer `200`, read the client's first bytes, refuse domain fronting
//! (an SNI that is not the CONNECT host, or none on 443 when SNI is required), then dial the
//! vetted addresses and relay. The origin is only dialled after the SNI check passed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use egressgate_store::db::refusals::EgressEvent;
use egressgate_store::{Grant, Host, RefusalReason, Timestamp};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::handler::{Refusal, Shared};
use crate::identify::{ActiveGuard, TurnEntry};
use crate::relay::{self, End};
use crate::relay_tcp;
use crate::respond::{self, ProxyBody};
use crate::revoke::Stop;
use crate::server::ConnGuard;
use crate::sni::{self, Hello};
use crate::target::Target;

/// How long a non-443 tunnel waits for the client to speak first before assuming a
/// server-first protocol and relaying without an SNI check.
const FIRST_BYTES_WAIT: Duration = Duration::from_millis(500);

/// Answers `200` and moves the rest of the tunnel's life to its own task. The tunnel ends at
/// the latest when its turn's credential or the `grant` that allowed it expires, and at once
/// when a revocation leaves nothing that allows it (the `grant` was decided under cache epoch
/// `decided`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn start(
    shared: Arc<Shared>,
    turn: Arc<TurnEntry>,
    guard: ActiveGuard,
    grant: &Grant,
    decided: Option<i64>,
    target: Target,
    addrs: Vec<SocketAddr>,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let ends_at = grant
        .expires_at
        .map_or(turn.turn.expires_at, |g| g.min(turn.turn.expires_at));
    // The tunnel counts as an open connection until it ends, although hyper's connection
    // future finishes at the upgrade.
    let (conn_guard, _) = ConnGuard::new(&shared.active);
    let stop = Arc::new(Stop::default());
    let registration = shared.registry.register(
        &turn.turn,
        &target.host,
        grant,
        stop.clone(),
        decided,
        &shared.epoch,
    );
    // Only the upgrade handle moves into the task (a captured request would sit in the task's
    // memory for the tunnel's whole life).
    let upgrade = hyper::upgrade::on(req);
    tokio::spawn(async move {
        let _guards = (guard, conn_guard, registration);
        let upgraded = match upgrade.await {
            Ok(u) => u,
            Err(e) => return tracing::debug!(error = %e, "CONNECT upgrade failed"),
        };
        let idle = shared.settings.idle_timeout;
        // A plain TCP client (no TLS listener) gets the zero-copy, buffer-free relay.
        match upgraded.downcast::<TokioIo<TcpStream>>() {
            Ok(parts) => {
                // Copy what hyper read ahead and let its buffer go now: the `Bytes` shares
                // hyper's whole 8 KiB read buffer, which would otherwise live as long as the
                // tunnel (most of an idle tunnel's memory, measured in bench/).
                let hyper::upgrade::Parts { io, read_buf, .. } = parts;
                let first = read_buf.to_vec();
                drop(read_buf);
                let client = io.into_inner();
                let relay = |client, origin| {
                    relay_tcp::relay_tcp(
                        client,
                        origin,
                        idle,
                        deadline_at(ends_at),
                        stopped(&shared, &stop),
                    )
                };
                run(&shared, &turn, &target, &addrs, client, first, relay, &stop).await;
            }
            Err(upgraded) => {
                let client = TokioIo::new(upgraded);
                let relay = |client, origin| {
                    let stop = stopped(&shared, &stop);
                    relay::relay(client, origin, idle, deadline_at(ends_at), stop)
                };
                run(
                    &shared,
                    &turn,
                    &target,
                    &addrs,
                    client,
                    Vec::new(),
                    relay,
                    &stop,
                )
                .await;
            }
        }
    });
    Response::new(respond::empty())
}

/// Opens the tunnel (ClientHello check, then the dial), relays with `relay` and reports.
/// Both phases are boxed, so a long-lived tunnel task holds only the relay's state (measured:
/// 2.4 KiB with the relay inline against 1 KiB for the relay alone).
#[allow(clippy::too_many_arguments)]
async fn run<C, R, F>(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    addrs: &[SocketAddr],
    client: C,
    first: Vec<u8>,
    relay: R,
    revoked: &Stop,
) where
    C: AsyncRead + Unpin,
    R: FnOnce(C, TcpStream) -> F,
    F: std::future::Future<Output = relay::Totals>,
{
    if let Some((client, origin)) = Box::pin(open(shared, turn, target, addrs, client, first)).await
    {
        let totals = Box::pin(relay(client, origin)).await;
        finish(shared, turn, target, totals, revoked.is_stopped());
    }
}

/// Outcome of looking at the first client bytes.
enum Check {
    Pass,
    Refuse,
    Gone,
}

/// Checks the ClientHello, then dials the origin and hands it the bytes read so far.
async fn open<C>(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    addrs: &[SocketAddr],
    mut client: C,
    mut first: Vec<u8>,
) -> Option<(C, TcpStream)>
where
    C: AsyncRead + Unpin,
{
    match check_hello(shared, target, &mut client, &mut first).await {
        Check::Pass => {}
        Check::Gone => return None,
        Check::Refuse => {
            shared
                .record_refusal(Refusal {
                    turn,
                    host: target.host.as_str(),
                    port: target.port,
                    reason: RefusalReason::SniMismatch,
                    url: None,
                })
                .await;
            return None;
        }
    }
    let mut origin = match shared.dialer.connect(&target.host, addrs).await {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(error = %e, turn_id = %turn.turn.id, "tunnel upstream connect failed");
            return None;
        }
    };
    origin.write_all(&first).await.ok()?;
    shared.metrics.active_tunnels.inc();
    Some((client, origin))
}

/// Resolves when the tunnel must stop: drained, or revoked.
fn stopped(shared: &Shared, stop: &Stop) -> impl std::future::Future<Output = ()> + use<> {
    let drained = drained(shared);
    let revoked = stop.stopped();
    async move {
        tokio::select! {
            () = drained => {}
            () = revoked => {}
        }
    }
}

/// Resolves when the process has been draining for the drain timeout.
fn drained(shared: &Shared) -> impl std::future::Future<Output = ()> + use<> {
    let mut draining = shared.draining.clone();
    let drain = shared.settings.drain_timeout;
    async move {
        let _ = draining.wait_for(|d| *d).await.map(|_| ());
        tokio::time::sleep(drain).await;
    }
}

/// Metrics, the end-of-tunnel log line and the egress summary.
fn finish(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    totals: relay::Totals,
    revoked: bool,
) {
    shared.metrics.active_tunnels.dec();
    shared.metrics.bytes_up.inc_by(totals.up);
    shared.metrics.bytes_down.inc_by(totals.down);
    if revoked {
        tracing::info!(end = "revoked", turn_id = %turn.turn.id, host = target.host.as_str(), "tunnel closed");
    } else if totals.end != End::Closed {
        tracing::info!(end = ?totals.end, turn_id = %turn.turn.id, host = target.host.as_str(), "tunnel closed");
    }
    shared.recorder.egress(EgressEvent {
        turn: turn.turn.id.clone(),
        host: target.host.clone(),
        connections: 1,
        bytes_up: i64::try_from(totals.up).unwrap_or(i64::MAX),
        bytes_down: i64::try_from(totals.down).unwrap_or(i64::MAX),
        at: Timestamp::now(),
    });
}

/// Reads until the ClientHello is complete (or it is clearly not TLS) and judges its SNI.
/// Once the first bytes look like TLS, only a parsed hello whose SNI is the CONNECT host (or,
/// off port 443 or with `require-sni` off, a parsed hello without SNI) passes: a stalled,
/// oversized or unparseable hello is refused on every port, since a real TLS server might
/// still accept it. Bytes go straight into `buf` (no stack buffer), so a waiting tunnel task
/// stays small.
async fn check_hello<C: AsyncRead + Unpin>(
    shared: &Shared,
    target: &Target,
    client: &mut C,
    buf: &mut Vec<u8>,
) -> Check {
    let tls_port = target.port == 443;
    let sni_required = tls_port && shared.settings.require_sni;
    let first_wait = if tls_port {
        shared.settings.client_hello_timeout
    } else {
        FIRST_BYTES_WAIT
    };
    let deadline = tokio::time::Instant::now() + shared.settings.client_hello_timeout;
    loop {
        if !buf.is_empty() {
            match sni::inspect(buf) {
                Hello::Incomplete => {}
                Hello::Malformed => return Check::Refuse,
                Hello::NotTls | Hello::NoSni => {
                    return if sni_required {
                        Check::Refuse
                    } else {
                        Check::Pass
                    };
                }
                Hello::Sni(name) => {
                    return match Host::parse(&name) {
                        Ok(h) if h == target.host => Check::Pass,
                        _ => Check::Refuse,
                    };
                }
            }
        }
        let wait = if buf.is_empty() {
            tokio::time::Instant::now() + first_wait
        } else {
            deadline
        };
        buf.reserve(4096);
        match tokio::time::timeout_at(wait, client.read_buf(buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Check::Gone,
            Ok(Ok(_)) => {}
            // Silence from the client: a server-first protocol may proceed off port 443.
            Err(_) if buf.is_empty() => {
                return if sni_required {
                    Check::Refuse
                } else {
                    Check::Pass
                };
            }
            // A hello that started but never finished.
            Err(_) => return Check::Refuse,
        }
    }
}

/// The timer instant of wall-clock time `at` (now, if it has passed).
fn deadline_at(at: Timestamp) -> tokio::time::Instant {
    let left = at.millis() - Timestamp::now().millis();
    tokio::time::Instant::now() + Duration::from_millis(u64::try_from(left).unwrap_or(0))
}
