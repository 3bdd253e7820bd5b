//! Plain HTTP/1 inside a CONNECT tunnel, relayed as bytes instead of re-served. Each request
//! head is found ([`crate::framing`]) and judged against the CONNECT host exactly as the
//! served path judges it ([`super::plain_http::names_other`]), rewritten only where the proxy
//! must (origin-form target, the normalised `Host`, no proxy credential, no `Upgrade`), and
//! passed on with its body byte for byte. Responses come back untouched; their heads are
//! only read for each request's decision line and to know when a refusal may be answered.
//!
//! One origin connection per tunnel, as a client expects of a tunnel: no HTTP client, no
//! connection pool, no task per request. What a request costs is its reads and writes.
//!
//! Used when nothing in a request can change the answer but its host: a `full` grant on a
//! host that is no package registry (method and package rules need the served path), over
//! a plain TCP client.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use egressgate_store::{Access, GrantKind, RefusalReason};
use http::{StatusCode, Uri};
use http_body_util::BodyExt as _;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::decision_log::Line;
use crate::forward::Via;
use crate::framing::{self, Body, BodyLen, MAX_HEADERS};
use crate::pool::Key;
use crate::relay::{self, Activity, End, Totals};
use crate::relay_tcp::read_drained;
use crate::respond::{self, ProxyBody};

use super::plain_http::{names_other, refusal_answer};
use super::{Tunnel, deadline_at, stopped};

/// Read buffer per direction, taken from a per-thread spare list only while bytes move.
const BUF: usize = 64 * 1024;

/// Spare buffers kept per worker thread.
const SPARES: usize = 64;

/// Longest response head the relay reads for its account before it stops accounting.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Whether a tunnel's plain HTTP can take this path: only its host can refuse a request.
pub(super) fn eligible(tunnel: &Tunnel<'_>) -> bool {
    let grant = &tunnel.allowed.grant;
    grant.access == Access::Full
        && grant.kind != GrantKind::Registry
        && tunnel
            .shared
            .settings
            .registries
            .ecosystem(&tunnel.target.host)
            .is_none()
}

thread_local! {
    /// Buffers of finished reads, so a busy thread reuses a few instead of allocating one
    /// per read, and an idle tunnel holds none.
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn take_buf() -> Vec<u8> {
    SPARE
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| Vec::with_capacity(BUF))
}

fn give_buf(mut buf: Vec<u8>) {
    if buf.capacity() > 4 * BUF {
        return;
    }
    buf.clear();
    SPARE.with_borrow_mut(|s| {
        if s.len() < SPARES {
            s.push(buf);
        }
    });
}

