//! Package names as people approve them: PyPI names normalised per PEP 503 (bare or `pip:`),
//! npm names per npm's rules (`npm:`), so one package has one key however the agent spells it.

mod pin;

pub use pin::PackageSpec;

/// Why a package name cannot be put on a card.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageError {
    /// An ecosystem prefix we do not know (`cargo:`, `gem:`).
    #[error("unknown package ecosystem {0:?} (use a bare or pip: name, or npm:)")]
    UnknownEcosystem(String),
    /// Not a valid PEP 508 project name.
    #[error("not a valid PyPI project name")]
    BadPypiName,
    /// Not a valid npm package name.
    #[error("not a valid npm package name: {0}")]
    BadNpmName(&'static str),
    /// A version pin that does not parse (PEP 440 specifiers, npm semver ranges).
    #[error("not a valid version pin: {0}")]
    BadPin(String),
}

/// A validated package name in canonical form: `requests` (PyPI, the default ecosystem) or
/// `npm:@scope/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Package(String);

const NPM_MAX_LEN: usize = 214;

impl Package {
    /// Validates and canonicalises a name as given by an agent or administrator.
    pub fn parse(input: &str) -> Result<Self, PackageError> {
        let input = input.trim();
        match input.split_once(':') {
            None => pypi(input),
            Some(("pip" | "pypi", name)) => pypi(name),
            Some(("npm", name)) => npm(name),
            Some((eco, _)) => Err(PackageError::UnknownEcosystem(eco.to_owned())),
        }
    }

    /// The canonical key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Rebuilds a name this crate wrote to the database.
    pub fn from_db(s: String) -> Self {
        Self(s)
    }
}

impl std::fmt::Display for Package {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// PEP 508 name shape, then PEP 503 normalisation (lower-case, runs of `-_.` become `-`).
fn pypi(name: &str) -> Result<Package, PackageError> {
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    let ok = !b.is_empty()
        && b.len() <= 200
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        return Err(PackageError::BadPypiName);
    }
    let mut out = String::with_capacity(name.len());
    let mut in_sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_sep {
                out.push('-');
            }
            in_sep = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_sep = false;
        }
    }
    Ok(Package(out))
}

/// npm's rules for new packages: at most 214 characters, lower-case, URL-safe, not starting
/// with `.` or `_`, optionally `@scope/name`.
fn npm(name: &str) -> Result<Package, PackageError> {
    if name.is_empty() || name.len() > NPM_MAX_LEN {
        return Err(PackageError::BadNpmName("length must be 1 to 214"));
    }
    if name.trim() != name {
        return Err(PackageError::BadNpmName("surrounding spaces"));
    }
    let (scope, bare) = match name.strip_prefix('@') {
        Some(rest) => match rest.split_once('/') {
            Some((s, n)) => (Some(s), n),
            None => return Err(PackageError::BadNpmName("scope without /name")),
        },
        None => (None, name),
    };
    let part_ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && !p.starts_with('_')
            && p.bytes().all(|c| {
                c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || matches!(c, b'-' | b'.' | b'_' | b'~')
            })
    };
    if scope.is_some_and(|s| !part_ok(s)) || !part_ok(bare) {
        return Err(PackageError::BadNpmName(
            "lower-case letters, digits and -._~ only, not starting with . or _",
        ));
    }
    if scope.is_none() && matches!(bare, "node_modules" | "favicon.ico") {
        return Err(PackageError::BadNpmName("reserved name"));
    }
    Ok(Package(format!("npm:{name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        match Package::parse(s) {
            Ok(p) => p.0,
            Err(e) => unreachable!("{s}: {e}"),
        }
    }

    #[test]
    fn pypi_names_normalise_per_pep_503() {
        assert_eq!(ok("Requests"), "requests");
        assert_eq!(ok("pip:Foo__Bar.baz"), "foo-bar-baz");
        assert_eq!(ok("zope.interface"), "zope-interface");
        for bad in ["", "-foo", "foo-", "foo bar", "pip:", "a/b", "foo@1.0"] {
            assert!(Package::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn npm_names_follow_npm_rules() {
        assert_eq!(ok("npm:left-pad"), "npm:left-pad");
        assert_eq!(ok("npm:@types/node"), "npm:@types/node");
        for bad in [
            "npm:",
            "npm:Left-Pad",
            "npm:.hidden",
            "npm:_x",
            "npm:@scope",
            "npm:a b",
            "npm:node_modules",
            &format!("npm:{}", "a".repeat(215)),
        ] {
            assert!(Package::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_ecosystem() {
        assert_eq!(
            Package::parse("gem:rails"),
            Err(PackageError::UnknownEcosystem("gem".into()))
        );
    }
}
