//! Plain HTTP/1 inside a CONNECT tunnel, relayed instead of re-served, in rooms of one job:
//! `requests` finds each request head in the client's bytes, judges it (framing by
//! [`crate::http1`], host by the served path's rule) and writes it afresh for the origin with
//! its body; `responses` keeps the account of the origin's answers, which pass on untouched;
//! `io` moves the bytes; `flow` is what the two directions share. This file runs them: the
//! first request decides whether the origin is dialled at all, then both directions run until
//! either side closes, a request is refused, the tunnel idles, its time is up, the process
//! drains or a revocation stops it.
//!
//! One origin connection per tunnel, as a client expects of a tunnel: no HTTP client, no
//! connection pool, no task per request. What a request costs is its reads and writes.
//!
//! Used when nothing in a request can change the answer but its host: a `full` grant on a
//! host that is no package registry (method and package rules need the served path), over
//! a plain TCP client.

mod flow;
mod io;
mod requests;
mod responses;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use egressgate_store::{Access, GrantKind};
use http::StatusCode;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::http1::HeadError;
use crate::pool::Key;
use crate::relay::{self, Activity, End, Totals};
use crate::respond;

use super::plain_http::refusal_answer;
use super::upstream::Told;
use super::{Tunnel, deadline_at, stopped};
use flow::{Ctx, Flow, Stop};
use io::{give_buf, read_once, shutdown_write, take_buf, wire, write_all};
use requests::Requests;
use responses::Responses;

/// Whether a tunnel's plain HTTP can take this path: only its host can refuse a request (no
/// access level short of `full`, no path prefixes).
pub(super) fn eligible(tunnel: &Tunnel<'_>) -> bool {
    let grant = &tunnel.allowed.grant;
    grant.access == Access::Full
        && grant.paths.is_none()
        && grant.kind != GrantKind::Registry
        && tunnel
            .shared
            .settings
            .registries
            .ecosystem(&tunnel.target.host)
            .is_none()
}

