//! CONNECT tunnels: answer `200`, judge the client's first bytes against the CONNECT host
//! (`judge`: an SNI that is not the CONNECT host, or none on 443 when SNI is required, is
//! domain fronting; plain HTTP is served request by request by `plain_http`, each `Host` checked),
//! then dial the vetted addresses and relay; an inspected host's TLS is ended by the proxy and
//! served like plain HTTP, request by request. The origin is only dialled after the check
//! passed, except for a server-first protocol, whose client bytes are judged when they come.

mod account;
mod http_relay;
mod judge;
mod plain_http;
mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use egressgate_store::{Access, Grant, GrantKind, RefusalReason, Timestamp};
use http::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::decision_log::{Allowed, Line};
use crate::forward::Via;
use crate::identify::{ActiveGuard, TurnEntry};
use crate::relay::{self, End};
use crate::relay_tcp;
use crate::respond::{self, ProxyBody};
use crate::revoke::Stop;
use crate::shared::ConnGuard;
use crate::shared::{Refusal, Shared};
use crate::target::Target;
use upstream::Told;

/// How long a non-443 tunnel waits for the client to speak first before assuming a
/// server-first protocol and dialling (its client bytes are still judged when they come).
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
    allowed: Allowed,
    decided: Option<i64>,
    target: Target,
    addrs: Vec<SocketAddr>,
    upgrade: OnUpgrade,
) -> Response<ProxyBody> {
    let grant = &allowed.grant;
    let ends_at = grant
        .expires_at
        .map_or(turn.turn.expires_at, |g| g.min(turn.turn.expires_at));
    // The tunnel counts as an open connection until it ends, although hyper's connection
    // future finishes at the upgrade.
    let (conn_guard, _) = ConnGuard::new(&shared.active);
    let stop = Stop::default();
    let registration = shared.registry.register(
        &turn,
        &target.host,
        grant,
        stop.clone(),
        decided,
        &shared.epoch,
    );
    // Only the upgrade handle moves into the task (the request would sit in the task's memory
    // for the tunnel's whole life).
    tokio::spawn(async move {
        let _guards = (guard, conn_guard, registration);
        let upgraded = match upgrade.await {
            Ok(u) => u,
            Err(e) => return tracing::debug!(error = %e, "CONNECT upgrade failed"),
        };
        let idle = shared.settings.idle_timeout;
        let tunnel = Tunnel {
            shared: &shared,
            turn: &turn,
            target: &target,
            addrs: &addrs,
            ends_at,
            stop: &stop,
            allowed: &allowed,
        };
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
                    relay_tcp::relay_tcp(client, origin, idle, deadline_at(ends_at), stopped(&stop))
                };
                tunnel.run(client, first, relay).await;
            }
            Err(upgraded) => {
                let client = TokioIo::new(upgraded);
                let relay = |client, origin| {
                    let stop = stopped(&stop);
                    relay::relay(client, origin, idle, deadline_at(ends_at), stop)
                };
                tunnel.run(client, Vec::new(), relay).await;
            }
        }
    });
    Response::new(respond::empty())
}

/// One tunnel's fixed facts.
struct Tunnel<'a> {
    shared: &'a Arc<Shared>,
    turn: &'a Arc<TurnEntry>,
    target: &'a Target,
    addrs: &'a [SocketAddr],
    /// The earlier of the turn's and the grant's expiry.
    ends_at: Timestamp,
    /// Given when a revocation leaves nothing that allows the tunnel.
    stop: &'a Stop,
    /// Its decision, for its line at the end.
    allowed: &'a Allowed,
}

/// Why a tunnel never reached its relay.
enum Unopened {
    /// Its line is written already (a refusal, a failed dial).
    Logged,
    /// It ended first (the client left or never spoke, the drain or a revocation stopped its
    /// wait): its line is still owed, with how it ended and the origin dialled, if any.
    Ended(relay::Totals, Option<SocketAddr>),
}

impl Unopened {
    /// Ended by `end` after `down` bytes of a server-first banner, with `origin` dialled.
    fn ended(end: End, down: u64, origin: Option<&TcpStream>) -> Self {
        let addr = origin.and_then(|o| o.peer_addr().ok());
        Self::Ended(relay::Totals { up: 0, down, end }, addr)
    }
}

/// How an opened tunnel carries on.
enum Opened<C> {
    /// Bytes both ways; `down` bytes of a server-first banner were already relayed.
    Raw {
        client: C,
        origin: TcpStream,
        down: u64,
    },
    /// HTTP, request by request; `first` holds the bytes read so far (for [`Via::Tls`], the
    /// ClientHello of an inspected host).
    Http { client: C, first: Vec<u8>, via: Via },
}

