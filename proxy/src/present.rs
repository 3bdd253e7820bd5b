//! A captured connection's refusal, shown inside its own stream. The sandbox's capture turns
//! every connection of a client that never asked for a proxy into a `CONNECT` marked with
//! [`CAPTURE_HEADER`]; such a client cannot read a `CONNECT` answer, so a refusal of a marked
//! `CONNECT` is answered `200` (carrying the refusal's headers, which tell the capture what
//! follows) and the same `403` is then served to the client as its origin would have answered:
//! once, over plain HTTP, or inside TLS with a leaf minted for the refused name when a
//! deployment CA is configured (the sandbox trusts it). The refusal was recorded before the
//! `200`, and nothing is ever dialled. Anything else (silence, an opaque protocol, TLS naming
//! no usable name or with no CA to mint under) is closed, and the capture resets its client
//! as it always did.
//!
//! The mark changes only how a refusal is shown, never what is allowed: a client outside a
//! sandbox that sends it still reaches nothing it was refused, and gets the same `403` one
//! step later. Clients that asked for the proxy themselves do not send it, and keep reading
//! the refusal as the `CONNECT` answer.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use egressgate_store::{Host, RefusalReason};
use http::response::Parts;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite};

use crate::first_bytes::{self, FirstBytes};
use crate::relay::Tracked;
use crate::respond::{self, APPROVABLE_HEADER, ProxyBody, REFUSED_HEADER};
use crate::shared::{ConnGuard, Shared};
use crate::sni::Hello;
use crate::target::Target;

/// The request header the sandbox's capture marks its `CONNECT` with (value `1`).
pub const CAPTURE_HEADER: &str = "egress-capture";

/// The request header a marked `CONNECT` may carry naming the command the sandbox saw open
/// the captured connection. Read only on a marked `CONNECT`; the sandbox's claim, which any
/// script holding the turn's credential could make up, so the record labels it as such.
pub const COMMAND_HEADER: &str = "egress-command";

/// Longest command kept, in bytes (the sandbox sends at most this much).
const MAX_COMMAND: usize = 200;

