//! The relay's head re-serialisation: `egressgate_proxy::http1::{head, encode}`. What the relay
//! passes on is a head it wrote from the parts it judged; this target holds that written head
//! against the judgement.
//!
//! Invariants checked (a panic is a finding):
//! * No input panics the parser, the framing or the writer.
//! * A head that frames is written as exactly one complete head: parsing the written bytes
//!   takes all of them, and frames again.
//! * The written head means what was judged: the same method, origin-form target and version,
//!   the same body length, exactly one `Host` naming the approved authority, no `Connection`
//!   option but HTTP/1.0's keep-alive (a client's `close` is this hop's: the origin is asked to
//!   close only where HTTP/1.0 closes by default), and the same end-to-end fields in the same
//!   order (values trimmed).
//! * Writing is a fixed point: the written head, framed and written again, is the same bytes.
#![no_main]

use egressgate_proxy::http1::encode::write_head;
use egressgate_proxy::http1::{MAX_HEADERS, RequestHead, Version};
use libfuzzer_sys::fuzz_target;

const AUTHORITY: &str = "files.example.com:8080";

fn fields(f: &egressgate_proxy::http1::Framed<'_, '_>) -> Vec<(String, Vec<u8>)> {
    f.end_to_end()
        .map(|h| (h.name.to_ascii_lowercase(), h.value.trim_ascii().to_vec()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let Ok(Some(head)) = RequestHead::parse(data, &mut headers, 64 * 1024) else {
        return;
    };
    let Ok(framed) = head.frame() else { return };
    let mut written = Vec::new();
    write_head(&framed, AUTHORITY, &mut written);

    // The written head may hold two fields the client's did not: the `Host` an HTTP/1.0
    // request may leave out, and the one connection option (a limit of ours, not the origin's).
    let mut again_headers = [httparse::EMPTY_HEADER; MAX_HEADERS + 2];
    let again = match RequestHead::parse(&written, &mut again_headers, usize::MAX) {
        Ok(Some(h)) => h,
        other => panic!("the written head does not parse: {other:?}: {written:?}"),
    };
    assert_eq!(
        again.size,
        written.len(),
        "one head, all of it: {written:?}"
    );
    let hosts: Vec<&[u8]> = again.hosts().collect();
    assert_eq!(hosts, [AUTHORITY.as_bytes()], "{written:?}");
    let refr = again
        .frame()
        .unwrap_or_else(|e| panic!("does not frame again ({e}): {written:?}"));
    assert_eq!(refr.head.method, framed.head.method);
    assert_eq!(refr.head.version, framed.head.version);
    assert_eq!(
        refr.head.target.origin_form(),
        framed.head.target.origin_form()
    );
    assert_eq!(refr.body, framed.body, "{written:?}");
    // A client's `close` is this hop's (the relay ends the tunnel and may keep the origin
    // connection): the written head asks the origin to close only where HTTP/1.0 does.
    let origin_close = framed.close && framed.head.version == Version::Http10;
    assert_eq!(refr.close, origin_close, "{written:?}");
    assert_eq!(fields(&refr), fields(&framed), "{written:?}");
    let connection: Vec<String> = written
        .split(|b| *b == b'\n')
        .filter(|l| l.len() > 11 && l[..11].eq_ignore_ascii_case(b"connection:"))
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    match framed.head.version {
        Version::Http10 if !framed.close => assert_eq!(connection, ["connection: keep-alive\r"]),
        _ => assert!(connection.is_empty(), "{connection:?}"),
    }
    let mut twice = Vec::new();
    write_head(&refr, AUTHORITY, &mut twice);
    assert_eq!(twice, written, "writing is a fixed point");
});
