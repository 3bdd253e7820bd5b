//! TLS ClientHellos as raw bytes, for the tests that judge first bytes: a real rustls hello,
//! the same re-framed as two records, one grown past what a parser will take, and one
//! carrying an Encrypted Client Hello extension.

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

fn u16be(n: usize) -> [u8; 2] {
    u16::try_from(n).unwrap().to_be_bytes()
}

fn extension(kind: u16, body: &[u8]) -> Vec<u8> {
    let mut e = kind.to_be_bytes().to_vec();
    e.extend(u16be(body.len()));
    e.extend(body);
    e
}

/// A TLS 1.3 ClientHello naming `sni`, carrying an `encrypted_client_hello` (0xfe0d) outer
/// extension: HPKE suite, config id, a 32-byte encapsulated key and a payload (random-looking,
/// as in a GREASE ECH extension, which has the same shape as a real one).
pub fn ech_client_hello(sni: &str) -> Vec<u8> {
    let mut name = vec![0u8]; // host_name
    name.extend(u16be(sni.len()));
    name.extend(sni.as_bytes());
    let mut server_name = u16be(name.len()).to_vec();
    server_name.extend(name);
    let mut key_share = u16be(36).to_vec();
    key_share.extend([0x00, 0x1d, 0x00, 0x20]);
    key_share.extend([0x42; 32]);
    let mut ech = vec![0x00, 0x00, 0x01, 0x00, 0x01, 0x07]; // outer, HKDF-SHA256, AES-128-GCM, config 7
    ech.extend(u16be(32));
    ech.extend([0x11; 32]);
    ech.extend(u16be(144));
    ech.extend([0x5a; 144]);
    let exts = [
        extension(0x0000, &server_name),
        extension(0x000a, &[0x00, 0x02, 0x00, 0x1d]),
        extension(0x000d, &[0x00, 0x04, 0x08, 0x04, 0x04, 0x03]),
        extension(0x002b, &[0x02, 0x03, 0x04]),
        extension(0x0033, &key_share),
        extension(0xfe0d, &ech),
    ]
    .concat();
    let mut body = vec![0x03, 0x03];
    body.extend([0x24; 32]); // random
    body.push(32);
    body.extend([0x33; 32]); // legacy session id
    body.extend([0x00, 0x02, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
    body.extend([0x01, 0x00]); // no compression
    body.extend(u16be(exts.len()));
    body.extend(exts);
    let mut hs = vec![0x01, 0x00];
    hs.extend(u16be(body.len()));
    hs.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(u16be(hs.len()));
    record.extend(hs);
    record
}