impl Tunnel<'_> {
    /// Opens the tunnel (first-bytes check, then the dial), serves it and reports. Both
    /// phases are boxed, so a long-lived tunnel task holds only the relay's state (measured:
    /// 2.4 KiB with the relay inline against 1 KiB for the relay alone).
    async fn run<C, R, F>(&self, client: C, first: Vec<u8>, relay: R)
    where
        C: HttpClient + judge::Readable,
        R: FnOnce(C, TcpStream) -> F,
        F: std::future::Future<Output = relay::Totals>,
    {
        match Box::pin(self.open(client, first)).await {
            Ok(Opened::Raw {
                client,
                origin,
                down,
            }) => {
                self.shared.metrics.active_tunnels.inc();
                let addr = origin.peer_addr().ok();
                let mut totals = Box::pin(relay(client, origin)).await;
                totals.down += down;
                self.finish(totals, addr);
            }
            Ok(Opened::Http { client, first, via }) => {
                match client.serve_http(self, first, via).await {
                    Served::PerRequest(totals) => {
                        // Its requests had their own lines (with the addresses dialled) and
                        // egress; this one closes the tunnel's account.
                        self.shared.log.allowed(&Line {
                            end: Some(self.end_of(totals.end)),
                            ..self
                                .allowed
                                .line(200, None, Some(totals.up), Some(totals.down))
                        });
                    }
                    Served::Relayed(totals, addr) => self.finish(totals, addr),
                }
            }
            Err(Unopened::Ended(totals, addr)) => self.account(totals, addr),
            Err(Unopened::Logged) => {}
        }
    }

    /// Judges the first client bytes, then dials the origin and hands it the bytes read so
    /// far (or hands the client to the HTTP path). A silent tunnel lives inside this future
    /// (its wait for a server-first protocol), so the rare and large steps (a refusal's
    /// record, a fresh grant's read, the dial) are boxed: the future is as large as its
    /// largest step, and that would otherwise be paid by every idle tunnel.
    async fn open<C>(&self, mut client: C, mut first: Vec<u8>) -> Result<Opened<C>, Unopened>
    where
        C: judge::Readable + AsyncRead + AsyncWrite + Unpin,
    {
        let settings = &self.shared.settings;
        let tls_port = self.target.port == 443;
        let sni_required = tls_port && settings.require_sni;
        let first_wait = if tls_port {
            settings.client_hello_timeout
        } else {
            FIRST_BYTES_WAIT
        };
        let mut down = 0;
        let mut origin = None;
        if first.is_empty() {
            // The buffer is taken only once the client has something to say: ten thousand
            // silent tunnels holding 4 KiB each through this wait left 40 MiB of heap behind.
            let read = async {
                client.readable().await?;
                first.reserve(4096);
                client.read_buf(&mut first).await
            };
            match tokio::time::timeout(first_wait, read).await {
                Ok(Ok(0)) => return Err(Unopened::ended(End::Closed, 0, None)),
                Ok(Err(_)) => return Err(Unopened::ended(End::Error, 0, None)),
                Ok(Ok(_)) => {}
                // Silence: a server-first protocol may proceed off 443, but its client's
                // bytes are judged when they come.
                Err(_) if sni_required => {
                    return self.refuse(RefusalReason::SniMismatch).await;
                }
                Err(_) => {
                    first = Vec::new(); // a silent tunnel holds no read buffer
                    let mut o = self.dial(Told::Cut).await.map_err(|_| Unopened::Logged)?;
                    let ends = deadline_at(self.ends_at);
                    let idle = settings.idle_timeout;
                    // Pinned here and lent: moved into `banner`, it would take its room twice.
                    let stop = std::pin::pin!(stopped(self.stop));
                    let banner = judge::banner(&mut client, &mut o, &mut first, idle, ends, stop);
                    down = banner
                        .await
                        .map_err(|(end, down)| Unopened::ended(end, down, Some(&o)))?;
                    origin = Some(o);
                }
            }
        }
        let deadline = tokio::time::Instant::now() + settings.client_hello_timeout;
        let verdict =
            judge::read_and_judge(&mut client, &mut first, self.target, sni_required, deadline)
                .await;
        match verdict {
            judge::Verdict::Relay => {
                let tls = first.first() == Some(&0x16);
                let grant = &self.allowed.grant;
                if tls && self.shared.inspection.wants(&self.target.host, grant) {
                    let via = Via::Tls;
                    return Ok(Opened::Http { client, first, via });
                }
                // Opaque bytes to a package registry name no package: only requests the proxy
                // can read (plain HTTP here, inspected TLS) are judged package by package.
                if grant.kind == GrantKind::Registry {
                    return self.refuse(RefusalReason::PackageNotApproved).await;
                }
                // Bytes the proxy cannot see: a grant short of `full` or narrowed to paths
                // cannot be enforced on them (unless a fresh approval has widened it since it
                // was remembered).
                if let Some(reason) = opaque_refusal(grant) {
                    let fresh = self.shared.fresh_grant(self.turn, &self.target.host);
                    let fresh = Box::pin(fresh).await;
                    if fresh.is_none_or(|g| opaque_refusal(&g).is_some()) {
                        return self.refuse(reason).await;
                    }
                }
            }
            judge::Verdict::Http => {
                let via = Via::Plain;
                return Ok(Opened::Http { client, first, via });
            }
            judge::Verdict::Refuse(reason) => return self.refuse(reason).await,
            judge::Verdict::Gone => {
                return Err(Unopened::ended(End::Closed, down, origin.as_ref()));
            }
        }
        let mut origin = match origin {
            Some(o) => o,
            None => self.dial(Told::Cut).await.map_err(|_| Unopened::Logged)?,
        };
        if origin.write_all(&first).await.is_err() {
            return Err(Unopened::ended(End::Error, down, Some(&origin)));
        }
        Ok(Opened::Raw {
            client,
            origin,
            down,
        })
    }

    /// Records the refusal that closes the tunnel (the record writes its line).
    async fn refuse<T>(&self, reason: RefusalReason) -> Result<T, Unopened> {
        Box::pin(self.shared.record_refusal(Refusal {
            turn: self.turn,
            host: self.target.host.as_str(),
            port: self.target.port,
            reason,
            url: None,
            package: None,
            shadow: false,
            method: None,
            upload: false,
            command: None,
        }))
        .await;
        Err(Unopened::Logged)
    }
}