/// Reads once from `src` when it is readable: `Ok(None)` at end of file.
async fn read_once(src: &TcpStream, act: &Activity, start: Instant) -> io::Result<Option<Vec<u8>>> {
    loop {
        src.readable().await?;
        let mut buf = take_buf();
        buf.reserve(BUF);
        match read_drained(src, &mut buf) {
            Ok(0) => {
                give_buf(buf);
                return Ok(None);
            }
            Ok(n) => {
                act.note(n, start);
                return Ok(Some(buf));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => give_buf(buf),
            Err(e) => {
                give_buf(buf);
                return Err(e);
            }
        }
    }
}

/// Writes all of `data`, trying at once (a socket is usually writable) before waiting.
async fn write_all(dst: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match dst.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => dst.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A request passed to the origin whose response has not been delivered yet.
struct Sent {
    /// A `HEAD`: its response has no body.
    to_head: bool,
    /// Its body's declared length (`None`: chunked).
    declared: Option<u64>,
    /// When its head was judged.
    started: std::time::Instant,
    /// The client asked to close after its answer (`Connection: close`, or HTTP/1.0
    /// without keep-alive).
    close: bool,
}

/// What the two directions share.
#[derive(Default)]
struct Flow {
    /// Requests sent and not yet answered to the client, oldest first.
    pending: Mutex<VecDeque<Sent>>,
    /// Responses can no longer be told apart (an unreadable head, an answer to no request):
    /// bytes still flow, but no more request lines are written and a refusal is not answered.
    untracked: AtomicBool,
    /// The origin side has finished.
    origin_done: AtomicBool,
    /// The origin said it will close (`Connection: close`, or HTTP/1.0).
    closing: AtomicBool,
    /// A request carried a body (or may have): the origin connection cannot be vouched for
    /// afterwards, so it is not kept for reuse.
    bodies: AtomicBool,
    /// The answer to a request that asked to close was delivered: the tunnel is done.
    client_closed: AtomicBool,
    /// Rung after every delivered response and when the origin side finishes.
    answered: Notify,
}

impl Flow {
    /// Every answer delivered and the origin still expecting requests: the connection is at
    /// a clean boundary.
    fn reusable(&self) -> bool {
        !self.untracked.load(Ordering::Acquire)
            && !self.bodies.load(Ordering::Acquire)
            && !self.origin_done.load(Ordering::Acquire)
            && !self.closing.load(Ordering::Acquire)
            && self.pending.lock().is_ok_and(|p| p.is_empty())
    }

    fn settled(&self) -> bool {
        self.untracked.load(Ordering::Acquire)
            || self.origin_done.load(Ordering::Acquire)
            || self.pending.lock().map_or(true, |p| p.is_empty())
    }
}

/// The tunnel's fixed facts for this path.
struct Ctx<'a, 't> {
    tunnel: &'a Tunnel<'t>,
    /// `host[:port]` as the origin is told in `Host` (the port only when not 80).
    authority: String,
    /// The vetted address dialled.
    addr: Option<SocketAddr>,
    start: Instant,
    up: Activity,
    down: Activity,
    flow: Flow,
}

/// Why the client side stopped taking requests.
enum Stop {
    /// A request named another host (recorded, answered `403`).
    Refused {
        reason: RefusalReason,
        method: String,
    },
    /// A request the proxy cannot frame or read (answered with this status, not recorded).
    Bad(StatusCode, &'static str),
}

/// The client side's parse state: inside a request body, or between heads (with the start of
/// an unfinished head carried over).
#[derive(Default)]
struct Requests {
    body: Option<Body>,
    carry: Vec<u8>,
    /// When the unfinished head's first bytes came (for the header read timeout).
    head_since: Option<Instant>,
}

impl Requests {
    /// Takes `input` (bytes just read from the client): requests that pass are appended to
    /// `out`, rewritten, and queued in `flow`. `Err` at the first request that may not pass
    /// (those before it are in `out`).
    fn feed(&mut self, ctx: &Ctx<'_, '_>, input: &[u8], out: &mut Vec<u8>) -> Result<(), Stop> {
        let mut slot = Vec::new();
        let data = after_carry(&mut self.carry, input, &mut slot);
        let max_head = ctx.tunnel.shared.settings.max_header_bytes;
        let mut at = 0;
        while at < data.len() {
            if let Some(body) = &mut self.body {
                let s = body
                    .scan(&data[at..])
                    .map_err(|_| Stop::Bad(StatusCode::BAD_REQUEST, "malformed chunked body"))?;
                out.extend_from_slice(&data[at..at + s.consumed]);
                at += s.consumed;
                if s.done {
                    self.body = None;
                }
                continue;
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&data[at..]) {
                Ok(httparse::Status::Partial) => {
                    if data.len() - at > max_head {
                        return Err(too_large());
                    }
                    self.carry = data[at..].to_vec();
                    self.head_since.get_or_insert_with(Instant::now);
                    return Ok(());
                }
                Ok(httparse::Status::Complete(n)) => {
                    if n > max_head {
                        return Err(too_large());
                    }
                    self.body = Body::new(pass(ctx, &req, out)?);
                    if self.body.is_some() {
                        ctx.flow.bodies.store(true, Ordering::Release);
                    }
                    self.head_since = None;
                    at += n;
                }
                Err(httparse::Error::TooManyHeaders) => return Err(too_large()),
                Err(_) => {
                    return Err(Stop::Bad(
                        StatusCode::BAD_REQUEST,
                        "malformed HTTP/1.1 request in the tunnel",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The bytes to parse: `input` after what an unfinished head left in `carry` (moved into
/// `slot`, which then owns them).
fn after_carry<'a>(carry: &mut Vec<u8>, input: &'a [u8], slot: &'a mut Vec<u8>) -> &'a [u8] {
    if carry.is_empty() {
        return input;
    }
    carry.extend_from_slice(input);
    *slot = std::mem::take(carry);
    slot
}

fn too_large() -> Stop {
    Stop::Bad(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "request head too large",
    )
}

/// Judges one complete request head and, if it may pass, writes it (rewritten) to `out` and
/// queues it; returns its body's length.
fn pass(
    ctx: &Ctx<'_, '_>,
    req: &httparse::Request<'_, '_>,
    out: &mut Vec<u8>,
) -> Result<BodyLen, Stop> {
    let (method, path) = (req.method.unwrap_or(""), req.path.unwrap_or(""));
    let absolute = if path.starts_with('/') || path == "*" {
        None
    } else {
        let uri = path
            .parse::<Uri>()
            .ok()
            .filter(|u| u.authority().is_some())
            .ok_or(Stop::Bad(
                StatusCode::BAD_REQUEST,
                "malformed request target",
            ))?;
        Some(uri)
    };
    let hosts = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"))
        .map(|h| h.value);
    if let Some(reason) = names_other(
        method == "CONNECT",
        absolute.as_ref(),
        hosts,
        ctx.tunnel.target,
        Via::Plain,
    ) {
        let method = method.to_owned();
        return Err(Stop::Refused { reason, method });
    }
    let ambiguous = || Stop::Bad(StatusCode::BAD_REQUEST, "ambiguous request body framing");
    let len = framing::request_body(req.headers).map_err(|_| ambiguous())?;
    // HTTP/1.0 has no transfer codings: an origin may read such a body as the next request
    // (RFC 9112 §6.1 calls the framing faulty).
    if req.version == Some(0) && len == BodyLen::Chunked {
        return Err(ambiguous());
    }
    let target = match &absolute {
        Some(uri) => uri.path_and_query().map_or("/", |p| p.as_str()),
        None => path,
    };
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(if req.version == Some(0) {
        b" HTTP/1.0\r\nhost: "
    } else {
        b" HTTP/1.1\r\nhost: "
    });
    out.extend_from_slice(ctx.authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    // HTTP/1.1: the connection options are this hop's (client to proxy), as for any proxy:
    // the origin connection stays open for the turn's next tunnel, and the proxy itself
    // closes the tunnel after an answer the client asked to be the last. HTTP/1.0 options
    // travel as they are (its keep-alive is opt-in, and the origin must see the version).
    let http10 = req.version == Some(0);
    let options = || {
        req.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("connection"))
            .flat_map(|h| h.value.split(|b| *b == b','))
            .map(<[u8]>::trim_ascii)
    };
    let close = if http10 {
        !options().any(|o| o.eq_ignore_ascii_case(b"keep-alive"))
    } else {
        options().any(|o| o.eq_ignore_ascii_case(b"close"))
    };
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let hop = ["host", "proxy-authorization", "proxy-connection", "upgrade"]
            .iter()
            .any(|n| h.name.eq_ignore_ascii_case(n))
            || (!http10
                && (["connection", "keep-alive", "te"]
                    .iter()
                    .any(|n| h.name.eq_ignore_ascii_case(n))
                    || options().any(|o| o.eq_ignore_ascii_case(name))));
        if !hop {
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    let declared = match len {
        BodyLen::Empty => Some(0),
        BodyLen::Length(n) => Some(n),
        BodyLen::Chunked | BodyLen::UntilClose => None,
    };
    if let Ok(mut p) = ctx.flow.pending.lock() {
        p.push_back(Sent {
            to_head: method == "HEAD",
            declared,
            started: std::time::Instant::now(),
            close,
        });
    }
    Ok(len)
}

/// The origin side's parse state, for the account: inside a response body, or between heads.
#[derive(Default)]
struct Responses {
    body: Option<Body>,
    carry: Vec<u8>,
    status: u16,
    payload: u64,
    /// Responses completed in the bytes being delivered (status, body bytes), in order.
    done: Vec<(u16, u64)>,
}

impl Responses {
    /// Reads `input` (bytes just read from the origin) for the account; `Err` when the
    /// origin switched protocols, which this path never asks for.
    fn scan(&mut self, flow: &Flow, input: &[u8]) -> Result<(), ()> {
        if flow.untracked.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut slot = Vec::new();
        let data = after_carry(&mut self.carry, input, &mut slot);
        let mut at = 0;
        while at < data.len() {
            if let Some(body) = &mut self.body {
                let Ok(s) = body.scan(&data[at..]) else {
                    return untrack(flow);
                };
                self.payload += s.payload;
                at += s.consumed;
                if s.done {
                    self.body = None;
                    self.done.push((self.status, self.payload));
                }
                continue;
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut headers);
            let n = match resp.parse(&data[at..]) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) if data.len() - at <= MAX_RESPONSE_HEAD => {
                    self.carry = data[at..].to_vec();
                    return Ok(());
                }
                Ok(httparse::Status::Partial) | Err(_) => return untrack(flow),
            };
            let status = resp.code.unwrap_or(0);
            if status == 101 {
                return Err(());
            }
            if resp.version == Some(0) || says_close(resp.headers) {
                flow.closing.store(true, Ordering::Release);
            }
            at += n;
            if (100..200).contains(&status) {
                continue;
            }
            // The request this answers: the oldest not yet answered, past those completed in
            // this same read.
            let to_head = flow
                .pending
                .lock()
                .ok()
                .and_then(|p| p.get(self.done.len()).map(|s| s.to_head));
            let Some(to_head) = to_head else {
                return untrack(flow);
            };
            self.status = status;
            self.payload = 0;
            match Body::new(framing::response_body(status, to_head, resp.headers)) {
                Some(body) => self.body = Some(body),
                None => self.done.push((status, 0)),
            }
        }
        Ok(())
    }

    /// After the scanned bytes reached the client: each completed response's line, and the
    /// client side told.
    fn delivered(&mut self, ctx: &Ctx<'_, '_>) {
        if self.done.is_empty() {
            return;
        }
        let tunnel = ctx.tunnel;
        for (status, payload) in self.done.drain(..) {
            let sent = ctx.flow.pending.lock().ok().and_then(|mut p| p.pop_front());
            let Some(sent) = sent else { break };
            if sent.close {
                ctx.flow.client_closed.store(true, Ordering::Release);
            }
            tunnel.shared.log.allowed(&Line {
                kind: "tunnel_http",
                duration: sent.started.elapsed(),
                ..tunnel
                    .allowed
                    .line(status, ctx.addr, sent.declared, Some(payload))
            });
        }
        ctx.flow.answered.notify_one();
    }

    /// Bytes left of the response body being relayed, when it is long enough to move inside
    /// the kernel: its length is known and nothing after it needs reading yet.
    fn bulk_left(&self, flow: &Flow) -> Option<u64> {
        if flow.untracked.load(Ordering::Acquire) {
            return None;
        }
        self.body
            .as_ref()?
            .length_left()
            .filter(|left| *left >= BUF as u64)
    }

    /// `n` bytes of the body went past unscanned.
    fn spliced(&mut self, n: u64) {
        self.payload += n;
        if self.body.as_mut().is_some_and(|b| b.passed(n)) {
            self.body = None;
            self.done.push((self.status, self.payload));
        }
    }

    /// The origin closed: a response running to the close is complete.
    fn closed(&mut self) {
        if self.body.as_ref().is_some_and(Body::until_close) {
            self.body = None;
            self.done.push((self.status, self.payload));
        }
    }
}

/// Whether a `Connection` header carries the `close` option.
fn says_close(headers: &[httparse::Header<'_>]) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|b| *b == b','))
        .any(|o| o.trim_ascii().eq_ignore_ascii_case(b"close"))
}

/// Gives up telling responses apart; the bytes still flow (so it is never an error).
fn untrack(flow: &Flow) -> Result<(), ()> {
    flow.untracked.store(true, Ordering::Release);
    flow.answered.notify_one();
    Ok(())
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
            let Some(origin) = tunnel.dial().await else {
                give_buf(out);
                let answer = respond::status(StatusCode::BAD_GATEWAY, "cannot reach the origin");
                let _ = write_all(&client, &wire(answer).await).await;
                return End::Error;
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
) -> io::Result<Option<Vec<u8>>> {
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
            // Input the proxy cannot read mid-way through a request leaves nothing to answer
            // in order: the tunnel just closes.
            if matches!(stop, Stop::Bad(..)) && !ctx.flow.settled() {
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
            if let Some(left) = responses.bulk_left(&ctx.flow)
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
            let scanned = responses.scan(&ctx.flow, &bytes);
            let sent = match scanned {
                Ok(()) => write_all(client, &bytes).await.map_err(|_| ()),
                Err(()) => Err(()),
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
        Stop::Bad(status, why) => respond::status(status, why),
    };
    if !ctx.flow.untracked.load(Ordering::Acquire) {
        let _ = write_all(client, &wire(answer).await).await;
    }
    End::Closed
}

/// A response the proxy writes itself, as HTTP/1.1 bytes that close the connection.
async fn wire(resp: http::Response<ProxyBody>) -> Vec<u8> {
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(256 + body.len());
    let status = parts.status;
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&body);
    out
}

fn shutdown_write(stream: &TcpStream) {
    use std::os::fd::AsRawFd as _;
    let _ = nix::sys::socket::shutdown(stream.as_raw_fd(), nix::sys::socket::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(to_head: bool) -> Sent {
        Sent {
            to_head,
            declared: Some(0),
            started: std::time::Instant::now(),
            close: false,
        }
    }

    fn pending(requests: &[bool]) -> Flow {
        let flow = Flow::default();
        if let Ok(mut p) = flow.pending.lock() {
            p.extend(requests.iter().map(|h| sent(*h)));
        }
        flow
    }

    /// A `HEAD`'s answer has no body whatever its length says, a `100 Continue` answers
    /// nothing, and a chunked answer ends at its last chunk, across reads.
    #[test]
    fn responses_are_told_apart() {
        let flow = pending(&[true, false, false]);
        let mut r = Responses::default();
        let first = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel";
        assert_eq!(r.scan(&flow, first), Ok(()));
        assert_eq!(r.done, [(200, 0)]);
        assert_eq!(r.scan(&flow, b"lo\r\n0\r\n\r\nHTTP/1.1 404 Not"), Ok(()));
        assert_eq!(r.done, [(200, 0), (201, 5)]);
        assert_eq!(
            r.scan(&flow, b" Found\r\ncontent-length: 0\r\n\r\n"),
            Ok(())
        );
        assert_eq!(r.done, [(200, 0), (201, 5), (404, 0)]);
        assert!(!flow.untracked.load(Ordering::Acquire));
    }

    /// An answer to no request, or a head the proxy cannot read, stops the account (bytes
    /// still flow); a protocol switch is an error.
    #[test]
    fn unreadable_answers_stop_the_account_and_a_switch_ends_it() {
        let flow = pending(&[]);
        let mut r = Responses::default();
        assert_eq!(r.scan(&flow, b"HTTP/1.1 200 OK\r\n\r\n"), Ok(()));
        assert!(flow.untracked.load(Ordering::Acquire));
        let flow = pending(&[false]);
        let mut r = Responses::default();
        assert_eq!(r.scan(&flow, b"NOT HTTP\r\n\r\n"), Ok(()));
        assert!(flow.untracked.load(Ordering::Acquire));
        let flow = pending(&[false]);
        let mut r = Responses::default();
        let switch = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n";
        assert_eq!(r.scan(&flow, switch), Err(()));
    }
}
