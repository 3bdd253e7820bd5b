//! HTTP/1 message framing (RFC 9112 §6): how long a request's or response's body is, from its
//! headers. This is what lets a plain-HTTP tunnel be relayed as bytes while every request head
//! in it is still found and judged: the relay only has to know where one message stops and the
//! next head starts ([`super::body`] follows a body to its end).
//!
//! Ambiguous request framing is an error, never a guess: a request that carries both
//! `Transfer-Encoding` and `Content-Length`, disagreeing lengths, or a transfer coding whose
//! last step is not `chunked` could be read as a different number of requests by the origin
//! than by the proxy (request smuggling), which would let a second request past the judge.

/// How a message's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLen {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the connection closes (a response only).
    UntilClose,
}

/// A request whose body length cannot be told unambiguously.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// Both `Transfer-Encoding` and `Content-Length`.
    #[error("both Transfer-Encoding and Content-Length")]
    Both,
    /// `Content-Length` values that are not one decimal number.
    #[error("invalid Content-Length")]
    Length,
    /// A transfer coding whose last step is not `chunked`, or `chunked` twice.
    #[error("unsupported Transfer-Encoding")]
    Coding,
    /// A chunked body that breaks the chunk syntax.
    #[error("malformed chunked body")]
    Chunk,
}

/// The values of the header fields called `name` (in any case), in order.
pub fn named<'h, 'b: 'h>(
    headers: &'h [httparse::Header<'b>],
    name: &'static str,
) -> impl Iterator<Item = &'b [u8]> + 'h {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// Whether the transfer codings are valid with `chunked` last (`Some(true)`), present with
/// something else last (`Some(false)`), or absent (`None`). `chunked` before the end is an
/// error: it may only be applied once, as the last coding. So is a field that names no coding.
fn codings(headers: &[httparse::Header<'_>]) -> Result<Option<bool>, FramingError> {
    let mut last_chunked = None;
    let mut present = false;
    for value in named(headers, "transfer-encoding") {
        present = true;
        for coding in value.split(|b| *b == b',') {
            let coding = coding.trim_ascii();
            if coding.is_empty() {
                continue;
            }
            if last_chunked == Some(true) {
                return Err(FramingError::Coding);
            }
            last_chunked = Some(coding.eq_ignore_ascii_case(b"chunked"));
        }
    }
    // A `Transfer-Encoding` that names no coding (empty, or only commas) is present to a
    // parser that checks for the field and absent to one that reads its list: refused.
    if present && last_chunked.is_none() {
        return Err(FramingError::Coding);
    }
    Ok(last_chunked)
}

/// The one length all `Content-Length` values (and list items) agree on, if any.
fn content_length(headers: &[httparse::Header<'_>]) -> Result<Option<u64>, FramingError> {
    let mut length = None;
    for value in named(headers, "content-length") {
        for item in value.split(|b| *b == b',') {
            let item = item.trim_ascii();
            if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
                return Err(FramingError::Length);
            }
            let n = item.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            if length.is_some_and(|l| l != n) {
                return Err(FramingError::Length);
            }
            length = Some(n);
        }
    }
    Ok(length)
}

/// A request's body length from its headers (RFC 9112 §6.3, strictly).
pub fn request_body(headers: &[httparse::Header<'_>]) -> Result<BodyLen, FramingError> {
    let length = content_length(headers)?;
    match codings(headers)? {
        Some(_) if length.is_some() => Err(FramingError::Both),
        Some(true) => Ok(BodyLen::Chunked),
        Some(false) => Err(FramingError::Coding),
        None => Ok(length.map_or(BodyLen::Empty, BodyLen::Length)),
    }
}

/// A response's body length, given its status and whether it answers a `HEAD`. Framing the
/// proxy cannot read runs to the close: the bytes are relayed either way, only the account
/// of where the next response starts is given up.
pub fn response_body(status: u16, to_head: bool, headers: &[httparse::Header<'_>]) -> BodyLen {
    if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
        return BodyLen::Empty;
    }
    match (codings(headers), content_length(headers)) {
        (Ok(Some(true)), _) => BodyLen::Chunked,
        (Ok(Some(false)) | Err(_), _) | (_, Err(_)) => BodyLen::UntilClose,
        (Ok(None), Ok(Some(n))) => BodyLen::Length(n),
        (Ok(None), Ok(None)) => BodyLen::UntilClose,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h<'a>(name: &'a str, value: &'a str) -> httparse::Header<'a> {
        httparse::Header {
            name,
            value: value.as_bytes(),
        }
    }

    #[test]
    fn request_framing_is_strict() {
        assert_eq!(request_body(&[]), Ok(BodyLen::Empty));
        for empty in ["", " ", ",", " , ,"] {
            assert_eq!(
                request_body(&[h("Transfer-Encoding", empty)]),
                Err(FramingError::Coding),
                "Transfer-Encoding: {empty:?} names no coding"
            );
            assert_eq!(
                request_body(&[h("Content-Length", "5"), h("Transfer-Encoding", empty)]),
                Err(FramingError::Coding),
                "with a length, {empty:?}"
            );
        }
        assert_eq!(
            request_body(&[h("Content-Length", "5")]),
            Ok(BodyLen::Length(5))
        );
        assert_eq!(
            request_body(&[h("content-length", "5, 5"), h("CONTENT-LENGTH", "5")]),
            Ok(BodyLen::Length(5))
        );
        assert_eq!(
            request_body(&[h("Transfer-Encoding", "gzip, Chunked")]),
            Ok(BodyLen::Chunked)
        );
        for bad in [
            vec![h("Content-Length", "5"), h("Content-Length", "6")],
            vec![h("Content-Length", "5, 6")],
            vec![h("Content-Length", "-1")],
            vec![h("Content-Length", "+5")],
            vec![h("Content-Length", "0x10")],
            vec![h("Content-Length", "")],
            vec![h("Content-Length", "99999999999999999999")],
        ] {
            assert_eq!(request_body(&bad), Err(FramingError::Length), "{bad:?}");
        }
        assert_eq!(
            request_body(&[h("Transfer-Encoding", "chunked"), h("Content-Length", "5")]),
            Err(FramingError::Both)
        );
        for bad in [
            "gzip",
            "chunked, gzip",
            "chunked, chunked",
            "chunked,chunked",
        ] {
            assert_eq!(
                request_body(&[h("Transfer-Encoding", bad)]),
                Err(FramingError::Coding),
                "{bad}"
            );
        }
        assert_eq!(
            request_body(&[
                h("Transfer-Encoding", "chunked"),
                h("Transfer-Encoding", "chunked")
            ]),
            Err(FramingError::Coding)
        );
    }

    #[test]
    fn response_framing() {
        let cl = [h("Content-Length", "14")];
        assert_eq!(response_body(200, false, &cl), BodyLen::Length(14));
        assert_eq!(response_body(200, true, &cl), BodyLen::Empty);
        for status in [100, 101, 103, 204, 304] {
            assert_eq!(response_body(status, false, &cl), BodyLen::Empty);
        }
        assert_eq!(response_body(200, false, &[]), BodyLen::UntilClose);
        assert_eq!(
            response_body(200, false, &[h("Transfer-Encoding", "chunked")]),
            BodyLen::Chunked
        );
        assert_eq!(
            response_body(200, false, &[h("Transfer-Encoding", "gzip")]),
            BodyLen::UntilClose
        );
        assert_eq!(
            response_body(200, false, &[h("Content-Length", "1, 2")]),
            BodyLen::UntilClose
        );
    }
}