/// The command a marked `CONNECT` reports, re-checked as the sandbox bounds it: at most
/// [`MAX_COMMAND`] bytes, each outside printable ASCII shown as `?`, surrounding blanks
/// dropped. `None` when the `CONNECT` is unmarked or reports nothing (never `""`).
pub(crate) fn command(headers: &HeaderMap) -> Option<String> {
    if !asked(headers) {
        return None;
    }
    let raw = headers.get(COMMAND_HEADER)?.as_bytes();
    let shown: String = raw
        .iter()
        .take(MAX_COMMAND)
        .map(|&b| {
            if (b' '..=b'~').contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    Some(shown.trim().to_owned()).filter(|c| !c.is_empty())
}

/// Whether a `CONNECT` with `headers` asks for its refusal inside the stream.
pub(crate) fn asked(headers: &HeaderMap) -> bool {
    headers
        .get(CAPTURE_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1")
}

/// The refusal to serve, taken apart once and rebuilt for the one request it answers.
struct Answer {
    parts: Parts,
    body: Bytes,
}

impl Answer {
    fn response(&self) -> Response<ProxyBody> {
        let mut r = Response::from_parts(self.parts.clone(), respond::full(self.body.clone()));
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    }
}

/// The answer to a marked `CONNECT` to `target` whose answer would have been `answer`: for a
/// refusal (`403` with its reason), `200` now and the refusal inside the stream, on a task of
/// its own that counts as an open connection; anything else (a `429` limit, which holding
/// the connection would defeat, a `503`, a `407`) unchanged, and the capture resets its client.
pub(crate) fn present(
    shared: &Arc<Shared>,
    target: Target,
    upgrade: OnUpgrade,
    answer: Response<ProxyBody>,
) -> Response<ProxyBody> {
    let reason = answer
        .headers()
        .get(REFUSED_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(RefusalReason::parse);
    let Some(reason) = reason.filter(|_| answer.status() == StatusCode::FORBIDDEN) else {
        return answer;
    };
    let mut ok = Response::new(respond::empty());
    for name in [REFUSED_HEADER, APPROVABLE_HEADER] {
        if let Some(v) = answer.headers().get(name) {
            ok.headers_mut().insert(name, v.clone());
        }
    }
    let shared = Arc::clone(shared);
    let (guard, _) = ConnGuard::new(&shared.active);
    tokio::spawn(async move {
        let _guard = guard;
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let (parts, body) = answer.into_parts();
        let body = crate::respond::read_whole(body).await;
        let answer = Answer { parts, body };
        // Every step is bounded on its own; this bounds them together (and the write).
        let settings = &shared.settings;
        let bound = settings.client_hello_timeout + settings.header_read_timeout;
        let client = TokioIo::new(upgraded);
        let served = serve(&shared, &target, reason, client, answer);
        if tokio::time::timeout(bound, served).await.is_err() {
            tracing::debug!(host = %target.host, "refusal inside the stream cut at its time bound");
        }
    });
    ok
}

/// Reads the client's first bytes, then answers the one request they start (plain HTTP, or
/// HTTP/1.1 inside TLS for the refused name) or closes.
async fn serve<C>(
    shared: &Shared,
    target: &Target,
    reason: RefusalReason,
    mut client: C,
    answer: Answer,
) where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut first = Vec::new();
    let wait = shared.settings.client_hello_timeout;
    let Ok(Some(seen)) = tokio::time::timeout(wait, read_first(&mut client, &mut first)).await
    else {
        return;
    };
    let client = Tracked::new(
        client,
        first,
        tokio::time::Instant::now(),
        Arc::default(),
        None,
    );
    match seen {
        FirstBytes::Http => answer_once(shared, client, answer).await,
        FirstBytes::Tls(Hello::Sni(name)) if leaf_for(&name, target, reason) => {
            match shared.inspection.accept_http1(&target.host, client).await {
                Ok(tls) => answer_once(shared, tls, answer).await,
                Err(e) => tracing::debug!(error = %e, "no refusal inside TLS"),
            }
        }
        _ => {}
    }
}

/// Reads until the first bytes can be classified (each kind is bounded in size by
/// [`first_bytes::classify`]); `None` when the client left first.
async fn read_first<C: AsyncRead + Unpin>(client: &mut C, buf: &mut Vec<u8>) -> Option<FirstBytes> {
    loop {
        match first_bytes::classify(buf) {
            FirstBytes::Incomplete => {}
            seen => return Some(seen),
        }
        buf.reserve(4096);
        match client.read_buf(buf).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Whether a ClientHello naming `sni` gets a leaf for the refused `target`: only when it names
/// the target's host (after the same normalisation: case, trailing dot) and that host is a
/// name, not an address in any spelling. The leaf is always for the normalised name.
fn leaf_for(sni: &str, target: &Target, reason: RefusalReason) -> bool {
    reason != RefusalReason::IpLiteral
        && !target.host.is_ip_literal()
        && Host::parse(sni).is_ok_and(|h| h == target.host)
}

/// Serves `answer` to the one HTTP/1 request read from `io` (its head bounded in time and
/// size like every other), then closes.
async fn answer_once<S>(shared: &Shared, io: S, answer: Answer)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |_req: Request<Incoming>| {
        let r = answer.response();
        async move { Ok::<_, Infallible>(r) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(false)
        .header_read_timeout(shared.settings.header_read_timeout)
        .max_buf_size(shared.settings.max_header_bytes);
    if let Err(e) = builder.serve_connection(TokioIo::new(io), service).await {
        tracing::debug!(error = %e, "refusal inside the stream ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::test_authority as target;

    #[test]
    fn a_leaf_only_for_the_refused_name_normalised_and_never_for_an_address() {
        let t = target("files.example.com:443");
        let nr = RefusalReason::NotApproved;
        assert!(leaf_for("files.example.com", &t, nr));
        assert!(leaf_for("FILES.Example.COM.", &t, nr));
        assert!(!leaf_for("other.example.com", &t, nr));
        assert!(!leaf_for("files.example.com.evil", &t, nr));
        assert!(!leaf_for("", &t, nr));
        assert!(!leaf_for("files.example.com", &t, RefusalReason::IpLiteral));
        for literal in ["203.0.113.9:443", "127.1:443", "[2001:db8::1]:443"] {
            let t = target(literal);
            let name = t.host.as_str().to_owned();
            assert!(!leaf_for(&name, &t, nr), "{literal}");
        }
    }

    #[test]
    fn a_command_only_on_a_marked_connect_bounded_and_printable() {
        let mut h = HeaderMap::new();
        h.insert(COMMAND_HEADER, HeaderValue::from_static("curl -s http://x"));
        assert_eq!(command(&h), None, "unmarked: not read");
        h.insert(CAPTURE_HEADER, HeaderValue::from_static("1"));
        assert_eq!(command(&h).as_deref(), Some("curl -s http://x"));
        let long = format!("python3 {}", "a".repeat(500));
        let long = HeaderValue::from_str(&long).unwrap_or_else(|e| unreachable!("{e}"));
        h.insert(COMMAND_HEADER, long);
        assert_eq!(command(&h).map(|c| c.len()), Some(MAX_COMMAND));
        let odd =
            HeaderValue::from_bytes(b"caf\xc3\xa9 \tx").unwrap_or_else(|e| unreachable!("{e}"));
        h.insert(COMMAND_HEADER, odd);
        assert_eq!(command(&h).as_deref(), Some("caf?? ?x"));
        h.insert(COMMAND_HEADER, HeaderValue::from_static("  "));
        assert_eq!(command(&h), None, "never an empty command");
    }

    #[test]
    fn only_the_mark_with_value_one_asks() {
        let mut h = HeaderMap::new();
        assert!(!asked(&h));
        h.insert(CAPTURE_HEADER, HeaderValue::from_static("0"));
        assert!(!asked(&h));
        h.insert(CAPTURE_HEADER, HeaderValue::from_static("1"));
        assert!(asked(&h));
    }
}
