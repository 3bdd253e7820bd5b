//! Framing a parsed head: where the request ends and whether it may pass on at all. A head
//! whose hop-by-hop options would let an origin frame or address it differently from this
//! judgement is refused, never cleaned: dropping such an option would change the meaning of
//! the bytes that follow it. What passes is a [`Framed`] head, the only thing
//! [`super::encode`] writes.

use super::framing::{self, BodyLen, FramingError};
use super::head::{HeadError, RequestHead, Version};

/// Fields of one hop (RFC 9110 §7.6.1) or of the proxy: never passed on as the client wrote
/// them. `host`, `content-length` and `transfer-encoding` are written again from the judged
/// values instead.
const NOT_PASSED: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
    "transfer-encoding",
];

/// Fields a `Connection` header may not name: each decides how the request is framed, whom it
/// is for or what the next bytes mean, so treating it as this hop's would let the origin read
/// the rest of the stream differently from the proxy.
const MAY_NOT_BE_OPTIONS: [&str; 5] = [
    "content-length",
    "transfer-encoding",
    "host",
    "upgrade",
    "expect",
];

/// Methods whose requests have no defined body (RFC 9110 §9.3): an origin may ignore a body
/// sent with them and read it as the next request (CL.0), which could name any host.
const NO_BODY_METHODS: [&str; 5] = ["GET", "HEAD", "OPTIONS", "DELETE", "TRACE"];

impl<'h, 'b> RequestHead<'h, 'b> {
    /// Decides how the request is framed and whether it may pass: the body's length
    /// (unambiguous, or an error), whether the client asked for this to be its last request,
    /// and no `Connection` option that would make the origin read the stream differently.
    pub fn frame(self) -> Result<Framed<'h, 'b>, HeadError> {
        if self.options().any(|o| {
            MAY_NOT_BE_OPTIONS
                .iter()
                .any(|n| o.eq_ignore_ascii_case(n.as_bytes()))
        }) {
            return Err(HeadError::ConnectionOption);
        }
        let body = framing::request_body(self.headers).map_err(HeadError::Framing)?;
        // HTTP/1.0 has no transfer codings: an origin may read such a body as the next
        // request (RFC 9112 §6.1 calls the framing faulty).
        if self.version == Version::Http10 && body == BodyLen::Chunked {
            return Err(HeadError::Framing(FramingError::Coding));
        }
        let has_body = matches!(body, BodyLen::Chunked | BodyLen::Length(1..));
        if has_body && NO_BODY_METHODS.contains(&self.method) {
            return Err(HeadError::BodyOnBodilessMethod);
        }
        // Every transfer coding is written again by name: each must be a bare token.
        for coding in self.codings() {
            if coding.is_empty() || !coding.iter().all(|b| is_tchar(*b)) {
                return Err(HeadError::Framing(FramingError::Coding));
            }
        }
        let close = match self.version {
            Version::Http10 => !self.says_option("keep-alive"),
            Version::Http11 => self.says_option("close"),
        };
        Ok(Framed {
            head: self,
            body,
            close,
        })
    }
}

/// A head the proxy framed: the only thing [`super::encode`] writes.
#[derive(Debug)]
pub struct Framed<'h, 'b> {
    /// The parsed head.
    pub head: RequestHead<'h, 'b>,
    /// How its body is delimited.
    pub body: BodyLen,
    /// The client asked for this to be its last request (`Connection: close`, or HTTP/1.0
    /// without keep-alive).
    pub close: bool,
}

impl<'b> Framed<'_, 'b> {
    /// The fields that travel to the origin as the client wrote them: every one that belongs
    /// to no single hop, is not written again by the proxy, and is not named by `Connection`.
    pub fn end_to_end(&self) -> impl Iterator<Item = &httparse::Header<'b>> + '_ {
        self.head.headers.iter().filter(|h| {
            !NOT_PASSED.iter().any(|n| h.name.eq_ignore_ascii_case(n))
                && !self.head.says_option(h.name)
        })
    }

    /// The transfer codings to write again (for a chunked body).
    pub fn codings(&self) -> impl Iterator<Item = &'b [u8]> + '_ {
        self.head.codings()
    }
}

