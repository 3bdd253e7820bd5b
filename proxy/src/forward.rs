//! Forwarding one request (absolute-form `GET http://host/path`, plain HTTP inside a tunnel,
//! or a request decrypted on an inspected host): the per-request rules (the access level)
//! first, the `Host` header must agree with the URI, `Proxy-Authorization` and hop-by-hop
//! headers never travel upstream, and bodies stream both ways without being buffered whole.

use std::net::SocketAddr;

use egressgate_store::{Mode, RefusalReason, SanitizedUrl};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::BodyExt as _;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use crate::access;
use crate::decision_log::{Allowed, Line, Verdict};
use crate::dial::DialError;
use crate::identify::TurnEntry;
use crate::packages;
use crate::pool::{EgressMeter, Key, Lease, MeteredLine, PooledBody, Reuse};
use crate::respond::{self, ProxyBody};
use crate::shared::{Refusal, Shared};
use crate::target::{self, Target};

/// Headers that describe one hop, never the end-to-end message (RFC 9110 §7.6.1), plus the
/// proxy credential and the non-standard `Proxy-Connection`.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
];

/// `Some(HostMismatch)` when a `Host` header names another host or port than `target` (a
/// `Host` without a port names `default_port`).
pub(crate) fn host_header_mismatch(
    req: &Request<Incoming>,
    target: &Target,
    default_port: u16,
) -> Option<RefusalReason> {
    let values = req.headers().get_all(header::HOST).iter();
    host_values_mismatch(values.map(HeaderValue::as_bytes), target, default_port)
}

/// [`host_header_mismatch`] over raw `Host` values (from a head the proxy parsed itself): more
/// than one, one that is not visible ASCII, or one naming another host or port.
pub(crate) fn host_values_mismatch<'v>(
    mut values: impl Iterator<Item = &'v [u8]>,
    target: &Target,
    default_port: u16,
) -> Option<RefusalReason> {
    let first = values.next()?;
    if values.next().is_some() {
        return Some(RefusalReason::HostMismatch);
    }
    let parsed = std::str::from_utf8(first)
        .ok()
        .filter(|v| v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)))
        .and_then(|v| target::parse_host_header(v, default_port).ok());
    match parsed {
        Some(t) if t == *target => None,
        _ => Some(RefusalReason::HostMismatch),
    }
}

/// Removes hop-by-hop headers, including any named in `Connection`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(n);
    }
    headers.remove("proxy-connection");
}

/// How a request reaches its origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// Plain HTTP (absolute-form forwarding, or plain HTTP inside a tunnel).
    Plain,
    /// TLS verified against the upstream roots: a request decrypted on an inspected host.
    Tls,
}

impl Via {
    /// The URL scheme of requests that travel this way.
    pub(crate) fn scheme(self) -> &'static str {
        match self {
            Self::Plain => "http",
            Self::Tls => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Self::Plain => 80,
            Self::Tls => 443,
        }
    }
}

/// The per-request rules the proxy can only apply where it sees the request: the grant's path
/// prefixes, then its access level. `Err(answer)`: refused (recorded first) or unrecordable;
/// `Ok(())`: go ahead (a shadowed refusal was recorded and logged).
pub(crate) async fn per_request_rules(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    req: &Request<Incoming>,
    allowed: &Allowed,
    via: Via,
) -> Result<(), Response<ProxyBody>> {
    let asked = access::Asked::of(req);
    let Some(reason) = access::refuses(&allowed.grant, &asked) else {
        return Ok(());
    };
    // The grant may be an allow remembered from before a person widened it: a refusal is
    // rare, so it asks the database first, and a fresh wider approval works at once.
    if let Some(fresh) = shared.fresh_grant(turn, &target.host).await
        && access::refuses(&fresh, &asked).is_none()
    {
        return Ok(());
    }
    let url = SanitizedUrl::from_parts(via.scheme(), &target.host, target.port, req.uri().path());
    let r = Refusal {
        turn,
        host: target.host.as_str(),
        port: target.port,
        reason,
        url: Some(url.text),
        shadow: turn.mode(shared.settings.mode) == Mode::Shadow && reason.shadowable(),
        method: Some(req.method().to_string()),
        upload: asked.uploads(),
        command: None,
        package: None,
    };
    if r.shadow {
        return shared.shadow_pass(r).await.map(|_| ());
    }
    Err(shared.refuse(r, StatusCode::FORBIDDEN).await)
}

