//! The HTTP/1 framing the tunnel relay relies on to find every request head:
//! `egressgate_proxy::http1` (request and response body lengths, the chunked-body scanner).
//!
//! Invariants checked (a panic is a finding):
//! * No input panics the scanner or the length rules.
//! * The scanner is a function of the bytes, not of how they were split into reads: scanning
//!   the input whole and in two pieces (split where the first byte says) agrees on how many
//!   bytes belong to the body, how many are payload, and whether it ended, or both fail.
//! * A scan never claims more bytes than it was given, nor more payload than bytes.
//! * A request head that parses has one answer: a length is only given when no
//!   `Transfer-Encoding` is present, and chunked only when no `Content-Length` is.
#![no_main]

use egressgate_proxy::http1::{Body, BodyLen, MAX_HEADERS, Scan, framing};
use libfuzzer_sys::fuzz_target;

fn scan(pieces: &[&[u8]]) -> Result<Scan, egressgate_proxy::http1::FramingError> {
    let Some(mut body) = Body::new(BodyLen::Chunked) else {
        unreachable!("chunked has a body")
    };
    let mut total = Scan::default();
    for piece in pieces {
        let s = body.scan(piece)?;
        assert!(
            s.consumed <= piece.len(),
            "consumed {} of {}",
            s.consumed,
            piece.len()
        );
        assert!(
            s.payload <= s.consumed as u64,
            "payload {} of {}",
            s.payload,
            s.consumed
        );
        total.consumed += s.consumed;
        total.payload += s.payload;
        if s.done {
            total.done = true;
            return Ok(total);
        }
    }
    Ok(total)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(split) % (rest.len() + 1);
    let whole = scan(&[rest]);
    let halves = scan(&[&rest[..at], &rest[at..]]);
    assert_eq!(
        whole.is_ok(),
        halves.is_ok(),
        "split at {at} changed the verdict: {rest:?}"
    );
    if let (Ok(w), Ok(h)) = (whole, halves) {
        assert_eq!(w, h, "split at {at}: {rest:?}");
    }

    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if let Ok(httparse::Status::Complete(_)) = req.parse(rest) {
        let named = |n: &str| req.headers.iter().any(|h| h.name.eq_ignore_ascii_case(n));
        let len = framing::request_body(req.headers);
        assert_eq!(len, framing::request_body(req.headers), "not deterministic");
        match len {
            Ok(BodyLen::Length(_)) => assert!(!named("transfer-encoding")),
            Ok(BodyLen::Chunked) => assert!(!named("content-length")),
            Ok(BodyLen::Empty) => {
                assert!(!named("transfer-encoding"));
            }
            Ok(BodyLen::UntilClose) => panic!("a request never runs to the close"),
            Err(_) => {}
        }
        for status in [200, 204, 304, 101] {
            let _ = framing::response_body(status, false, req.headers);
        }
    }
});
