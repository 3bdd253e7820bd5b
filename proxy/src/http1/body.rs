//! Where a message body ends, found as its bytes stream past: a known length counted down, a
//! chunked body followed through its chunk syntax, or a response running to the close. A
//! request's chunked body is also written again as it passes ([`Body::forward`]): canonical
//! chunk-size lines with no extensions and no trailers, so the origin reads the chunk syntax the
//! proxy judged, never the client's own spelling of it.

use std::io::Write as _;

use super::framing::{BodyLen, FramingError};

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

    /// Takes the next bytes of a request body for the origin: appends what belongs to the
    /// body to `out` (a known length as it is, a chunked body written again) and says how much
    /// of `input` that was. What follows a completed body is the next request's.
    pub fn forward(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<Scan, FramingError> {
        match &mut self.kind {
            BodyKind::Chunked { at, size, digits } => {
                scan_chunked(at, size, digits, input, Some(out))
            }
            _ => {
                let s = self.scan(input)?;
                out.extend_from_slice(&input[..s.consumed]);
                Ok(s)
            }
        }
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
            BodyKind::Chunked { at, size, digits } => scan_chunked(at, size, digits, input, None),
        }
    }
}

/// The chunked-body state machine, over as much of `input` as belongs to the body. With `out`,
/// every run of chunk data is written to it as a chunk of its own and the end as the last
/// chunk; chunk extensions and trailer fields are not written (RFC 9112 §7.1.1, §7.1.2: a
/// recipient may ignore the one and discard the other when it removes the coding).
fn scan_chunked(
    at: &mut Chunk,
    size: &mut u64,
    digits: &mut u8,
    input: &[u8],
    mut out: Option<&mut Vec<u8>>,
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
                if let Some(out) = out.as_deref_mut() {
                    // Writing to a Vec cannot fail.
                    let _ = write!(out, "{take:x}\r\n");
                    out.extend_from_slice(&input[i..i + take]);
                    out.extend_from_slice(b"\r\n");
                }
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
                if let Some(out) = out {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
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

    /// Forwards `input` split at `split`; the bytes written and how much input was taken.
    fn forward_split(input: &[u8], split: usize) -> Result<(Vec<u8>, usize), FramingError> {
        let mut b = Body::new(BodyLen::Chunked).ok_or(FramingError::Chunk)?;
        let mut out = Vec::new();
        let a = b.forward(&input[..split], &mut out)?;
        if a.done {
            return Ok((out, a.consumed));
        }
        let r = b.forward(&input[split..], &mut out)?;
        Ok((out, a.consumed + r.consumed))
    }

    /// A chunked request body reaches the origin as canonical chunks of the same data (no
    /// extensions, no trailers), however the client's bytes were split, and what it wrote
    /// scans as a chunked body of the same payload.
    #[test]
    fn chunked_bodies_are_written_again() {
        let body = b"5;name=\"x\"\r\nhello\r\n000a\r\n0123456789\r\n0;last\r\nX-Trailer: evil\r\n\r\nGET /next";
        for split in 0..=body.len() {
            let (out, consumed) =
                forward_split(body, split).unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(consumed, body.len() - 9, "split at {split}");
            let mut check = Body::new(BodyLen::Chunked).unwrap_or_else(|| unreachable!());
            let s = check.scan(&out).unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(
                (s.consumed, s.payload, s.done),
                (out.len(), 15, true),
                "split at {split}"
            );
            let text = String::from_utf8_lossy(&out);
            assert!(text.ends_with("\r\n0\r\n\r\n"), "{text:?}");
            assert!(
                !text.contains("name") && !text.contains("X-Trailer") && !text.contains("last"),
                "{text:?}"
            );
        }
        let (whole, _) = forward_split(body, body.len()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(whole, b"5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n");
        // A body of known length passes as it is, and stops at its end.
        let mut len = Body::new(BodyLen::Length(3)).unwrap_or_else(|| unreachable!());
        let mut out = Vec::new();
        let s = len
            .forward(b"abcGET", &mut out)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((s.consumed, s.done, out.as_slice()), (3, true, &b"abc"[..]));
        assert_eq!(
            forward_split(b"5\r\nhelloX", 9).map(|_| ()),
            Err(FramingError::Chunk)
        );
    }
}