/// How a tunnel's HTTP was carried.
enum Served {
    /// Served request by request, each metered on its own.
    PerRequest(relay::Totals),
    /// Relayed over one origin connection (at `addr`): the tunnel is metered as a whole.
    Relayed(relay::Totals, Option<SocketAddr>),
}

/// A tunnel client whose HTTP the proxy can carry: a plain TCP client may take the relay
/// ([`http_relay`]); any other (the proxy's own TLS listener) is served request by request.
trait HttpClient: AsyncRead + AsyncWrite + Unpin + Send + Sized + 'static {
    /// Carries the client's HTTP (`first`: its bytes read so far) until the tunnel ends.
    fn serve_http<'a>(
        self,
        tunnel: &'a Tunnel<'a>,
        first: Vec<u8>,
        via: Via,
    ) -> impl std::future::Future<Output = Served> + Send + 'a;
}

impl HttpClient for TcpStream {
    async fn serve_http<'a>(self, tunnel: &'a Tunnel<'a>, first: Vec<u8>, via: Via) -> Served {
        if via == Via::Plain && http_relay::eligible(tunnel) {
            tunnel.shared.metrics.active_tunnels.inc();
            let (totals, addr) = Box::pin(http_relay::relay(tunnel, self, first)).await;
            return Served::Relayed(totals, addr);
        }
        Served::PerRequest(Box::pin(plain_http::serve(tunnel, self, first, via)).await)
    }
}

impl HttpClient for TokioIo<hyper::upgrade::Upgraded> {
    async fn serve_http<'a>(self, tunnel: &'a Tunnel<'a>, first: Vec<u8>, via: Via) -> Served {
        Served::PerRequest(Box::pin(plain_http::serve(tunnel, self, first, via)).await)
    }
}

/// Why `grant` cannot admit bytes the proxy cannot read, if it cannot: it is narrowed to path
/// prefixes (`path_not_allowed`) or to an access level short of `full` (`method_not_allowed`).
fn opaque_refusal(grant: &Grant) -> Option<RefusalReason> {
    if grant.paths.is_some() {
        Some(RefusalReason::PathNotAllowed)
    } else {
        (grant.access != Access::Full).then_some(RefusalReason::MethodNotAllowed)
    }
}

/// Resolves when the tunnel must stop: revoked, or the drain time ran out (the proxy stops
/// every registered connection then, see [`crate::revoke::Registry::stop_all`], so a tunnel
/// carries no drain timer of its own).
fn stopped(stop: &Stop) -> impl std::future::Future<Output = ()> + use<> {
    stop.stopped()
}

/// The timer instant of wall-clock time `at` (now, if it has passed).
fn deadline_at(at: Timestamp) -> tokio::time::Instant {
    let left = at.millis() - Timestamp::now().millis();
    tokio::time::Instant::now() + Duration::from_millis(u64::try_from(left).unwrap_or(0))
}