/// Serves the tunnel's plain-HTTP client (its first bytes, already read, are `first`) until
/// either side closes, a request is refused, the tunnel idles, its time is up, the process
/// has drained or a revocation stopped it. Returns the totals and the address dialled; the
/// caller writes the tunnel's line and egress.
pub(super) async fn relay(
    tunnel: &Tunnel<'_>,
    client: TcpStream,
    first: Vec<u8>,
) -> (Totals, Option<SocketAddr>) {
    let target = tunnel.target;
    let authority = if target.port == 80 {
        target.host.to_string()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut ctx = Ctx {
        tunnel,
        authority,
        addr: None,
        start: Instant::now(),
        up: Activity::default(),
        down: Activity::default(),
        flow: Flow::default(),
    };
    ctx.up.note(first.len(), ctx.start);
    let end = run(&mut ctx, client, first).await;
    let totals = Totals {
        up: ctx.up.bytes(),
        down: ctx.down.bytes(),
        end,
    };
    (totals, ctx.addr)
}

async fn run(ctx: &mut Ctx<'_, '_>, client: TcpStream, first: Vec<u8>) -> End {
    let mut requests = Requests::default();
    let mut out = take_buf();
    // The origin is dialled once the first request may pass (a refused first request
    // never reaches it).
    let mut input = first;
    let tunnel = ctx.tunnel;
    let ends = deadline_at(tunnel.ends_at);
    let stop = stopped(tunnel.stop);
    tokio::pin!(stop);
    let refused = loop {
        let fed = requests.feed(ctx, &input, &mut out);
        give_buf(std::mem::take(&mut input));
        match fed {
            Err(stop) if out.is_empty() => {
                give_buf(out);
                return answer_stop(ctx, &client, stop).await;
            }
            // A request refused in the first bytes, after others that passed: they are
            // answered first.
            Err(stop) => break Some(stop),
            Ok(()) if !out.is_empty() => break None,
            Ok(()) => {}
        }
        // Waiting for the rest of the first head: bounded by the header read timeout, and by
        // the tunnel's end like the rest of its life.
        let next = tokio::select! {
            r = read_head(ctx, &client, &requests) => r,
            () = tokio::time::sleep_until(ends) => {
                give_buf(out);
                return End::TurnExpired;
            }
            () = &mut stop => {
                give_buf(out);
                return End::Shutdown;
            }
        };
        match next {
            Ok(Some(bytes)) => input = bytes,
            Ok(None) | Err(_) => {
                give_buf(out);
                return End::Closed;
            }
        }
    };
    let (target, turn) = (tunnel.target, &tunnel.turn.turn);
    let key = Key::new(&turn.id, &target.host, target.port, false);
    let kept = tunnel.shared.tunnel_pool.take_conn(&key, tunnel.addrs);
    let origin = match kept {
        Some((addr, origin)) => {
            ctx.addr = Some(addr);
            origin
        }
        None => {
            let origin = match tunnel.dial(Told::BadGateway).await {
                Ok(origin) => origin,
                Err(status) => {
                    give_buf(out);
                    let answer = respond::status(status, "cannot reach the origin");
                    let _ = write_all(&client, &wire(answer).await).await;
                    return End::Error;
                }
            };
            ctx.addr = origin.peer_addr().ok();
            origin
        }
    };
    let ctx = &*ctx;
    let settings = &tunnel.shared.settings;
    // Ends with whether the origin connection is clean enough to keep.
    let both = async {
        if write_all(&origin, &out).await.is_err() {
            give_buf(out);
            return (End::Error, false);
        }
        give_buf(out);
        let up = upstream(ctx, &client, &origin, requests, refused);
        let down = downstream(ctx, &origin, &client);
        tokio::pin!(up, down);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            tokio::select! {
                r = &mut up, if !up_done => match r {
                    // The client is done with every answer read: the connection can serve
                    // the turn's next tunnel to this host.
                    Ok(()) if !down_done && ctx.flow.reusable() => return (End::Closed, true),
                    Ok(_) => {
                        up_done = true;
                        shutdown_write(&origin);
                    }
                    Err(end) => return (end, false),
                },
                r = &mut down, if !down_done => match r {
                    // The client's last answer is delivered: the tunnel closes here (its
                    // socket's close sends the FIN), the origin connection may be kept.
                    Ok(()) if ctx.flow.client_closed.load(Ordering::Acquire) => {
                        return (End::Closed, ctx.flow.reusable());
                    }
                    Ok(()) => {
                        down_done = true;
                        shutdown_write(&client);
                    }
                    Err(()) => return (End::Error, false),
                },
            }
            if up_done && down_done {
                return (End::Closed, false);
            }
        }
    };
    let (end, keep) = tokio::select! {
        done = both => done,
        end = relay::deadline(ctx.start, &ctx.up, &ctx.down, settings.idle_timeout, ends) => (end, false),
        () = &mut stop => (End::Shutdown, false),
    };
    if keep && let Some(addr) = ctx.addr {
        tunnel.shared.tunnel_pool.put_conn(key, addr, origin);
    }
    end
}

/// Reads more of the client's bytes, bounding an unfinished head by the header read timeout.
async fn read_head(
    ctx: &Ctx<'_, '_>,
    client: &TcpStream,
    requests: &Requests,
) -> std::io::Result<Option<Vec<u8>>> {
    let read = read_once(client, &ctx.up, ctx.start);
    match requests.head_since {
        None => read.await,
        Some(since) => {
            let timeout = ctx.tunnel.shared.settings.header_read_timeout;
            tokio::time::timeout_at(since + timeout, read)
                .await
                .unwrap_or(Ok(None))
        }
    }
}

