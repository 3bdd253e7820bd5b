//! PyPI's request shapes: the simple index (PEP 503 HTML and PEP 691 JSON share paths),
//! the JSON API, and files (`/packages/…/FILENAME`, on the files host or a mirror such as
//! pypiserver's flat `/packages/FILENAME`), whose project comes from the filename alone. The
//! last segment of a file request is exactly a wheel or sdist name (or its PEP 658
//! `.metadata`), and a version anywhere is a PEP 440 version: nothing else is judged as one.

use std::str::FromStr as _;

use egressgate_store::Package;

use super::{Artifact, Mapping};

/// Maps decoded path segments. `trailing_slash`: the path ended in `/`, which only the
/// index's pages are spelt with.
pub(super) fn map(segs: &[&str], trailing_slash: bool) -> Mapping {
    match (segs, trailing_slash) {
        ([] | ["simple"], _) => Mapping::Metadata,
        (["simple", name], _) => package(name, None, Artifact::None),
        (_, true) => Mapping::Unmappable,
        (["pypi", name, "json"], _) => package(name, None, Artifact::None),
        (["pypi", name, version, "json"], _) if is_version(version) => {
            package(name, Some(version), Artifact::None)
        }
        (["packages", .., file], _) => file_mapping(file),
        _ => Mapping::Unmappable,
    }
}

/// A request about the PyPI project `name` (normalised as PEP 503 says by the store's parser).
fn package(name: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
    Mapping::package(&format!("pip:{name}"), version, artifact)
}

/// Source distribution suffixes (PEP 625's `.tar.gz` and the legacy ones pip still reads).
const SDIST: [&str; 6] = [".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar"];

/// A file's project and version from its name: a wheel (`name-ver(-build)?-py-abi-plat.whl`,
/// PEP 427), its PEP 658 metadata (`….whl.metadata`), or an sdist (`name-ver.tar.gz`).
/// Anything else is unmappable.
fn file_mapping(file: &str) -> Mapping {
    let (file, metadata) = match file.strip_suffix(".metadata") {
        Some(f) => (f, true),
        None => (file, false),
    };
    let (name, version, artifact) = if let Some(stem) = file.strip_suffix(".whl") {
        match wheel_split(stem) {
            Some((name, version)) => (name, version, Artifact::Wheel),
            None => return Mapping::Unmappable,
        }
    } else {
        let Some(stem) = SDIST.iter().find_map(|s| file.strip_suffix(s)) else {
            return Mapping::Unmappable;
        };
        match sdist_split(stem) {
            Some((name, version)) => (name, version, Artifact::Other),
            None => return Mapping::Unmappable,
        }
    };
    let artifact = if metadata { Artifact::None } else { artifact };
    package(name, Some(version), artifact)
}

/// A wheel stem's (name, version): five or six `-`-separated parts (PEP 427), the name's
/// never holding `-`, the version PEP 440, a build tag starting with a digit, and the three
/// compatibility tags letters, digits, `_` and `.` (`py2.py3`, `manylinux_2_17_x86_64`).
fn wheel_split(stem: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = stem.split('-').collect();
    let (name, version, build, tags) = match parts.as_slice() {
        [n, v, tags @ ..] if tags.len() == 3 => (*n, *v, None, tags),
        [n, v, b, tags @ ..] if tags.len() == 3 => (*n, *v, Some(*b), tags),
        _ => return None,
    };
    let tag_ok = |t: &&str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
    };
    let build_ok = build.is_none_or(|b| {
        b.starts_with(|c: char| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
    });
    (is_version(version) && build_ok && tags.iter().all(tag_ok)).then_some((name, version))
}

/// Splits an sdist stem into (name, version). Legacy names may hold `-`, so every `-` is a
/// candidate split point whose left side is a valid name and right side a PEP 440 version;
/// exactly one candidate must remain. `victim-1.0-1` could be project `victim` version
/// `1.0-1` (a post release) or project `victim-1.0` version `1`: ambiguous, so unmappable,
/// never a guess that might name another (approved) project.
fn sdist_split(stem: &str) -> Option<(&str, &str)> {
    let mut found = None;
    for (i, _) in stem.match_indices('-') {
        let (name, version) = (&stem[..i], &stem[i + 1..]);
        if Package::parse(&format!("pip:{name}")).is_ok() && is_version(version) {
            if found.is_some() {
                return None;
            }
            found = Some((name, version));
        }
    }
    found
}

