//! HTTP inside a CONNECT tunnel — plain, or decrypted on an inspected host — served request by
//! request through the forwarding path rather than relayed as bytes: every request must name the CONNECT host (its `Host` header,
//! and its URI when in absolute form), or it is refused as `host_mismatch`, recorded, and the
//! tunnel closed. So a tunnel to `approved.example.com:80` cannot reach another virtual host
//! on the same address, on its first request or on any keep-alive request after it, and the
//! egress summary only ever names the CONNECT host.

use std::net::SocketAddr;
use std::sync::Arc;

use egressgate_store::RefusalReason;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::{Body as _, Incoming};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::decision_log::Allowed;
use crate::forward::{self, Via};
use crate::identify::TurnEntry;
use crate::relay::{self, Activity, End, Tracked};
use crate::respond::{self, ProxyBody};
use crate::shared::{Refusal, Shared};
use crate::target::{self, Target};

use super::{Tunnel, deadline_at, stopped};

/// `Some(HostMismatch)` when a request inside a tunnel to `target` names anything else: a
/// nested `CONNECT`, an absolute URI (HTTP/2's `:scheme` and `:authority`) for another scheme,
/// host or port, or a `Host` naming another host or port.
fn mismatch(req: &Request<Incoming>, target: &Target, via: Via) -> Option<RefusalReason> {
    let hosts = req.headers().get_all(header::HOST).iter();
    let connect = req.method() == Method::CONNECT;
    names_other(
        connect,
        Some(req.uri()),
        hosts.map(HeaderValue::as_bytes),
        target,
        via,
    )
}

/// The judge of a request inside a tunnel, for the served path and the relayed one alike:
/// `connect` (a nested `CONNECT`), its request target `uri` and its `Host` values.
pub(super) fn names_other<'h>(
    connect: bool,
    uri: Option<&http::Uri>,
    hosts: impl Iterator<Item = &'h [u8]>,
    target: &Target,
    via: Via,
) -> Option<RefusalReason> {
    if connect {
        return Some(RefusalReason::HostMismatch);
    }
    if let Some(uri) = uri
        && let Some(authority) = uri.authority()
    {
        let scheme_ok = uri
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case(via.scheme()));
        let named = (!authority.as_str().contains('@'))
            .then(|| target::parse_host_header(authority.as_str(), target.port).ok())
            .flatten();
        if !scheme_ok || named.as_ref() != Some(target) {
            return Some(RefusalReason::HostMismatch);
        }
    }
    // A `Host` without a port names the tunnel's port (clients often omit it); one with a
    // port must name the tunnel's. HTTP/2 requests usually carry none (`:authority` instead).
    let mut hosts = hosts.peekable();
    if hosts.peek().is_some() || via == Via::Plain {
        return forward::host_values_mismatch(hosts, target, target.port);
    }
    None
}

/// Records a refusal of a request inside the tunnel and builds its answer: `403`, or `503`
/// when it could not be recorded (nothing is let through unrecorded).
pub(super) async fn refusal_answer(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    reason: RefusalReason,
    method: String,
) -> Response<ProxyBody> {
    let recorded = shared
        .record_refusal(Refusal {
            turn,
            host: target.host.as_str(),
            port: target.port,
            reason,
            url: None,
            package: None,
            shadow: false,
            // Only the method is known here: a body on a GET is not seen.
            upload: crate::access::method_uploads(&method),
            command: None,
            method: Some(method),
        })
        .await;
    if recorded {
        let host = target.host.as_str();
        let approvable = shared.store.refusal_approvable(reason, false, host);
        respond::refused(host, target.port, reason, None, approvable)
    } else {
        respond::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "refusal could not be recorded; refusing",
        )
    }
}

/// One request of the tunnel: judged, then forwarded to the vetted addresses.
async fn one(
    shared: Arc<Shared>,
    turn: Arc<TurnEntry>,
    tunnel: Arc<Allowed>,
    target: Arc<Target>,
    addrs: Arc<[SocketAddr]>,
    req: Request<Incoming>,
    via: Via,
) -> Response<ProxyBody> {
    if let Some(reason) = mismatch(&req, &target, via) {
        let method = req.method().to_string();
        let mut resp = refusal_answer(&shared, &turn, &target, reason, method).await;
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return resp;
    }
    // Each request inside the tunnel gets its own decision line, which says whether the
    // request was decrypted on an inspected host.
    let allowed = Allowed {
        kind: match via {
            Via::Plain => "tunnel_http",
            Via::Tls => "inspected",
        },
        started: std::time::Instant::now(),
        ..Allowed::clone(&tunnel)
    };
    forward::forward(&shared, &turn, &target, &addrs, req, allowed, via).await
}