/// Client → origin until the client's end of file (`Ok`), or the tunnel's end (`Err`).
async fn upstream(
    ctx: &Ctx<'_, '_>,
    client: &TcpStream,
    origin: &TcpStream,
    mut requests: Requests,
    mut refused: Option<Stop>,
) -> Result<(), End> {
    loop {
        if let Some(stop) = refused.take() {
            if matches!(stop, Stop::BrokenBody) {
                return Err(End::Closed);
            }
            // Earlier requests are answered first; then this one, and the tunnel closes.
            while !ctx.flow.settled() {
                ctx.flow.answered.notified().await;
            }
            return Err(answer_stop(ctx, client, stop).await);
        }
        let bytes = match read_head(ctx, client, &requests).await {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(()),
            Err(_) => return Err(End::Error),
        };
        let mut out = take_buf();
        refused = requests.feed(ctx, &bytes, &mut out).err();
        give_buf(bytes);
        let sent = write_all(origin, &out).await;
        give_buf(out);
        if sent.is_err() {
            return Err(End::Error);
        }
    }
}

/// Origin → client, untouched, until the origin's end of file or the delivery of the answer
/// the client asked to be its last (`Ok`), or an error.
async fn downstream(ctx: &Ctx<'_, '_>, origin: &TcpStream, client: &TcpStream) -> Result<(), ()> {
    let mut responses = Responses::default();
    // Long bodies of known length move inside the kernel (splice(2) through a pipe made
    // for the first one), the rest through user space.
    #[cfg(target_os = "linux")]
    let mut pipe: Option<crate::relay_tcp::splice::Pipe> = None;
    #[cfg(target_os = "linux")]
    let mut no_splice = false;
    let r = async {
        loop {
            #[cfg(target_os = "linux")]
            if let Some(left) = responses.bulk_left()
                && !no_splice
            {
                if pipe.is_none() {
                    pipe = crate::relay_tcp::splice::Pipe::new().ok();
                }
                let max = usize::try_from(left).unwrap_or(usize::MAX);
                let moved = match pipe.as_mut() {
                    Some(p) => p.move_up_to(origin, client, max).await.map_err(|_| ())?,
                    None => None,
                };
                match moved {
                    Some(0) => {
                        responses.delivered(ctx);
                        return Ok(());
                    }
                    Some(n) => {
                        ctx.down.note(n, ctx.start);
                        responses.spliced(n as u64);
                        responses.delivered(ctx);
                        if ctx.flow.client_closed.load(Ordering::Acquire) {
                            return Ok(());
                        }
                    }
                    None => no_splice = true,
                }
                continue;
            }
            let Some(bytes) = read_once(origin, &ctx.down, ctx.start)
                .await
                .map_err(|_| ())?
            else {
                responses.closed();
                responses.delivered(ctx);
                return Ok(());
            };
            let sent = match responses.scan(&ctx.flow, &bytes) {
                Ok(()) => write_all(client, &bytes).await.map_err(|_| ()),
                Err(cut) => {
                    tracing::debug!(turn_id = %ctx.tunnel.turn.turn.id, why = cut.as_str(), "relayed tunnel cut");
                    Err(())
                }
            };
            give_buf(bytes);
            sent?;
            responses.delivered(ctx);
            if ctx.flow.client_closed.load(Ordering::Acquire) {
                return Ok(());
            }
        }
    }
    .await;
    if !ctx.flow.client_closed.load(Ordering::Acquire) {
        ctx.flow.origin_done.store(true, Ordering::Release);
    }
    ctx.flow.answered.notify_one();
    r
}

/// Answers the request the client side stopped at (a refusal is recorded first) and ends
/// the tunnel.
async fn answer_stop(ctx: &Ctx<'_, '_>, client: &TcpStream, stop: Stop) -> End {
    let tunnel = ctx.tunnel;
    let answer = match stop {
        Stop::Refused { reason, method } => {
            refusal_answer(tunnel.shared, tunnel.turn, tunnel.target, reason, method).await
        }
        Stop::Bad(HeadError::TooLarge) => respond::status(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            HeadError::TooLarge,
        ),
        Stop::Bad(e) => respond::status(StatusCode::BAD_REQUEST, e),
        Stop::BrokenBody => return End::Closed,
    };
    let _ = write_all(client, &wire(answer).await).await;
    End::Closed
}
