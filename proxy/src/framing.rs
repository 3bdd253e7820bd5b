//! HTTP/1 message framing (RFC 9112 §6): how long a request's or response's body is, and a
//! streaming scanner that finds where a body ends without buffering it. This is what lets a
//! plain-HTTP tunnel be relayed as bytes while every request head in it is still found and
//! judged: the relay only has to know where one message stops and the next head starts.
//!
//! Ambiguous request framing is an error, never a guess: a request that carries both
//! `Transfer-Encoding` and `Content-Length`, disagreeing lengths, or a transfer coding whose
//! last step is not `chunked` could be read as a different number of requests by the origin
//! than by the proxy (request smuggling), which would let a second request past the judge.

/// Most header lines a head may carry (as hyper's server allows).
pub const MAX_HEADERS: usize = 100;

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

/// The values of the headers called `name` (in any case).
fn named<'h>(
    headers: &'h [httparse::Header<'h>],
    name: &'static str,
) -> impl Iterator<Item = &'h [u8]> + 'h {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// Whether the transfer codings are valid with `chunked` last (`Some(true)`), present with
/// something else last (`Some(false)`), or absent (`None`). `chunked` before the end is an
/// error: it may only be applied once, as the last coding.
fn codings(headers: &[httparse::Header<'_>]) -> Result<Option<bool>, FramingError> {
    let mut last_chunked = None;
    for value in named(headers, "transfer-encoding") {
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

/// Where the chunked scanner is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk size (`digits` hex digits so far).
    #[default]
    Size,
    /// Inside chunk extensions, up to the CR.
    Ext,
    /// After the size line's CR.
    SizeLf,
    /// Inside a chunk's data, this much left.
    Data(u64),
    /// After a chunk's data: its CR.
    DataCr,
    /// After a chunk's data: its LF.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
    /// After a trailer line's CR.
    TrailerLf,
    /// After the final empty line's CR.
    EndLf,
    /// The body is complete.
    Done,
}

/// A body being relayed: how much of it is left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    kind: BodyKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum BodyKind {
    Length(u64),
    Chunked { at: Chunk, size: u64, digits: u8 },
    UntilClose,
}

/// What one scan found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Bytes of the input that belong to this body.
    pub consumed: usize,
    /// Of those, payload bytes (chunk data, not chunk syntax).
    pub payload: u64,
    /// The body ended within them.
    pub done: bool,
}

impl Body {
    /// A body of this length; `None` for [`BodyLen::Empty`] (nothing to scan).
    pub fn new(len: BodyLen) -> Option<Self> {
        let kind = match len {
            BodyLen::Empty | BodyLen::Length(0) => return None,
            BodyLen::Length(n) => BodyKind::Length(n),
            BodyLen::Chunked => BodyKind::Chunked {
                at: Chunk::Size,
                size: 0,
                digits: 0,
            },
            BodyLen::UntilClose => BodyKind::UntilClose,
        };
        Some(Self { kind })
    }

    /// Bytes left of a body of known length (`None` for chunked or to-the-close bodies).
    pub fn length_left(&self) -> Option<u64> {
        match self.kind {
            BodyKind::Length(left) => Some(left),
            _ => None,
        }
    }

    /// Counts `n` bytes of a body of known length that passed unscanned (moved inside the
    /// kernel); whether the body ended with them. Other bodies are left as they are.
    pub fn passed(&mut self, n: u64) -> bool {
        match &mut self.kind {
            BodyKind::Length(left) => {
                *left = left.saturating_sub(n);
                *left == 0
            }
            _ => false,
        }
    }

    /// Whether the body runs to the connection's close.
    pub fn until_close(&self) -> bool {
        self.kind == BodyKind::UntilClose
    }

    /// Scans the next bytes of the stream; what follows a completed body is the next
    /// message's.
    pub fn scan(&mut self, input: &[u8]) -> Result<Scan, FramingError> {
        match &mut self.kind {
            BodyKind::Length(left) => {
                let take = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                *left -= take as u64;
                Ok(Scan {
                    consumed: take,
                    payload: take as u64,
                    done: *left == 0,
                })
            }
            BodyKind::UntilClose => Ok(Scan {
                consumed: input.len(),
                payload: input.len() as u64,
                done: false,
            }),
            BodyKind::Chunked { at, size, digits } => scan_chunked(at, size, digits, input),
        }
    }
}

/// The chunked-body state machine, over as much of `input` as belongs to the body.
fn scan_chunked(
    at: &mut Chunk,
    size: &mut u64,
    digits: &mut u8,
    input: &[u8],
) -> Result<Scan, FramingError> {
    let mut i = 0;
    let mut payload = 0u64;
    while i < input.len() {
        let b = input[i];
        match *at {
            Chunk::Size => match b {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    // 16 hex digits fill a u64; more is a length no body has.
                    if *digits == 16 {
                        return Err(FramingError::Chunk);
                    }
                    let d = char::from(b).to_digit(16).unwrap_or(0);
                    *size = (*size << 4) | u64::from(d);
                    *digits += 1;
                }
                b';' | b' ' | b'\t' if *digits > 0 => *at = Chunk::Ext,
                b'\r' if *digits > 0 => *at = Chunk::SizeLf,
                _ => return Err(FramingError::Chunk),
            },
            Chunk::Ext => match b {
                b'\r' => *at = Chunk::SizeLf,
                b'\n' => return Err(FramingError::Chunk),
                _ => {}
            },
            Chunk::SizeLf => {
                if b != b'\n' {
                    return Err(FramingError::Chunk);
                }
                *at = if *size == 0 {
                    Chunk::TrailerStart
                } else {
                    Chunk::Data(*size)
                };
                *size = 0;
                *digits = 0;
            }
            Chunk::Data(left) => {
                let take = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(input.len() - i);
                payload += take as u64;
                let left = left - take as u64;
                *at = if left == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data(left)
                };
                i += take;
                continue;
            }
            Chunk::DataCr if b == b'\r' => *at = Chunk::DataLf,
            Chunk::DataLf if b == b'\n' => *at = Chunk::Size,
            Chunk::DataCr | Chunk::DataLf => return Err(FramingError::Chunk),
            Chunk::TrailerStart => {
                *at = if b == b'\r' {
                    Chunk::EndLf
                } else {
                    Chunk::Trailer
                };
            }
            Chunk::Trailer => match b {
                b'\r' => *at = Chunk::TrailerLf,
                b'\n' => return Err(FramingError::Chunk),
                _ => {}
            },
            Chunk::TrailerLf if b == b'\n' => *at = Chunk::TrailerStart,
            Chunk::EndLf if b == b'\n' => {
                *at = Chunk::Done;
                return Ok(Scan {
                    consumed: i + 1,
                    payload,
                    done: true,
                });
            }
            Chunk::TrailerLf | Chunk::EndLf => return Err(FramingError::Chunk),
            Chunk::Done => break,
        }
        i += 1;
    }
    Ok(Scan {
        consumed: i,
        payload,
        done: *at == Chunk::Done,
    })
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

    /// Scans `input` split at every point (and byte by byte); each way must agree.
    fn scan_all(input: &[u8]) -> Result<(usize, u64, bool), FramingError> {
        let whole = {
            let mut b = Body::new(BodyLen::Chunked).ok_or(FramingError::Chunk)?;
            let s = b.scan(input)?;
            (s.consumed, s.payload, s.done)
        };
        for split in 0..=input.len() {
            let mut b = Body::new(BodyLen::Chunked).ok_or(FramingError::Chunk)?;
            let a = b.scan(&input[..split])?;
            let (consumed, payload, done) = if a.done {
                (a.consumed, a.payload, true)
            } else {
                let r = b.scan(&input[split..])?;
                (a.consumed + r.consumed, a.payload + r.payload, r.done)
            };
            assert_eq!((consumed, payload, done), whole, "split at {split}");
        }
        Ok(whole)
    }

    #[test]
    fn chunked_bodies_end_where_they_end() {
        let body = b"5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\nGET /next";
        assert_eq!(scan_all(body), Ok((body.len() - 9, 31, true)));
        let trailers = b"3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-B: 2\r\n\r\nrest";
        assert_eq!(scan_all(trailers), Ok((trailers.len() - 4, 3, true)));
        // Not finished yet.
        assert_eq!(scan_all(b"5\r\nhel"), Ok((6, 3, false)));
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"5\nhello\r\n",
            b"5\r\nhelloX\r\n",
            b"0\r\nX-A: 1\n\r\n",
            b"11111111111111111\r\n",
            b"5;a\nb\r\n",
        ] {
            assert_eq!(scan_all(bad), Err(FramingError::Chunk), "{bad:?}");
        }
    }

    #[test]
    fn lengths_count_down() {
        let mut b = Body::new(BodyLen::Length(5)).unwrap_or_else(|| unreachable!());
        assert_eq!(
            b.scan(b"abc"),
            Ok(Scan {
                consumed: 3,
                payload: 3,
                done: false
            })
        );
        assert_eq!(
            b.scan(b"deGET"),
            Ok(Scan {
                consumed: 2,
                payload: 2,
                done: true
            })
        );
        let mut spliced = Body::new(BodyLen::Length(100)).unwrap_or_else(|| unreachable!());
        assert_eq!(spliced.length_left(), Some(100));
        assert!(!spliced.passed(60));
        assert_eq!(spliced.length_left(), Some(40));
        assert!(spliced.passed(40));
        let mut chunked = Body::new(BodyLen::Chunked).unwrap_or_else(|| unreachable!());
        assert_eq!(chunked.length_left(), None);
        assert!(
            !chunked.passed(10),
            "only a known length can pass unscanned"
        );
        assert_eq!(Body::new(BodyLen::Length(0)), None);
        assert_eq!(Body::new(BodyLen::Empty), None);
    }
}
