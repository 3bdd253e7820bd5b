//! A request head parsed into typed parts ([`RequestHead::parse`]): method, target, version
//! and fields, with the request line's syntax settled. What may pass on is decided next, in
//! [`super::frame`].

use super::framing::{self, FramingError};

/// Most header lines a head may carry (as hyper's server allows).
pub const MAX_HEADERS: usize = 100;

/// The HTTP/1 version a request line names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `HTTP/1.0`: no transfer codings, keep-alive only when asked for.
    Http10,
    /// `HTTP/1.1`.
    Http11,
}

impl Version {
    /// As written on the request line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http10 => "HTTP/1.0",
            Self::Http11 => "HTTP/1.1",
        }
    }
}

/// The request target in the form it was sent (RFC 9112 §3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestTarget<'b> {
    /// `/path?query`.
    Origin(&'b str),
    /// `*`, of an `OPTIONS` request.
    Asterisk,
    /// `http://host/path`: judged by its authority, passed on in origin form.
    Absolute(http::Uri),
    /// `host:port`, of a `CONNECT` request.
    Authority(&'b str),
}

impl RequestTarget<'_> {
    /// The target as the origin is sent it: origin form (or `*`). An absolute URI with an
    /// empty path is sent `/` and its query.
    pub fn origin_form(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Self::Origin(p) => (*p).into(),
            Self::Asterisk => "*".into(),
            Self::Absolute(uri) => match (uri.path(), uri.query()) {
                ("" | "/", None) => "/".into(),
                (path, None) => path.into(),
                ("", Some(q)) => format!("/?{q}").into(),
                (path, Some(q)) => format!("{path}?{q}").into(),
            },
            Self::Authority(_) => "/".into(),
        }
    }

    /// The target's URI when it names an authority (absolute form), for the host judge.
    pub fn absolute(&self) -> Option<&http::Uri> {
        match self {
            Self::Absolute(uri) => Some(uri),
            _ => None,
        }
    }
}

/// Why a request head cannot pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// Over the head size or header count limit.
    #[error("request head too large")]
    TooLarge,
    /// Not an HTTP/1.0 or HTTP/1.1 request head.
    #[error("malformed HTTP/1.1 request in the tunnel")]
    Malformed,
    /// A target in no form the method allows.
    #[error("malformed request target")]
    Target,
    /// Body framing that two parsers could read differently.
    #[error("ambiguous request body framing")]
    Framing(FramingError),
    /// `Connection` names a field that frames or addresses the request.
    #[error("Connection may not name Content-Length, Transfer-Encoding, Host, Upgrade or Expect")]
    ConnectionOption,
    /// A body on a method that defines none.
    #[error("a GET, HEAD, OPTIONS, DELETE or TRACE request may not carry a body in a tunnel")]
    BodyOnBodilessMethod,
}

/// A parsed request head. Its fields are the request as the proxy understood it; only
/// [`RequestHead::frame`] (in [`super::frame`]) turns it into something that may be passed on.
#[derive(Debug)]
pub struct RequestHead<'h, 'b> {
    /// The method token.
    pub method: &'b str,
    /// The request target.
    pub target: RequestTarget<'b>,
    /// The version on the request line.
    pub version: Version,
    /// Bytes of input the head took (up to and including its empty line).
    pub size: usize,
    pub(super) headers: &'h [httparse::Header<'b>],
}

impl<'h, 'b> RequestHead<'h, 'b> {
    /// Parses the head at the start of `data` into `headers`: `Ok(None)` while it is
    /// incomplete (and not over `max_size`).
    pub fn parse(
        data: &'b [u8],
        headers: &'h mut [httparse::Header<'b>],
        max_size: usize,
    ) -> Result<Option<Self>, HeadError> {
        let mut req = httparse::Request::new(headers);
        let size = match req.parse(data) {
            Ok(httparse::Status::Complete(n)) if n > max_size => return Err(HeadError::TooLarge),
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if data.len() > max_size => {
                return Err(HeadError::TooLarge);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
            Err(_) => return Err(HeadError::Malformed),
        };
        let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
            return Err(HeadError::Malformed);
        };
        let version = match version {
            0 => Version::Http10,
            1 => Version::Http11,
            _ => return Err(HeadError::Malformed),
        };
        let target = if path.starts_with('/') {
            RequestTarget::Origin(path)
        } else if path == "*" && method == "OPTIONS" {
            RequestTarget::Asterisk
        } else if method == "CONNECT" {
            RequestTarget::Authority(path)
        } else {
            let uri = path.parse::<http::Uri>().map_err(|_| HeadError::Target)?;
            if uri.authority().is_none() || uri.scheme().is_none() {
                return Err(HeadError::Target);
            }
            RequestTarget::Absolute(uri)
        };
        Ok(Some(Self {
            method,
            target,
            version,
            size,
            headers: req.headers,
        }))
    }

    /// The values of every `Host` field, for the host judge.
    pub fn hosts(&self) -> impl Iterator<Item = &'b [u8]> + '_ {
        framing::named(self.headers, "host")
    }

    /// Whether this is a `CONNECT` (a tunnel inside the tunnel).
    pub fn is_connect(&self) -> bool {
        self.method == "CONNECT"
    }

    /// The options the `Connection` fields name, trimmed.
    pub(super) fn options(&self) -> impl Iterator<Item = &'b [u8]> + '_ {
        framing::named(self.headers, "connection")
            .flat_map(|v| v.split(|b| *b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|o| !o.is_empty())
    }

    /// Whether `Connection` names `option`.
    pub(super) fn says_option(&self, option: &str) -> bool {
        self.options()
            .any(|o| o.eq_ignore_ascii_case(option.as_bytes()))
    }

    /// The transfer codings named, in order (for a chunked body).
    pub(super) fn codings(&self) -> impl Iterator<Item = &'b [u8]> + '_ {
        framing::named(self.headers, "transfer-encoding")
            .flat_map(|v| v.split(|b| *b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|c| !c.is_empty())
    }
}
