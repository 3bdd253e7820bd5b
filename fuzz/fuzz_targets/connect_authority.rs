//! The proxy's request-target parsers: the CONNECT authority (`host:port`), and alongside it
//! the `Host` header and absolute-form URI parsers from the same module.
//!
//! The brief named `parse_authority(&str) -> Result<(Host, u16), _>`; the proxy as written
//! exposes `egressgate_proxy::target::parse_authority(&str) -> Result<Target, TargetError>`
//! with `Target { host: Host, port: u16 }`, which this target uses.
//!
//! Invariants checked (a panic is a finding):
//! * Every successful parse has a canonical host (re-parsing `host.as_str()` gives the same
//!   Host) and a non-zero port.
//! * Idempotent: formatting a result back as `host:port` and giving it to `parse_authority`
//!   yields the same target (IPv6 hosts are kept bracketed, so the format is unambiguous).
//! * The three parsers agree: when `parse_authority(s)`, `parse_host_header(s, 80)` and
//!   `parse_absolute("http://{s}/")` all succeed on the same text, they name the same target
//!   (a Host header and an absolute URI must not be read as different places).
#![no_main]

use egressgate_proxy::target::{Target, parse_absolute, parse_authority, parse_host_header};
use egressgate_store::Host;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    let connect = parse_authority(s).ok();
    if let Some(t) = &connect {
        check(t, s, "parse_authority");
    }

    let header = parse_host_header(s, 80).ok();
    if let Some(t) = &header {
        check(t, s, "parse_host_header");
    }

    let absolute = http::Uri::try_from(format!("http://{s}/"))
        .ok()
        .and_then(|u| parse_absolute(&u).ok());
    if let Some(t) = &absolute {
        check(t, s, "parse_absolute(http://s/)");
    }
    // The raw input as a request target too (`http://...`, `HTTP://...`, junk).
    if let Ok(u) = http::Uri::try_from(s) {
        if let Ok(t) = parse_absolute(&u) {
            check(&t, s, "parse_absolute(s)");
        }
    }

    if let (Some(c), Some(h)) = (&connect, &header) {
        assert_eq!(c, h, "{s:?}: CONNECT authority and Host header disagree");
    }
    if let (Some(h), Some(a)) = (&header, &absolute) {
        assert_eq!(h, a, "{s:?}: Host header and absolute URI disagree");
    }
});

fn check(t: &Target, s: &str, what: &str) {
    assert_ne!(t.port, 0, "{what}({s:?}): port 0 accepted");
    assert_eq!(
        Host::parse(t.host.as_str()).as_ref(),
        Ok(&t.host),
        "{what}({s:?}): host not canonical"
    );
    let formatted = format!("{}:{}", t.host, t.port);
    match parse_authority(&formatted) {
        Ok(again) => assert_eq!(&again, t, "{what}({s:?}) -> {formatted:?} not idempotent"),
        Err(e) => {
            panic!("{what}({s:?}) accepted, but its canonical form {formatted:?} is refused: {e}")
        }
    }
}
