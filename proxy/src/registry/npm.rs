//! npm's request shapes: packuments (`/name`, `/@scope%2fname`, `/@scope/name`; full or
//! abbreviated, which the `Accept` header picks and the path does not change), one
//! version's manifest (`/name/1.2.3`), and tarballs (`/name/-/name-1.2.3.tgz`, and for
//! scoped names `/@scope/name/-/name-1.2.3.tgz`, whose file name omits the scope).

use egressgate_store::Package;

use super::{Artifact, Mapping};

/// Maps decoded path segments (a `%2f` inside a scoped name is already a `/`).
pub(super) fn map(segs: &[&str]) -> Mapping {
    // `/-/ping` and the root say nothing about a package.
    match segs {
        [] | ["-", "ping"] => return Mapping::Metadata,
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
    let Ok(package) = Package::parse(&format!("npm:{name}")) else {
        return Mapping::Unmappable;
    };
    let bare = name.rsplit('/').next().unwrap_or(&name);
    match rest {
        [] => Mapping::Package {
            package,
            version: None,
            artifact: Artifact::None,
        },
        [version] if *version != "-" => Mapping::Package {
            package,
            version: Some((*version).to_owned()),
            artifact: Artifact::None,
        },
        ["-", file] => match file
            .strip_suffix(".tgz")
            .and_then(|f| f.strip_prefix(bare))
            .and_then(|f| f.strip_prefix('-'))
        {
            Some(version) if !version.is_empty() => Mapping::Package {
                package,
                version: Some(version.to_owned()),
                artifact: Artifact::Other,
            },
            _ => Mapping::Unmappable,
        },
        _ => Mapping::Unmappable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Ecosystem, map as map_path};
    use http::Method;

    fn map(path: &str) -> Mapping {
        map_path(Ecosystem::Npm, &Method::GET, path)
    }

    fn pkg(name: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
        Mapping::Package {
            package: Package::parse(&format!("npm:{name}")).unwrap_or_else(|e| unreachable!("{e}")),
            version: version.map(str::to_owned),
            artifact,
        }
    }

    #[test]
    fn packuments_and_tarballs() {
        assert_eq!(map("/"), Mapping::Metadata);
        assert_eq!(map("/-/ping"), Mapping::Metadata);
        assert_eq!(map("/lodash"), pkg("lodash", None, Artifact::None));
        assert_eq!(
            map("/@types%2fnode"),
            pkg("@types/node", None, Artifact::None)
        );
        assert_eq!(
            map("/@types%2Fnode"),
            pkg("@types/node", None, Artifact::None)
        );
        assert_eq!(
            map("/@types/node"),
            pkg("@types/node", None, Artifact::None)
        );
        assert_eq!(
            map("/lodash/4.17.21"),
            pkg("lodash", Some("4.17.21"), Artifact::None)
        );
        assert_eq!(
            map("/lodash/-/lodash-4.17.21.tgz"),
            pkg("lodash", Some("4.17.21"), Artifact::Other)
        );
        assert_eq!(
            map("/@types/node/-/node-20.1.0.tgz"),
            pkg("@types/node", Some("20.1.0"), Artifact::Other)
        );
        assert_eq!(
            map("/@types%2fnode/-/node-20.1.0.tgz"),
            pkg("@types/node", Some("20.1.0"), Artifact::Other)
        );
        for bad in [
            // A tarball of another package under an approved one's path.
            "/lodash/-/evil-1.0.0.tgz",
            "/lodash/-/lodash-.tgz",
            "/lodash/-/lodash-1.0.0.tar.gz",
            "/lodash/a/b",
            "/-/npm/v1/security/audits/quick",
            "/-/v1/search",
            "/Upper",
            "/@scope",
            "/@a/b/c/d",
        ] {
            assert_eq!(map(bad), Mapping::Unmappable, "{bad:?}");
        }
    }
}
