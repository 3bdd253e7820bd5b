//! What a tunnel's first client bytes are: a TLS ClientHello (judged by its SNI), an HTTP/1
//! request (judged request by request by its `Host`), or an opaque protocol that names no
//! host. The HTTP test is deliberately loose: anything an HTTP server could read as a request
//! line counts as HTTP, so a request for another virtual host cannot pass as "opaque".

use crate::sni::{self, Hello};

/// Longest first line looked at; a longer one is treated as HTTP (and rejected by the HTTP
/// parser, never relayed raw).
pub const MAX_FIRST_LINE: usize = 8 * 1024;

/// The verdict on the bytes received so far.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstBytes {
    /// More bytes are needed to tell.
    Incomplete,
    /// Starts with a TLS handshake record; what the ClientHello says.
    Tls(Hello),
    /// Could be an HTTP/1 request line (`METHOD SP target SP HTTP/x.y`, HTTP/0.9 `GET x`, or
    /// the HTTP/2 preface, which also names `HTTP/`).
    Http,
    /// Neither: a protocol without a host name in it (SSH banners, binary protocols).
    Opaque,
}

/// RFC 9110 `tchar`: the bytes a method token is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Classifies `buf`, the client bytes received so far.
pub fn classify(buf: &[u8]) -> FirstBytes {
    if buf.first() == Some(&0x16) {
        return match sni::inspect(buf) {
            Hello::Incomplete => FirstBytes::Incomplete,
            hello => FirstBytes::Tls(hello),
        };
    }
    // HTTP servers skip empty lines before a request (RFC 9112 §2.2).
    let start = buf
        .iter()
        .position(|b| !matches!(b, b'\r' | b'\n'))
        .unwrap_or(buf.len());
    let rest = &buf[start..];
    let token = rest.iter().take_while(|b| is_tchar(**b)).count();
    if token == rest.len() {
        return if buf.len() >= MAX_FIRST_LINE {
            FirstBytes::Http
        } else {
            FirstBytes::Incomplete
        };
    }
    if token == 0 || !matches!(rest[token], b' ' | b'\t') {
        return FirstBytes::Opaque;
    }
    let Some(end) = rest.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_FIRST_LINE || contains_http(rest) {
            FirstBytes::Http
        } else {
            FirstBytes::Incomplete
        };
    };
    let line = &rest[..end];
    if contains_http(line) || rest[..token].eq_ignore_ascii_case(b"GET") {
        FirstBytes::Http
    } else {
        FirstBytes::Opaque
    }
}

/// Whether `s` contains `HTTP/` in any case.
fn contains_http(s: &[u8]) -> bool {
    s.windows(5).any(|w| w.eq_ignore_ascii_case(b"HTTP/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_in_every_shape_a_server_accepts() {
        for s in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"\r\n\r\nGET / HTTP/1.1\r\n",
            b"get /x http/1.0\n",
            b"FOO\t/ HTTP/1.1\r\n",
            b"GET / HTTP/",
            b"GET /only-http-0.9\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"POST /u HTTP/1.1\r\n",
        ] {
            assert_eq!(
                classify(s),
                FirstBytes::Http,
                "{:?}",
                String::from_utf8_lossy(s)
            );
        }
        assert_eq!(classify(&[b'G'; MAX_FIRST_LINE]), FirstBytes::Http);
    }

    #[test]
    fn incomplete_until_it_can_tell() {
        for s in [
            &b""[..],
            b"\r\n",
            b"G",
            b"GET",
            b"GET /path",
            b"SSH-2.0-OpenSSH_9.6p1 Ubuntu",
        ] {
            assert_eq!(
                classify(s),
                FirstBytes::Incomplete,
                "{:?}",
                String::from_utf8_lossy(s)
            );
        }
        assert_eq!(classify(&[0x16, 0x03, 0x01]), FirstBytes::Incomplete);
    }

    #[test]
    fn opaque_protocols_name_no_host() {
        for s in [
            &b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n"[..],
            b"SSH-2.0-Go\r\n",
            b"*1\r\n$4\r\nPING\r\n",
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
            b"EHLO client.example\r\n",
        ] {
            assert_eq!(
                classify(s),
                FirstBytes::Opaque,
                "{:?}",
                String::from_utf8_lossy(s)
            );
        }
    }
}
