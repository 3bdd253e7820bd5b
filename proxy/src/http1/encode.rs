//! A framed request head written afresh for the origin, from the parts the proxy judged: the
//! request line in origin form, the `Host` the tunnel was approved for, the end-to-end fields,
//! and framing fields that state the judged body length and nothing else. The client's own
//! head bytes never reach the origin, so whitespace, line-ending, case or list spellings that
//! one parser reads differently from another cannot change what the origin sees.

use std::io::Write as _;

use super::frame::Framed;
use super::framing::BodyLen;
use super::head::Version;

/// Appends `framed`'s head to `out` as the origin is sent it, naming `authority` (the
/// approved host, with the port when it is not the scheme's default) in `Host`.
pub fn write_head(framed: &Framed<'_, '_>, authority: &str, out: &mut Vec<u8>) {
    let head = &framed.head;
    out.extend_from_slice(head.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.target.origin_form().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.version.as_str().as_bytes());
    out.extend_from_slice(b"\r\nhost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    for field in framed.end_to_end() {
        out.extend_from_slice(field.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(field.value.trim_ascii());
        out.extend_from_slice(b"\r\n");
    }
    match framed.body {
        BodyLen::Length(n) => {
            // Writing to a Vec cannot fail.
            let _ = write!(out, "content-length: {n}\r\n");
        }
        BodyLen::Chunked => {
            out.extend_from_slice(b"transfer-encoding: ");
            for (i, coding) in framed.codings().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                out.extend(coding.iter().map(u8::to_ascii_lowercase));
            }
            out.extend_from_slice(b"\r\n");
        }
        BodyLen::Empty | BodyLen::UntilClose => {}
    }
    // HTTP/1.0 keeps a connection open only when asked; the origin must be asked too. A
    // client's `Connection: close` is this hop's business: the relay ends the client's tunnel
    // after the answer and keeps a clean origin connection for the turn's next tunnel.
    if head.version == Version::Http10 && !framed.close {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::super::head::{MAX_HEADERS, RequestHead};
    use super::*;

    fn encoded(raw: &str) -> String {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = RequestHead::parse(raw.as_bytes(), &mut headers, 64 * 1024)
            .ok()
            .flatten()
            .unwrap_or_else(|| unreachable!("{raw}"));
        let framed = head.frame().unwrap_or_else(|e| unreachable!("{e}"));
        let mut out = Vec::new();
        write_head(&framed, "files.example.com:8080", &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn the_origin_gets_a_canonical_head() {
        let raw = "POST http://FILES.example.com.:8080/up?x=1 HTTP/1.1\nHost: files.example.com:8080\n\
                   Content-Length: 5, 5\ncontent-length:5\nConnection: keep-alive, X-A\nX-A: 1\n\
                   Accept:   */*  \nProxy-Authorization: Basic c2VjcmV0\nUpgrade: h2c\n\n";
        assert_eq!(
            encoded(raw),
            "POST /up?x=1 HTTP/1.1\r\nhost: files.example.com:8080\r\naccept: */*\r\n\
             content-length: 5\r\n\r\n"
                .replace("accept", "Accept")
        );
        let chunked = "PUT /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: GZIP , Chunked\r\n\r\n";
        assert_eq!(
            encoded(chunked),
            "PUT /f HTTP/1.1\r\nhost: files.example.com:8080\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
        );
        let ten = "GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\n\r\n";
        assert_eq!(
            encoded(ten),
            "GET / HTTP/1.0\r\nhost: files.example.com:8080\r\nconnection: keep-alive\r\n\r\n"
        );
        let last = "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\r\n";
        assert_eq!(
            encoded(last),
            "GET /x HTTP/1.1\r\nhost: files.example.com:8080\r\n\r\n",
            "a client's close is this hop's: the origin connection may serve the turn's next tunnel"
        );
        let opts = "OPTIONS * HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            encoded(opts),
            "OPTIONS * HTTP/1.1\r\nhost: files.example.com:8080\r\ncontent-length: 0\r\n\r\n"
        );
    }
}