/// Sends the request upstream over a pooled or fresh connection to a vetted address and
/// streams the answer back, after the per-request rules (the access level) let it; its
/// decision line (`allowed`) is written when the response is done, or at once with
/// `502`/`504` when the origin cannot be reached (for [`Via::Tls`], also when its
/// certificate does not verify: then not a byte of the request was sent).
pub(crate) async fn forward(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    addrs: &[SocketAddr],
    mut req: Request<Incoming>,
    allowed: Allowed,
    via: Via,
) -> Response<ProxyBody> {
    if let Err(answer) = per_request_rules(shared, turn, target, &req, &allowed, via).await {
        return answer;
    }
    // A package registry's request is judged by the package it names, and forwarded with
    // the path it was judged by.
    let asked = packages::RegistryRequest {
        scheme: via.scheme(),
        method: req.method(),
        uri: req.uri(),
        headers: req.headers(),
    };
    match packages::judge(shared, turn, target, addrs, asked).await {
        packages::Verdict::Refuse(answer) => return answer,
        packages::Verdict::Allow(Some(judged)) => judged.apply(req.uri_mut()),
        packages::Verdict::Allow(None) | packages::Verdict::NotRegistry => {}
    }
    if via == Via::Tls {
        shared.metrics.inspected_requests.inc();
    }
    let key = Key::new(&turn.turn.id, &target.host, target.port, via == Via::Tls);
    let mut lease = match shared.pool.take(&key, addrs) {
        Some(pooled) => pooled,
        None => match open(shared, key, addrs, via).await {
            Ok(fresh) => fresh,
            Err((status, reason, addr, e)) => {
                return upstream_failed(shared, &allowed, status, reason, addr, e);
            }
        },
    };
    let (mut parts, body) = req.into_parts();
    let up = body.size_hint().exact();
    strip_hop_by_hop(&mut parts.headers);
    let reuse = Reuse::for_request(&body);
    if reuse == Reuse::Close {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    lease.set_reuse(reuse);
    // Origin form from the already-parsed path and query (a shared-bytes clone, no re-parse).
    let mut origin_form = http::uri::Parts::default();
    origin_form.path_and_query = parts.uri.path_and_query().cloned();
    parts.uri = Uri::from_parts(origin_form).unwrap_or_else(|_| Uri::from_static("/"));
    parts.version = http::Version::HTTP_11;
    let authority = if target.port == via.default_port() {
        target.host.to_string()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    if let Ok(v) = HeaderValue::from_str(&authority) {
        parts.headers.insert(header::HOST, v);
    }
    let upstream_req = Request::from_parts(parts, body);
    let addr = lease.addr();
    match lease.sender.send_request(upstream_req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            // An origin that switched protocols anyway no longer speaks HTTP on it.
            if parts.status == StatusCode::SWITCHING_PROTOCOLS {
                lease.set_reuse(Reuse::Close);
            }
            strip_hop_by_hop(&mut parts.headers);
            let meter = EgressMeter::new(
                shared.recorder.clone(),
                turn.turn.id.clone(),
                target.host.clone(),
                shared.metrics.bytes_down.clone(),
            )
            .with_line(MeteredLine {
                log: shared.log.clone(),
                allowed,
                status: parts.status.as_u16(),
                addr,
                up,
            });
            let body = PooledBody::new(body, lease, meter);
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => upstream_failed(
            shared,
            &allowed,
            StatusCode::BAD_GATEWAY,
            "upstream",
            Some(addr),
            format!("upstream request failed: {e}"),
        ),
    }
}

/// Logs and answers a forwarded request whose origin could not be reached or answer.
fn upstream_failed(
    shared: &Shared,
    allowed: &Allowed,
    status: StatusCode,
    reason: &'static str,
    addr: Option<SocketAddr>,
    message: String,
) -> Response<ProxyBody> {
    shared.failed(Line {
        decision: Verdict::Fail,
        reason: Some(reason),
        ..allowed.line(status.as_u16(), addr, None, None)
    });
    respond::status(status, message)
}

/// Why a fresh upstream connection failed: the status, a short reason, the address if one
/// was reached, and the message for the client.
type OpenError = (StatusCode, &'static str, Option<SocketAddr>, String);

/// Dials a vetted address, for [`Via::Tls`] verifies the origin's certificate, and performs
/// the HTTP/1.1 client handshake.
async fn open(
    shared: &Shared,
    key: Key,
    addrs: &[SocketAddr],
    via: Via,
) -> Result<Lease, OpenError> {
    let stream = shared
        .dialer
        .connect(key.host(), addrs)
        .await
        .map_err(|e| match e {
            DialError::Timeout { .. } => {
                (StatusCode::GATEWAY_TIMEOUT, "timeout", None, e.to_string())
            }
            _ => (StatusCode::BAD_GATEWAY, "connect", None, e.to_string()),
        })?;
    let addr = stream
        .peer_addr()
        .map_err(|e| (StatusCode::BAD_GATEWAY, "connect", None, e.to_string()))?;
    let sender = match via {
        Via::Plain => handshake(stream, addr).await?,
        Via::Tls => {
            let tls = shared
                .inspection
                .upstream
                .connect(key.host(), stream)
                .await
                .map_err(|e| {
                    (
                        StatusCode::BAD_GATEWAY,
                        "upstream_tls",
                        Some(addr),
                        format!(
                            "the origin's TLS certificate for {} did not verify: {e}",
                            key.host()
                        ),
                    )
                })?;
            handshake(tls, addr).await?
        }
    };
    Ok(Lease::new(shared.pool.clone(), key, addr, sender))
}

/// The HTTP/1.1 client handshake over `io`; its connection task runs until it closes.
async fn handshake<I>(io: I, addr: SocketAddr) -> Result<SendRequest<Incoming>, OpenError>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| {
            (
                StatusCode::BAD_GATEWAY,
                "upstream",
                Some(addr),
                format!("upstream handshake failed: {e}"),
            )
        })?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}
