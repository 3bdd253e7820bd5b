//! A refused wheel's dependencies, read by the proxy itself so one install needs one card on
//! an index without PEP 658 metadata: the wheel is fetched from the same vetted upstream
//! addresses (over the same verified TLS when inspected), its `METADATA` is parsed on a
//! blocking thread, and each package it requires that nothing allows yet is recorded as a
//! refusal before the wheel's `403` goes out. Bounded by [`crate::registry::reads`]: at most
//! [`WHEEL_READS_AT_ONCE`](crate::registry::reads::WHEEL_READS_AT_ONCE) wheels, each at most
//! [`WHEEL_MAX`], are in memory at once, from the first byte fetched to the end of the parse.

use std::net::SocketAddr;
use std::time::Duration;

use egressgate_store::RefusalReason;
use egressgate_store::db::refusals::Subject;
use http::{StatusCode, header};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;

use crate::identify::TurnEntry;
use crate::registry::wheel::{self, WHEEL_MAX};
use crate::shared::{Refusal, Shared};
use crate::target::Target;

/// Time allowed to fetch a refused wheel for its dependencies.
const WHEEL_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads the refused wheel at `path` and records each package it requires that nothing
/// allows yet, before the wheel's `403` goes out. Best effort: a wheel that cannot be read
/// adds nothing (the installer then asks for its dependencies after the approval).
pub(super) async fn record_dependencies(
    shared: &Shared,
    turn: &TurnEntry,
    origin: Origin<'_>,
    path: &str,
    epoch: Option<i64>,
) {
    let target = origin.target;
    let reads = &shared.wheel_reads;
    if !reads.first(turn.turn.id.as_str(), target.host.as_str(), path) {
        return;
    }
    let Some(slot) = reads.slot().await else {
        return;
    };
    let fetched = tokio::time::timeout(WHEEL_FETCH_TIMEOUT, fetch(shared, origin, path));
    let Ok(Some(wheel)) = fetched.await else {
        tracing::debug!(host = %target.host, "refused wheel could not be read for dependencies");
        return;
    };
    // The parse is CPU work on up to [`WHEEL_MAX`] bytes: off the async workers, holding
    // the slot until the wheel is dropped, even if this request is dropped meanwhile.
    let parse = move || {
        let deps = wheel::requires(&wheel);
        drop((wheel, slot));
        deps
    };
    let Ok(deps) = tokio::task::spawn_blocking(parse).await else {
        return;
    };
    for dep in deps {
        if turn.launch_package_grant(&dep, None).is_some() {
            continue;
        }
        let subject = Subject::Package {
            package: dep.clone(),
            version: None,
        };
        let r = Refusal {
            turn,
            host: target.host.as_str(),
            port: target.port,
            reason: RefusalReason::PackageNotApproved,
            url: None,
            package: Some(dep),
            shadow: false,
            method: None,
            upload: false,
            command: None,
        };
        // The answer is not sent anywhere: only the record matters.
        let _ = shared.refuse_unless_allowed(r, subject, epoch).await;
    }
}

/// Where a refused wheel came from, for the proxy's own read of it: the vetted addresses the
/// request was going to, and whether the origin speaks TLS (an inspected registry host: then
/// it is verified exactly like the client's own requests to it).
#[derive(Clone, Copy)]
pub(super) struct Origin<'a> {
    pub target: &'a Target,
    pub addrs: &'a [SocketAddr],
    pub tls: bool,
}

/// `GET path` from the origin on a fresh connection to a vetted address, the body capped
/// at [`WHEEL_MAX`]; `None` on any failure or a status other than `200`.
async fn fetch(shared: &Shared, origin: Origin<'_>, path: &str) -> Option<Vec<u8>> {
    let target = origin.target;
    let stream = shared
        .dialer
        .connect(&target.host, origin.addrs)
        .await
        .ok()?;
    let default_port = if origin.tls { 443 } else { 80 };
    let authority = if target.port == default_port {
        target.host.to_string()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    if origin.tls {
        let tls = shared
            .inspection
            .upstream
            .connect(&target.host, stream)
            .await
            .ok()?;
        get_capped(tls, authority, path).await
    } else {
        get_capped(stream, authority, path).await
    }
}

/// One `GET path` over `io` (HTTP/1.1), the body capped at [`WHEEL_MAX`].
async fn get_capped<I>(io: I, authority: String, path: &str) -> Option<Vec<u8>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .ok()?;
    let conn = tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(header::HOST, authority)
        .header(header::USER_AGENT, "egressgate (dependency check)")
        .body(Empty::<bytes::Bytes>::new())
        .ok()?;
    let resp = sender.send_request(req).await.ok()?;
    let out = if resp.status() == StatusCode::OK {
        read_capped(resp.into_body()).await
    } else {
        None
    };
    conn.abort();
    out
}

/// The body into one buffer, `None` past [`WHEEL_MAX`]: the buffer is sized once from a
/// `Content-Length` within the cap (or grown as frames come), so a read holds one copy of
/// the wheel, never the frames and their concatenation at once.
async fn read_capped(mut body: hyper::body::Incoming) -> Option<Vec<u8>> {
    use hyper::body::Body as _;
    let hint = usize::try_from(body.size_hint().lower()).ok()?;
    if hint > WHEEL_MAX {
        return None;
    }
    let mut buf = Vec::with_capacity(hint);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.ok()?.into_data() else {
            continue;
        };
        if buf.len() + data.len() > WHEEL_MAX {
            return None;
        }
        buf.extend_from_slice(&data);
    }
    Some(buf)
}
