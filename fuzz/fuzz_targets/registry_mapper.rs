//! The package registry mappers: `egressgate_proxy::registry::map` (request path → package)
//! for both ecosystems and every method, and the wheel `Requires-Dist` reader.
//!
//! Invariants checked (a panic is a finding):
//! * No input panics either mapper.
//! * A mapped package is canonical: `Package::parse` of its text gives it back.
//! * A file download (wheel, sdist, tarball) always names a version, and only reads map.
//! * The mapping is a function of the path: mapping twice gives the same answer.
//! * The dependency reader returns at most 50 canonical packages.
#![no_main]

use egressgate_proxy::registry::{self, Artifact, Ecosystem, Mapping};
use egressgate_store::Package;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(path) = std::str::from_utf8(rest) else { return };
    let method = match selector % 4 {
        0 => http::Method::GET,
        1 => http::Method::HEAD,
        2 => http::Method::POST,
        _ => http::Method::PUT,
    };
    for eco in [Ecosystem::Pypi, Ecosystem::Npm] {
        let m = registry::map(eco, &method, path);
        assert_eq!(m, registry::map(eco, &method, path), "not deterministic: {path:?}");
        if let Mapping::Package { package, version, artifact } = &m {
            assert!(
                method == http::Method::GET || method == http::Method::HEAD,
                "{method} mapped: {path:?}"
            );
            assert_eq!(
                Package::parse(package.as_str()).as_ref(),
                Ok(package),
                "not canonical: {path:?} -> {package}"
            );
            if *artifact != Artifact::None {
                assert!(version.is_some(), "file without a version: {path:?}");
            }
        }
    }
    let deps = registry::wheel::requires_dist(path);
    assert!(deps.len() <= 50);
    for d in &deps {
        assert_eq!(Package::parse(d.as_str()).as_ref(), Ok(d));
    }
});