fn is_version(v: &str) -> bool {
    !v.is_empty() && pep440_rs::Version::from_str(v).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Ecosystem, expect};

    fn pkg(name: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
        expect::pkg(&format!("pip:{name}"), version, artifact)
    }

    #[test]
    fn index_and_json_api() {
        let good = [
            ("/", Mapping::Metadata),
            ("/simple/", Mapping::Metadata),
            ("/simple/NumPy/", pkg("numpy", None, Artifact::None)),
            (
                "/simple/zope.interface",
                pkg("zope-interface", None, Artifact::None),
            ),
            ("/pypi/Requests/json", pkg("requests", None, Artifact::None)),
            (
                "/pypi/requests/2.32.3/json",
                pkg("requests", Some("2.32.3"), Artifact::None),
            ),
        ];
        let bad = [
            "/simple/-bad-/",
            "/simple/a/b/",
            "/pypi/requests",
            "/admin/",
            "/simple/a%2fb/",
            "/favicon.ico",
            "/pypi/requests/json/",
            "/pypi/requests/2.32.3/json/",
            "/pypi/requests/latest/json",
            "/pypi/requests/..%2f..%2f..%2fpackages%2fevil-1.0.tar.gz%3f/json",
            "/pypi/requests/2.0%3f/json",
            "/pypi/requests/2.0;x/json",
            "/simple/numpy/?format=json",
            "/simple/numpy%3f/",
            "/simple/numpy%23/",
            "/simple/numpy;x/",
        ];
        expect::table(Ecosystem::Pypi, &good, &bad);
    }

    #[test]
    fn files_map_to_their_project() {
        let good = [
            (
                "/packages/ab/cd/ef0123/numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl",
                pkg("numpy", Some("2.1.3"), Artifact::Wheel),
            ),
            (
                "/packages/torch-2.1.0%2Bcpu-cp311-cp311-linux_x86_64.whl",
                pkg("torch", Some("2.1.0+cpu"), Artifact::Wheel),
            ),
            (
                "/packages/six-1.16.0-py2.py3-none-any.whl",
                pkg("six", Some("1.16.0"), Artifact::Wheel),
            ),
            (
                "/packages/Foo_Bar-1.0-1-py3-none-any.whl",
                pkg("foo-bar", Some("1.0"), Artifact::Wheel),
            ),
            (
                "/packages/foo_bar-1.0-py3-none-any.whl.metadata",
                pkg("foo-bar", Some("1.0"), Artifact::None),
            ),
            (
                "/packages/python-dateutil-2.8.2.tar.gz",
                pkg("python-dateutil", Some("2.8.2"), Artifact::Other),
            ),
            (
                "/packages/requests-2.32.3.zip",
                pkg("requests", Some("2.32.3"), Artifact::Other),
            ),
        ];
        let bad = [
            // Ambiguous: `victim` 1.0-1 (post release) or `victim-1.0` 1.
            "/packages/victim-1.0-1.tar.gz",
            "/packages/numpy-2.1.3.exe",
            "/packages/numpy.whl",
            "/packages/numpy-x-py3-none-any.whl",
            "/packages/numpy-1.0-py3-none.whl",
            "/packages/nodash.tar.gz",
            "/packages/",
            "/packages/numpy-1.0-py3-none-any.whl/",
            "/packages/numpy-1.0-x-py3-none-any.whl",
            "/packages/numpy-1.0-py3-none-an%2fy.whl",
            "/packages/numpy-1.0-py3-none-any.whl%3f/approved-1.0-py3-none-any.whl",
            "/packages/evil-1.0-py3-none-any.whl%23/approved-1.0-py3-none-any.whl",
            "/packages/evil-1.0-py3-none-any.whl;/approved-1.0-py3-none-any.whl",
            "/packages/evil-1.0-py3-none-any.whl%5c..%5capproved-1.0-py3-none-any.whl",
            "/packages/x%2f..%2f..%2fprivate/approved-1.0-py3-none-any.whl",
            "/packages/x%252f..%252fprivate/approved-1.0-py3-none-any.whl",
            "/packages/approved-1.0.tar.gz?x=1",
        ];
        expect::table(Ecosystem::Pypi, &good, &bad);
    }
}
