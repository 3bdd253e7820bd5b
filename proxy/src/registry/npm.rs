//! npm's request shapes: packuments (`/name`, `/@scope%2fname`, `/@scope/name`; full or
//! abbreviated, which the `Accept` header picks and the path does not change), one
//! version's manifest (`/name/1.2.3`, or a dist-tag such as `/name/latest`), and tarballs
//! (`/name/-/name-1.2.3.tgz`, and for scoped names `/@scope/name/-/name-1.2.3.tgz`, whose
//! file name omits the scope). Versions are semver, tags plain tokens: nothing else is
//! judged as a version, so no `..` or `/` rides in one to a server that resolves it.

use super::{Artifact, Mapping};

/// Longest dist-tag taken as one (npm's own are short words: `latest`, `next`, `beta`).
const TAG_MAX: usize = 64;

/// Maps decoded path segments (a `%2f` inside a scoped name is already a `/`).
/// `trailing_slash`: the path ended in `/`, which npm never sends but for the root.
pub(super) fn map(segs: &[&str], trailing_slash: bool) -> Mapping {
    // `/-/ping` and the root say nothing about a package.
    match segs {
        [] => return Mapping::Metadata,
        _ if trailing_slash => return Mapping::Unmappable,
        ["-", "ping"] => return Mapping::Metadata,
        [first, ..] if first.starts_with('-') => return Mapping::Unmappable,
        _ => {}
    }
    // Join a scope split over two segments (`/@scope/name/...`).
    let (name, rest): (String, &[&str]) = match segs {
        [scope, name, rest @ ..] if scope.starts_with('@') && !scope.contains('/') => {
            (format!("{scope}/{name}"), rest)
        }
        [name, rest @ ..] => ((*name).to_owned(), rest),
        [] => return Mapping::Unmappable,
    };
    let bare = name.rsplit('/').next().unwrap_or(&name);
    let (version, artifact) = match rest {
        [] => (None, Artifact::None),
        [version] if is_version(version) || is_tag(version) => (Some(*version), Artifact::None),
        ["-", file] => match file
            .strip_suffix(".tgz")
            .and_then(|f| f.strip_prefix(bare))
            .and_then(|f| f.strip_prefix('-'))
        {
            Some(version) if is_version(version) => (Some(version), Artifact::Other),
            _ => return Mapping::Unmappable,
        },
        _ => return Mapping::Unmappable,
    };
    Mapping::package(&format!("npm:{name}"), version, artifact)
}

/// A semver version exactly as npm writes one (`1.2.3`, `1.0.0-rc.1`, `1.0.0+build.5`).
fn is_version(v: &str) -> bool {
    semver::Version::parse(v).is_ok()
}

/// A dist-tag's shape: a letter, then letters, digits, `-._` (npm's own are words such as
/// `latest` and `next`; npm refuses a tag that is a semver range, so none starts with a digit).
fn is_tag(t: &str) -> bool {
    t.len() <= TAG_MAX
        && t.starts_with(|c: char| c.is_ascii_alphabetic())
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Ecosystem, expect};

    fn pkg(name: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
        expect::pkg(&format!("npm:{name}"), version, artifact)
    }

    #[test]
    fn packuments_and_tarballs() {
        let good = [
            ("/", Mapping::Metadata),
            ("/-/ping", Mapping::Metadata),
            ("/lodash", pkg("lodash", None, Artifact::None)),
            ("/@types%2fnode", pkg("@types/node", None, Artifact::None)),
            ("/@types%2Fnode", pkg("@types/node", None, Artifact::None)),
            ("/@types/node", pkg("@types/node", None, Artifact::None)),
            (
                "/lodash/4.17.21",
                pkg("lodash", Some("4.17.21"), Artifact::None),
            ),
            (
                "/lodash/-/lodash-4.17.21.tgz",
                pkg("lodash", Some("4.17.21"), Artifact::Other),
            ),
            (
                "/@types/node/-/node-20.1.0.tgz",
                pkg("@types/node", Some("20.1.0"), Artifact::Other),
            ),
            (
                "/@types%2fnode/-/node-20.1.0.tgz",
                pkg("@types/node", Some("20.1.0"), Artifact::Other),
            ),
            (
                "/lodash/latest",
                pkg("lodash", Some("latest"), Artifact::None),
            ),
            (
                "/left~pad/-/left~pad-1.0.0-rc.1.tgz",
                pkg("left~pad", Some("1.0.0-rc.1"), Artifact::Other),
            ),
        ];
        let bad = [
            // A tarball of another package under an approved one's path.
            "/lodash/-/evil-1.0.0.tgz",
            "/lodash/-/lodash-.tgz",
            "/lodash/-/lodash-1.0.0.tar.gz",
            "/lodash/-/lodash-1.0.tgz",
            "/lodash/-/lodash-latest.tgz",
            "/lodash/a/b",
            "/lodash/",
            "/lodash/-/lodash-1.0.0.tgz/",
            "/-/npm/v1/security/audits/quick",
            "/-/v1/search",
            "/Upper",
            "/@scope",
            "/@a/b/c/d",
            // A decoded `/` makes a file server read another path than the one judged.
            "/evil/-%2fevil-1.0.0.tgz",
            "/evil/-%2Fevil-1.0.0.tgz",
            "/approved/..%2fevil%2f-%2fevil-1.0.0.tgz",
            "/approved/-/approved-1.0.0%2f..%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
            "/approved/-/approved-..%2f..%2fevil-1.0.0.tgz",
            "/approved/1.0.0%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
            "/@scope%2fapproved%2f..%2f..%2fevil/-/evil-1.0.0.tgz",
            "/@scope%2fapproved/-%2f..%2f..%2fevil%2f-%2fevil-1.0.0.tgz",
            // Versions are semver or a tag token, nothing a server resolves.
            "/approved/..",
            "/approved/%2e%2e",
            "/approved/1.0.0%3f",
            "/approved/1.0.0;x",
            "/approved/1.0.0%5c..%5cevil",
            "/approved/-/approved-1.0.0.tgz%3f.tgz",
            "/approved/-/approved-1.0.0.tgz%23.tgz",
            "/approved/-/approved-1.0.0.tgz;.tgz",
            "/approved/-/approved-1.0.0%252f..tgz",
            "/approved//-/approved-1.0.0.tgz",
            "//approved/-/approved-1.0.0.tgz",
            "/approved/^1",
            "/approved/1.x",
        ];
        expect::table(Ecosystem::Npm, &good, &bad);
    }
}
