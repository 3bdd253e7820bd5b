//! What a tunnel's first client bytes are: a TLS ClientHello (judged by its SNI), a protocol
//! that positively names no host (an SSH identification line, or binary bytes no HTTP request
//! can start with), or else HTTP. The default is HTTP: anything not recognised as a host-less
//! protocol is judged request by request, and a head that does not parse closes the tunnel. So
//! a request line spelled the way one lenient server accepts and the proxy's parser does not
//! (leading whitespace, vertical tab or 0x1c–0x1f after the method) is refused, never relayed
//! unjudged.

use crate::sni::{self, Hello};

/// Longest first line looked at; a longer one is treated as HTTP (and rejected by the HTTP
/// parser, never relayed raw).
pub const MAX_FIRST_LINE: usize = 8 * 1024;

/// Bytes looked at for a binary protocol's mark.
const BINARY_WINDOW: usize = 4;

/// The verdict on the bytes received so far.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstBytes {
    /// More bytes are needed to tell.
    Incomplete,
    /// Starts with a TLS handshake record; what the ClientHello says.
    Tls(Hello),
    /// Anything else a server could try to read as HTTP: judged as HTTP.
    Http,
    /// A protocol that names no host: an SSH identification line, or binary bytes.
    Opaque,
}

/// Whitespace to some parser: what lenient HTTP servers skip or split a request line on
/// (Python's `str.split()` over ISO-8859-1 includes VT, FF, 0x1c–0x1f, NEL and NBSP).
fn is_spacing(b: u8) -> bool {
    matches!(
        b,
        b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0x1c..=0x1f | 0x85 | 0xa0
    )
}

/// A byte no text protocol writes and no HTTP parser reads as part of a request line: a C0
/// control that is no kind of whitespace, DEL, or a byte above ASCII that is not spacing.
fn is_binary(b: u8) -> bool {
    (matches!(b, 0x00..=0x08 | 0x0e..=0x1b | 0x7f) || b >= 0x80) && !is_spacing(b)
}

/// SSH's identification string (RFC 4253 §4.2) begins with one of these.
const SSH_PREFIXES: [&[u8]; 2] = [b"SSH-2.0-", b"SSH-1.99-"];

/// Classifies `buf`, the client bytes received so far.
pub fn classify(buf: &[u8]) -> FirstBytes {
    let Some(&first) = buf.first() else {
        return FirstBytes::Incomplete;
    };
    if first == 0x16 {
        return match sni::inspect(buf) {
            Hello::Incomplete => FirstBytes::Incomplete,
            hello => FirstBytes::Tls(hello),
        };
    }
    // Length-prefixed binary protocols (PostgreSQL, MySQL, MongoDB) put a NUL in their first
    // bytes; other binary protocols start with a byte no request line can.
    let window = &buf[..buf.len().min(BINARY_WINDOW)];
    if is_binary(first) || window.contains(&0) {
        return FirstBytes::Opaque;
    }
    if let Some(ssh) = ssh_line(buf) {
        return ssh;
    }
    if buf.len() < BINARY_WINDOW && !buf.contains(&b'\n') {
        return FirstBytes::Incomplete;
    }
    FirstBytes::Http
}

/// An SSH identification line: opaque once the whole line is in and names no HTTP version
/// (a line such as `SSH-2.0-x /path HTTP/1.1` is a request line to an HTTP server that takes
/// any token as a method, so it is judged as one); `None` when `buf` is no SSH line.
fn ssh_line(buf: &[u8]) -> Option<FirstBytes> {
    let started = SSH_PREFIXES.iter().any(|p| {
        let n = p.len().min(buf.len());
        buf[..n] == p[..n]
    });
    if !started {
        return None;
    }
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return Some(if buf.len() >= MAX_FIRST_LINE {
            FirstBytes::Http
        } else {
            FirstBytes::Incomplete
        });
    };
    let line = &buf[..end];
    let complete = SSH_PREFIXES.iter().any(|p| line.starts_with(p));
    let names_http = line.windows(5).any(|w| w.eq_ignore_ascii_case(b"HTTP/"));
    Some(if complete && !names_http {
        FirstBytes::Opaque
    } else {
        FirstBytes::Http
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use FirstBytes::{Http, Incomplete, Opaque};

    #[test]
    fn only_host_less_protocols_are_opaque_and_everything_else_is_http() {
        let cases: &[(&[u8], FirstBytes)] = &[
            // HTTP in every shape a server accepts.
            (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Http),
            (b"\r\n\r\nGET / HTTP/1.1\r\n", Http),
            (b"get /x http/1.0\n", Http),
            (b"FOO\t/ HTTP/1.1\r\n", Http),
            (b"GET / HTTP/", Http),
            (b"GET /only-http-0.9\r\n", Http),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Http),
            (b"GET /path", Http),
            // What the old default let through unjudged: spacing a lenient server skips.
            (b" GET / HTTP/1.1\r\nHost: other\r\n\r\n", Http),
            (b"\x0cGET / HTTP/1.1\r\n", Http),
            (b"\x0bGET / HTTP/1.1\r\n", Http),
            (b"GET\x0b/ HTTP/1.1\r\nHost: other\r\n\r\n", Http),
            (b"GET\x1c/ HTTP/1.1\r\n", Http),
            (b"GET\x1f/\x1fHTTP/1.1\r\n", Http),
            (b"\x85GET / HTTP/1.1\r\n", Http),
            (b"\xa0GET / HTTP/1.1\r\n", Http),
            (b"\x1eGET / HTTP/1.1\r\n", Http),
            // Text protocols are not relayed raw: they are judged (and refused) as HTTP.
            (b"EHLO client.example\r\n", Http),
            (b"*1\r\n$4\r\nPING\r\n", Http),
            // SSH-looking lines that are not SSH identification lines.
            (b"SSH-2.0-x /secret HTTP/1.1\r\nHost: other\r\n\r\n", Http),
            (b"SSH-2.0\r\n", Http),
            (b"SSH-3.0-x\r\n", Http),
            // Not enough to tell yet.
            (b"", Incomplete),
            (b"G", Incomplete),
            (b"GET", Incomplete),
            (b"SSH", Incomplete),
            (b"SSH-2.0-OpenSSH_9.6p1 Ubuntu", Incomplete),
            (&[0x16, 0x03, 0x01], Incomplete),
            // Protocols that name no host.
            (b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n", Opaque),
            (b"SSH-2.0-Go\r\n", Opaque),
            (b"SSH-1.99-Old\n", Opaque),
            (b"\x00\x00\x00\x08\x04\xd2\x16\x2f", Opaque),
            // A MySQL handshake response: a printable first byte, NULs after it.
            (b"U\x00\x00\x01\x85\xa6\xff\x01", Opaque),
            (b"\x01\x02\x03 opaque", Opaque),
            (b"\x7fELF", Opaque),
            (b"\xff\xfe", Opaque),
        ];
        for (bytes, verdict) in cases {
            let shown = String::from_utf8_lossy(bytes);
            assert_eq!(&classify(bytes), verdict, "{shown:?}");
        }
        // A first line too long to be anything but HTTP.
        assert_eq!(classify(&[b'S'; MAX_FIRST_LINE]), Http);
        let mut long_ssh = b"SSH-2.0-".to_vec();
        long_ssh.resize(MAX_FIRST_LINE, b'x');
        assert_eq!(classify(&long_ssh), Http);
    }
}
