//! TLS ClientHellos as raw bytes, for the tests that judge first bytes: a real rustls hello,
//! the same re-framed as two records, and one grown past what a parser will take.

use std::sync::Arc;

/// The bytes a rustls client sends first: its ClientHello (SNI for a DNS name, none for an
/// IP address).
pub fn client_hello(client: Arc<rustls::ClientConfig>, sni: Option<&str>) -> Vec<u8> {
    let name = match sni {
        Some(s) => rustls::pki_types::ServerName::try_from(s.to_owned()).unwrap(),
        None => {
            rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into())
        }
    };
    let mut conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    assert_eq!(out[0], 0x16, "a handshake record");
    out
}

/// Re-frames a single-record ClientHello as two TLS records (record-layer fragmentation).
pub fn two_records(hello: &[u8]) -> Vec<u8> {
    let (hdr, body) = hello.split_at(5);
    assert_eq!(
        usize::from(u16::from_be_bytes([hdr[3], hdr[4]])),
        body.len(),
        "one record"
    );
    let mid = body.len() / 2;
    let mut out = Vec::new();
    for part in [&body[..mid], &body[mid..]] {
        out.extend_from_slice(&hdr[..3]);
        out.extend_from_slice(&u16::try_from(part.len()).unwrap().to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// Grows a single-record ClientHello past 64 KiB (the most rustls will parse; OpenSSL accepts
/// ClientHellos up to 128 KiB): GREASE cipher suites plus a zero padding extension, the SNI
/// unchanged, split into records of at most 16 KiB.
pub fn oversized_hello(hello: &[u8]) -> Vec<u8> {
    let body = &hello[5..];
    assert_eq!(body[0], 1, "a ClientHello");
    let ch = &body[4..];
    let mut pos = 2 + 32;
    pos += 1 + usize::from(ch[pos]);
    let cs_len = usize::from(u16::from_be_bytes([ch[pos], ch[pos + 1]]));
    let suites = &ch[pos + 2..pos + 2 + cs_len];
    let after_suites = pos + 2 + cs_len;
    let comp_len = usize::from(ch[after_suites]);
    let ext_at = after_suites + 1 + comp_len;
    let ext_len = usize::from(u16::from_be_bytes([ch[ext_at], ch[ext_at + 1]]));
    let exts = &ch[ext_at + 2..ext_at + 2 + ext_len];
    let grease = 5000usize;
    let padding = 60_000usize.min(65_535 - ext_len - 4);
    let mut out = Vec::new();
    out.extend_from_slice(&ch[..pos]);
    out.extend_from_slice(&u16::try_from(cs_len + 2 * grease).unwrap().to_be_bytes());
    for _ in 0..grease {
        out.extend_from_slice(&[0x0a, 0x0a]);
    }
    out.extend_from_slice(suites);
    out.extend_from_slice(&ch[after_suites..ext_at]);
    out.extend_from_slice(&u16::try_from(ext_len + 4 + padding).unwrap().to_be_bytes());
    out.extend_from_slice(exts);
    out.extend_from_slice(&[0x00, 0x15]); // padding (RFC 7685)
    out.extend_from_slice(&u16::try_from(padding).unwrap().to_be_bytes());
    out.extend(std::iter::repeat_n(0u8, padding));
    let n = u32::try_from(out.len()).unwrap();
    assert!(n > 0xffff, "bigger than rustls' handshake limit");
    let mut hs = vec![1u8];
    hs.extend_from_slice(&n.to_be_bytes()[1..]);
    hs.extend_from_slice(&out);
    let mut records = Vec::new();
    for chunk in hs.chunks(16_384) {
        records.extend_from_slice(&[0x16, 0x03, 0x01]);
        records.extend_from_slice(&u16::try_from(chunk.len()).unwrap().to_be_bytes());
        records.extend_from_slice(chunk);
    }
    records
}