/// RFC 9110 `tchar`.
pub(super) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::super::head::MAX_HEADERS;
    use super::*;

    fn framed(raw: &str) -> Result<(BodyLen, bool, Vec<String>), HeadError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = RequestHead::parse(raw.as_bytes(), &mut headers, 64 * 1024)?
            .ok_or(HeadError::Malformed)?;
        let f = head.frame()?;
        let names = f
            .end_to_end()
            .map(|h| h.name.to_ascii_lowercase())
            .collect();
        Ok((f.body, f.close, names))
    }

    #[test]
    fn a_connection_option_that_frames_or_addresses_the_request_is_refused() {
        for option in [
            "Content-Length",
            "transfer-encoding",
            "HOST",
            "upgrade",
            "Expect",
            "keep-alive, Content-Length",
            " close ,\tTransfer-Encoding ",
        ] {
            let raw = format!(
                "POST / HTTP/1.1\r\nHost: a\r\nConnection: {option}\r\nContent-Length: 3\r\n\r\n"
            );
            assert_eq!(framed(&raw), Err(HeadError::ConnectionOption), "{option}");
        }
        // Two Connection fields are one list.
        let raw = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nconnection: Host\r\n\r\n";
        assert_eq!(framed(raw), Err(HeadError::ConnectionOption));
    }

    #[test]
    fn hop_by_hop_fields_stay_behind_and_the_rest_travels() {
        let raw = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\
                   Keep-Alive: timeout=5\r\nTE: trailers\r\nProxy-Authorization: Basic eA==\r\n\
                   Proxy-Connection: keep-alive\r\nAccept: */*\r\nUser-Agent: t\r\n\r\n";
        let (body, close, names) = framed(raw).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(body, BodyLen::Empty);
        assert!(close);
        assert_eq!(names, ["accept", "user-agent"]);
    }

    #[test]
    fn bodies_on_methods_without_one_are_refused() {
        for method in NO_BODY_METHODS {
            for framing in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
                let raw = format!("{method} / HTTP/1.1\r\nHost: a\r\n{framing}\r\n\r\n");
                assert_eq!(
                    framed(&raw),
                    Err(HeadError::BodyOnBodilessMethod),
                    "{method} {framing}"
                );
            }
            let empty = format!("{method} / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
            assert!(framed(&empty).is_ok(), "{method} with an empty body");
        }
        let post = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(framed(post).map(|f| f.0), Ok(BodyLen::Length(5)));
    }

    #[test]
    fn versions_targets_and_codings() {
        let chunked10 = "POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(framed(chunked10), Err(HeadError::Framing(_))));
        let ten = "GET / HTTP/1.0\r\nHost: a\r\n\r\n";
        assert_eq!(framed(ten).map(|f| f.1), Ok(true));
        let ten_kept = "GET / HTTP/1.0\r\nHost: a\r\nConnection: Keep-Alive\r\n\r\n";
        assert_eq!(framed(ten_kept).map(|f| f.1), Ok(false));
        let params = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip;q=1, chunked\r\n\r\n";
        assert!(matches!(framed(params), Err(HeadError::Framing(_))));
        for bad in [
            "GET * HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET a.example:80 HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET //a/b HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let parsed = RequestHead::parse(bad.as_bytes(), &mut headers, 4096);
            // `//a/b` is an origin-form path (it starts with `/`) and passes as one.
            if bad.starts_with("GET //") {
                assert!(matches!(parsed, Ok(Some(_))), "{bad}");
            } else {
                assert_eq!(parsed.map(|_| ()), Err(HeadError::Target), "{bad}");
            }
        }
        for malformed in [
            " GET / HTTP/1.1\r\n\r\n",
            "GET\x0b/ HTTP/1.1\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        ] {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let parsed = RequestHead::parse(malformed.as_bytes(), &mut headers, 4096);
            assert_eq!(
                parsed.map(|_| ()),
                Err(HeadError::Malformed),
                "{malformed:?}"
            );
        }
        for (absolute, origin) in [
            ("http://a", "/"),
            ("http://a?x=1", "/?x=1"),
            ("http://a/p?x=1", "/p?x=1"),
            ("HTTP://A:80/p", "/p"),
        ] {
            let raw = format!("GET {absolute} HTTP/1.1\r\n\r\n");
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let head = RequestHead::parse(raw.as_bytes(), &mut headers, 4096);
            let head = head.ok().flatten().unwrap_or_else(|| unreachable!("{raw}"));
            assert_eq!(head.target.origin_form(), origin, "{absolute}");
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let partial = RequestHead::parse(b"GET / HTTP/1.1\r\nHost: a\r\n", &mut headers, 4096);
        assert_eq!(partial.map(|h| h.is_none()), Ok(true));
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let long = RequestHead::parse(b"GET / HTTP/1.1\r\nHost: a\r\n", &mut headers, 10);
        assert_eq!(long.map(|_| ()), Err(HeadError::TooLarge));
    }
}
