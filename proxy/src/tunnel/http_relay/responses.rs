//! The origin side's account: each response head in the origin's byte stream is read (the
//! bytes themselves pass on untouched) to pair it with the oldest request still waiting, write
//! that request's decision line once its answer reached the client, and know when a refusal may
//! be answered in order. A stream the account cannot follow is cut, not relayed blind: an
//! answer to no request means the origin read more requests than the proxy passed on, which is
//! what a smuggled request looks like.

use std::sync::atomic::Ordering;

use crate::decision_log::Line;
use crate::http1::{Body, MAX_HEADERS, framing};

use super::flow::{Ctx, Flow};
use super::io::{BUF, after_carry};

/// Longest response head the account reads.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Why the origin's stream was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// `101 Switching Protocols`: this path never asks for one.
    Switched,
    /// A response with no request waiting for it.
    Unasked,
    /// A head or body whose syntax the account cannot follow.
    Unreadable,
}

impl Cut {
    /// For the debug line that says why a tunnel was cut.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Switched => "the origin switched protocols",
            Self::Unasked => "the origin answered a request the proxy did not pass on",
            Self::Unreadable => "the origin's response could not be read",
        }
    }
}

/// The origin side's parse state: inside a response body, or between heads.
#[derive(Default)]
pub(super) struct Responses {
    body: Option<Body>,
    carry: Vec<u8>,
    status: u16,
    payload: u64,
    /// Responses completed in the bytes being delivered (status, body bytes), in order.
    done: Vec<(u16, u64)>,
}

impl Responses {
    /// Reads `input` (bytes just read from the origin, not yet delivered) for the account.
    pub fn scan(&mut self, flow: &Flow, input: &[u8]) -> Result<(), Cut> {
        let mut slot = Vec::new();
        let data = after_carry(&mut self.carry, input, &mut slot);
        let mut at = 0;
        while at < data.len() {
            if let Some(body) = &mut self.body {
                let s = body.scan(&data[at..]).map_err(|_| Cut::Unreadable)?;
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
                Ok(httparse::Status::Partial) | Err(_) => return Err(Cut::Unreadable),
            };
            let status = resp.code.unwrap_or(0);
            if status == 101 {
                return Err(Cut::Switched);
            }
            // The request this answers: the oldest not yet answered, past those completed in
            // this same read. An interim (1xx) answer needs one waiting too.
            let to_head = flow
                .pending
                .lock()
                .ok()
                .and_then(|p| p.get(self.done.len()).map(|s| s.to_head))
                .ok_or(Cut::Unasked)?;
            if resp.version == Some(0) || says_close(resp.headers) {
                flow.closing.store(true, Ordering::Release);
            }
            at += n;
            if (100..200).contains(&status) {
                continue;
            }
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
    pub fn delivered(&mut self, ctx: &Ctx<'_, '_>) {
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
    pub fn bulk_left(&self) -> Option<u64> {
        self.body
            .as_ref()?
            .length_left()
            .filter(|left| *left >= BUF as u64)
    }

    /// `n` bytes of the body went past unscanned.
    pub fn spliced(&mut self, n: u64) {
        self.payload += n;
        if self.body.as_mut().is_some_and(|b| b.passed(n)) {
            self.body = None;
            self.done.push((self.status, self.payload));
        }
    }

    /// The origin closed: a response running to the close is complete.
    pub fn closed(&mut self) {
        if self.body.as_ref().is_some_and(Body::until_close) {
            self.body = None;
            self.done.push((self.status, self.payload));
        }
    }
}

/// Whether a `Connection` header carries the `close` option.
fn says_close(headers: &[httparse::Header<'_>]) -> bool {
    framing::named(headers, "connection")
        .flat_map(|v| v.split(|b| *b == b','))
        .any(|o| o.trim_ascii().eq_ignore_ascii_case(b"close"))
}

#[cfg(test)]
mod tests {
    use super::super::flow::Sent;
    use super::*;

    fn pending(requests: &[bool]) -> Flow {
        let flow = Flow::default();
        for to_head in requests {
            flow.sent(Sent {
                to_head: *to_head,
                declared: Some(0),
                started: std::time::Instant::now(),
                close: false,
            });
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
    }

    /// An answer to no request, a head the proxy cannot read, a broken chunked body and a
    /// protocol switch each cut the stream.
    #[test]
    fn what_the_account_cannot_follow_is_cut() {
        let mut r = Responses::default();
        assert_eq!(
            r.scan(&pending(&[]), b"HTTP/1.1 200 OK\r\n\r\n"),
            Err(Cut::Unasked)
        );
        let mut r = Responses::default();
        let two = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(r.scan(&pending(&[false]), two), Err(Cut::Unasked));
        let mut r = Responses::default();
        assert_eq!(
            r.scan(&pending(&[]), b"HTTP/1.1 100 Continue\r\n\r\n"),
            Err(Cut::Unasked)
        );
        let mut r = Responses::default();
        assert_eq!(
            r.scan(&pending(&[false]), b"NOT HTTP\r\n\r\n"),
            Err(Cut::Unreadable)
        );
        let mut r = Responses::default();
        let bad_chunk = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(r.scan(&pending(&[false]), bad_chunk), Err(Cut::Unreadable));
        let mut r = Responses::default();
        let switch = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n";
        assert_eq!(r.scan(&pending(&[false]), switch), Err(Cut::Switched));
    }
}
