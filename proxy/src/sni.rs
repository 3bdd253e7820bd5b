//! Reading the TLS ClientHello at the start of a tunnel (with rustls' parser), so a request
//! for one host cannot present another in its SNI (domain fronting).

use rustls::server::Acceptor;

/// Most ClientHello bytes we buffer before giving up on finding one.
pub const MAX_HELLO_BYTES: usize = 64 * 1024;

/// What the first bytes of a tunnel say.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// A complete ClientHello naming this server (raw SNI text, not yet normalised).
    Sni(String),
    /// A complete ClientHello without a DNS server name.
    NoSni,
    /// Not TLS at all (the first byte is not a TLS handshake record).
    NotTls,
    /// Starts like a TLS handshake but cannot be parsed (or is over [`MAX_HELLO_BYTES`]):
    /// never let through, since a real TLS server might still accept it.
    Malformed,
    /// Looks like TLS; more bytes are needed.
    Incomplete,
}

/// Inspects the bytes received so far.
pub fn inspect(buf: &[u8]) -> Hello {
    match buf {
        [] => return Hello::Incomplete,
        [0x16] | [0x16, 0x03, ..] => {}
        _ => return Hello::NotTls,
    }
    if buf.len() < 5 {
        return Hello::Incomplete;
    }
    let mut acceptor = Acceptor::default();
    let mut rest = buf;
    while !rest.is_empty() {
        match acceptor.read_tls(&mut rest) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return Hello::Malformed,
        }
    }
    match acceptor.accept() {
        Ok(Some(accepted)) => match accepted.client_hello().server_name() {
            Some(name) => Hello::Sni(name.to_owned()),
            None => Hello::NoSni,
        },
        Ok(None) if buf.len() < MAX_HELLO_BYTES => Hello::Incomplete,
        Ok(None) | Err(_) => Hello::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_prefixes() {
        assert_eq!(inspect(b""), Hello::Incomplete);
        assert_eq!(inspect(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        assert_eq!(inspect(&[0x16, 0x03, 0x01]), Hello::Incomplete);
        assert_eq!(
            inspect(&[0x16, 0x03, 0x01, 0x00, 0x10, 0x01]),
            Hello::Incomplete
        );
    }
}
