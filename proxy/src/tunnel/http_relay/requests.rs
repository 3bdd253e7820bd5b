//! The client side's requests, found in its byte stream one head at a time. Each head is
//! parsed and framed ([`crate::http1`]), judged against the CONNECT host by the served path's
//! own rule ([`names_other`]), written afresh for the origin, and queued for its answer; its
//! body follows as the framing says (a chunked one written again). The first head that may not
//! pass stops the stream, and nothing after a request that asked to be the last is passed on.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use crate::forward::Via;
use crate::http1::encode::write_head;
use crate::http1::{Body, BodyLen, MAX_HEADERS, RequestHead};

use super::super::plain_http::names_other;
use super::flow::{Ctx, Sent, Stop};
use super::io::after_carry;

/// The client side's parse state: inside a request body, or between heads (with the start of
/// an unfinished head carried over).
#[derive(Default)]
pub(super) struct Requests {
    body: Option<Body>,
    carry: Vec<u8>,
    /// When the unfinished head's first bytes came (for the header read timeout).
    pub head_since: Option<Instant>,
    /// A request that asked to be the last was passed on: the client's later bytes are not.
    ended: bool,
}

impl Requests {
    /// Takes `input` (bytes just read from the client): requests that pass are written to
    /// `out` and queued in the flow. `Err` at the first request that may not pass (those
    /// before it are in `out`).
    pub fn feed(&mut self, ctx: &Ctx<'_, '_>, input: &[u8], out: &mut Vec<u8>) -> Result<(), Stop> {
        let mut slot = Vec::new();
        let data = after_carry(&mut self.carry, input, &mut slot);
        let max_head = ctx.tunnel.shared.settings.max_header_bytes;
        let mut at = 0;
        while at < data.len() {
            if let Some(body) = &mut self.body {
                let s = body
                    .forward(&data[at..], out)
                    .map_err(|_| Stop::BrokenBody)?;
                at += s.consumed;
                if s.done {
                    self.body = None;
                }
                continue;
            }
            if self.ended {
                return Ok(());
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let Some(head) =
                RequestHead::parse(&data[at..], &mut headers, max_head).map_err(Stop::Bad)?
            else {
                self.carry = data[at..].to_vec();
                self.head_since.get_or_insert_with(Instant::now);
                return Ok(());
            };
            at += head.size;
            self.head_since = None;
            let (len, close) = pass(ctx, head, out)?;
            self.body = Body::new(len);
            if self.body.is_some() {
                ctx.flow.bodies.store(true, Ordering::Release);
            }
            self.ended = close;
        }
        Ok(())
    }
}

/// Judges one complete request head and, if it may pass, writes it afresh to `out` and
/// queues it; returns its body's length and whether it is the client's last request.
fn pass(
    ctx: &Ctx<'_, '_>,
    head: RequestHead<'_, '_>,
    out: &mut Vec<u8>,
) -> Result<(BodyLen, bool), Stop> {
    if let Some(reason) = names_other(
        head.is_connect(),
        head.target.absolute(),
        head.hosts(),
        ctx.tunnel.target,
        Via::Plain,
    ) {
        let method = head.method.to_owned();
        return Err(Stop::Refused { reason, method });
    }
    let framed = head.frame().map_err(Stop::Bad)?;
    write_head(&framed, &ctx.authority, out);
    let declared = match framed.body {
        BodyLen::Empty => Some(0),
        BodyLen::Length(n) => Some(n),
        BodyLen::Chunked | BodyLen::UntilClose => None,
    };
    ctx.flow.sent(Sent {
        to_head: framed.head.method == "HEAD",
        declared,
        started: std::time::Instant::now(),
        close: framed.close,
    });
    Ok((framed.body, framed.close))
}