/// The answer to a `HEAD` keeps its head only: HTTP/2 would send the proxy's own answer's
/// text (a refusal, a `502`) as `DATA`, which a client rightly resets as a malformed response.
fn head_only(head: bool, mut resp: Response<ProxyBody>) -> Response<ProxyBody> {
    if head && !resp.body().is_end_stream() {
        *resp.body_mut() = respond::empty();
    }
    resp
}

/// Serves the tunnel's client (whose first bytes, already read, are `first`) as HTTP/1 until
/// it closes, a request is refused, nothing moves for the idle timeout, the tunnel's time is
/// up (the earlier of its turn's and its grant's expiry), the process has drained or a
/// revocation stopped it. With [`Via::Tls`] (an inspected host) the client's TLS is ended
/// first with the host's minted leaf and the origin is reached over verified TLS. Returns
/// the bytes each way and how it ended.
pub(super) async fn serve<C>(
    tunnel: &Tunnel<'_>,
    client: C,
    first: Vec<u8>,
    via: Via,
) -> relay::Totals
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (shared, turn) = (tunnel.shared, tunnel.turn);
    let ends_at = deadline_at(tunnel.ends_at);
    let stop = stopped(tunnel.stop);
    let start = tokio::time::Instant::now();
    let (up, down) = (Arc::new(Activity::default()), Arc::new(Activity::default()));
    // Bytes read ahead are the client's too: they count towards the tunnel's totals.
    let io = Tracked::new(client, first, start, up.clone(), Some(down.clone()));
    let host = tunnel.target.host.clone();
    let (target, addrs): (Arc<Target>, Arc<[SocketAddr]>) =
        (Arc::new(tunnel.target.clone()), tunnel.addrs.into());
    let (svc_shared, svc_turn) = (shared.clone(), turn.clone());
    let svc_allowed = Arc::new(tunnel.allowed.clone());
    let service = service_fn(move |req: Request<Incoming>| {
        let head = req.method() == Method::HEAD;
        let fut = one(
            svc_shared.clone(),
            svc_turn.clone(),
            svc_allowed.clone(),
            target.clone(),
            addrs.clone(),
            req,
            via,
        );
        async move { Ok::<_, std::convert::Infallible>(head_only(head, fut.await)) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.settings.header_read_timeout)
        .max_buf_size(shared.settings.max_header_bytes);
    let hello_timeout = shared.settings.client_hello_timeout;
    let header_list_size = u32::try_from(shared.settings.max_header_bytes).unwrap_or(u32::MAX);
    let conn = async move {
        match via {
            Via::Plain => builder
                .serve_connection(TokioIo::new(io), service)
                .await
                .map_err(|e| e.to_string()),
            Via::Tls => {
                let tls = tokio::time::timeout(hello_timeout, shared.inspection.accept(&host, io))
                    .await
                    .map_err(|_| "client TLS handshake timed out".to_owned())?
                    .map_err(|e| format!("client TLS handshake failed: {e}"))?;
                // The client chose HTTP/2 by ALPN: each stream is one request, decided alone.
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    let mut h2 = http2::Builder::new(TokioExecutor::new());
                    h2.timer(TokioTimer::new())
                        .max_header_list_size(header_list_size);
                    return h2
                        .serve_connection(TokioIo::new(tls), service)
                        .await
                        .map_err(|e| e.to_string());
                }
                builder
                    .serve_connection(TokioIo::new(tls), service)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    };
    let conn = async move {
        conn.await.map_or_else(
            |e| {
                tracing::debug!(error = %e, turn_id = %turn.turn.id, "HTTP in tunnel ended with an error");
                End::Error
            },
            |()| End::Closed,
        )
    };
    shared.metrics.active_tunnels.inc();
    let totals = relay::bounded(
        conn,
        start,
        &up,
        &down,
        shared.settings.idle_timeout,
        ends_at,
        stop,
    )
    .await;
    shared.metrics.active_tunnels.dec();
    totals
}
