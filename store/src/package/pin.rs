//! Version pins on package grants: `numpy==2.1.*` (PEP 440 specifiers) and `npm:lodash@^4`
//! (npm semver ranges). A grant names a package and, optionally, the versions it covers; the
//! proxy asks [`PackageSpec::admits`] with the version a request names.
//!
//! What a pin admits is what a person reading it expects, never more. PEP 440: no pre-release
//! or dev release unless a specifier of the pin names one (`>=2.0rc1`), and no local version
//! (`1.0+cpu`) unless a specifier names one (`==1.0+cpu`): `==1.*` admits neither `1.1rc1`,
//! `1.5.dev0` nor `1.0+evil`. npm: a comparator without an operator is npm's exact version or
//! X-range (`1.0.0` is `=1.0.0`, `1.2` is `1.2.x`; not Cargo's caret), a pre-release matches
//! only a range naming a pre-release of the same major.minor.patch (semver's rule, which the
//! `semver` crate applies), and build metadata (`1.0.0+evil`, which npm's ordering ignores)
//! only an unpinned grant.

use std::str::FromStr as _;

use super::{Package, PackageError};

/// The versions a pinned grant covers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pin {
    /// PEP 440 specifiers (`==2.1.*`, `>=1,<2`).
    Pypi(pep440_rs::VersionSpecifiers),
    /// npm ranges: any of the `||` alternatives (`^4`, `>=1.2.0 <2`).
    Npm(Vec<semver::VersionReq>),
}

/// A package grant as administrators, launch lists and cards write it: a canonical package
/// name and optionally a pin, kept in one canonical text (`numpy==2.1.*`, `npm:lodash@^4`,
/// or just the name), so one grant has one key however it was spelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageSpec {
    package: Package,
    pin: Option<Pin>,
    text: String,
}

impl PackageSpec {
    /// Validates a name with an optional pin.
    pub fn parse(input: &str) -> Result<Self, PackageError> {
        let input = input.trim();
        if let Some(rest) = input.strip_prefix("npm:") {
            return npm(rest);
        }
        let bare = input
            .strip_prefix("pip:")
            .or_else(|| input.strip_prefix("pypi:"))
            .unwrap_or(input);
        match bare.find(['=', '<', '>', '!', '~']) {
            None => Ok(Self::unpinned(Package::parse(input)?)),
            Some(at) => {
                let package = Package::parse(bare[..at].trim())?;
                let specs = pep440_rs::VersionSpecifiers::from_str(&bare[at..])
                    .map_err(|e| PackageError::BadPin(e.to_string()))?;
                if specs.is_empty() {
                    return Err(PackageError::BadPin("empty version specifier".into()));
                }
                let text = format!("{package}{}", specs.to_string().replace(' ', ""));
                Ok(Self {
                    package,
                    pin: Some(Pin::Pypi(specs)),
                    text,
                })
            }
        }
    }

    /// A grant of every version of `package`.
    pub fn unpinned(package: Package) -> Self {
        Self {
            text: package.as_str().to_owned(),
            package,
            pin: None,
        }
    }

    /// The package it grants.
    pub fn package(&self) -> &Package {
        &self.package
    }

    /// Whether it names versions at all.
    pub fn is_pinned(&self) -> bool {
        self.pin.is_some()
    }

    /// The canonical text (the stored key).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a request for `version` of this package is covered. `None` (metadata that
    /// names no version) is covered by any grant of the package; a version that does not
    /// parse is covered only by an unpinned grant (fail closed).
    pub fn admits(&self, version: Option<&str>) -> bool {
        let (Some(pin), Some(v)) = (&self.pin, version) else {
            return true;
        };
        match pin {
            Pin::Pypi(specs) => {
                pep440_rs::Version::from_str(v).is_ok_and(|v| pypi_admits(specs, &v))
            }
            Pin::Npm(reqs) => semver::Version::parse(v)
                .is_ok_and(|v| v.build.is_empty() && reqs.iter().any(|r| r.matches(&v))),
        }
    }
}

/// PEP 440 specifiers' answer with the pre-release and local-version exclusions: a pre or
/// dev release only when a specifier names one, a local version only when a specifier names
/// one (`!=` names nothing: it excludes).
fn pypi_admits(specs: &pep440_rs::VersionSpecifiers, v: &pep440_rs::Version) -> bool {
    use pep440_rs::Operator;
    let naming = || {
        specs
            .iter()
            .filter(|s| !matches!(s.operator(), Operator::NotEqual | Operator::NotEqualStar))
    };
    (!v.any_prerelease() || naming().any(|s| s.version().any_prerelease()))
        && (!v.is_local() || naming().any(|s| s.version().is_local()))
        && specs.contains(v)
}

// Ordered, compared and hashed by the canonical text: one grant, one key.
impl std::hash::Hash for PackageSpec {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl PartialOrd for PackageSpec {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PackageSpec {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl std::fmt::Display for PackageSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// `name` or `name@range`, where a scoped name's leading `@` is part of the name.
fn npm(rest: &str) -> Result<PackageSpec, PackageError> {
    let at = rest
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == '@')
        .map(|(i, _)| i);
    let Some(at) = at else {
        return Ok(PackageSpec::unpinned(Package::parse(&format!(
            "npm:{rest}"
        ))?));
    };
    let package = Package::parse(&format!("npm:{}", &rest[..at]))?;
    let range = rest[at + 1..].trim();
    if range.is_empty() {
        return Err(PackageError::BadPin("empty version range".into()));
    }
    let mut reqs = Vec::new();
    let mut canon = Vec::new();
    for alt in range.split("||") {
        // npm separates comparators with spaces, Cargo's grammar with commas; a bare version
        // is npm's exact version or X-range, which Cargo spells with `=` (bare is a caret).
        let comparators: Vec<&str> = alt.split_whitespace().collect();
        let alt = comparators.join(",");
        let exact: Vec<String> = comparators
            .iter()
            .map(|c| match c.starts_with(|ch: char| ch.is_ascii_digit()) {
                true => format!("={c}"),
                false => (*c).to_owned(),
            })
            .collect();
        let req = semver::VersionReq::parse(&exact.join(","))
            .map_err(|e| PackageError::BadPin(format!("{alt:?}: {e}")))?;
        canon.push(alt);
        reqs.push(req);
    }
    let text = format!("{package}@{}", canon.join("||"));
    Ok(PackageSpec {
        package,
        pin: Some(Pin::Npm(reqs)),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> PackageSpec {
        PackageSpec::parse(s).unwrap_or_else(|e| unreachable!("{s}: {e}"))
    }

    #[test]
    fn pypi_pins() {
        let p = spec("NumPy==2.1.*");
        assert_eq!(p.as_str(), "numpy==2.1.*");
        assert_eq!(p.package().as_str(), "numpy");
        assert!(p.admits(Some("2.1.3")));
        assert!(!p.admits(Some("2.2.0")));
        assert!(!p.admits(Some("not a version")));
        assert!(p.admits(None), "metadata without a version");
        assert_eq!(spec("pip:a_b>=1, <2").as_str(), "a-b>=1,<2");
        assert!(spec("a-b>=1,<2").admits(Some("1.5")));
        assert!(!spec("a-b>=1,<2").admits(Some("2.0")));
        assert!(!spec("requests").is_pinned());
        assert!(spec("requests").admits(Some("whatever")));
        assert!(spec("requests").admits(Some("1.0rc1")));
        assert!(spec("requests").admits(Some("1.0+evil")));
        for bad in ["numpy==", "numpy==abc", "==1.0", "numpy=1"] {
            assert!(PackageSpec::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// Each row is (pin, version, admitted); every wrong row is reported at once.
    fn check(rows: &[(&str, &str, bool)]) {
        let wrong: Vec<_> = rows
            .iter()
            .filter(|(pin, v, want)| spec(pin).admits(Some(v)) != *want)
            .collect();
        assert!(wrong.is_empty(), "{wrong:?}");
    }

    #[test]
    fn pypi_pins_admit_pre_dev_and_local_versions_only_when_they_name_one() {
        let rows = [
            ("a==1.*", "1.0", true),
            ("a==1.*", "1.0.post1", true),
            ("a==1.*", "1.0rc1", false),
            ("a==1.*", "1.5.dev0", false),
            ("a==1.*", "1.0.post1.dev0", false),
            ("a==1.*", "1.0+evil", false),
            ("a==1.0", "1.0+evil", false),
            ("a~=1.0", "1.5.dev0", false),
            ("a~=1.0", "1.5a1", false),
            ("a>=1,<2", "1.5b2", false),
            ("a<2", "2.0rc1", false),
            ("a!=1.0rc1", "1.5rc1", false),
            ("a>=1.0rc1", "1.0rc1", true),
            ("a>=1.0rc1", "1.5.dev0", true),
            ("a>=1.0rc1,<2", "2.0rc1", false),
            ("a>=1.0rc1", "1.0+evil", false),
            ("a==1.0.dev3", "1.0.dev3", true),
            ("a==1.0+cpu", "1.0+cpu", true),
            ("a==1.0+cpu", "1.0+evil", false),
            ("a==1.0+cpu", "1.0", false),
            ("a===1.0+cpu", "1.0+cpu", true),
        ];
        check(&rows);
        // PEP 440 allows a local version only after `==`, `!=` and `===`.
        assert!(PackageSpec::parse("a>=1.0+cpu").is_err());
    }

    #[test]
    fn npm_pins_read_as_npm_with_semvers_pre_release_rule() {
        let rows = [
            ("npm:a@1.0.0", "1.0.0", true),
            ("npm:a@1.0.0", "1.5.0", false),
            ("npm:a@1.0.0", "1.0.1", false),
            ("npm:a@1.2", "1.2.9", true),
            ("npm:a@1.2", "1.3.0", false),
            ("npm:a@1", "1.9.0", true),
            ("npm:a@1", "2.0.0", false),
            ("npm:a@1.x", "1.9.0", true),
            ("npm:a@1.x", "2.0.0", false),
            ("npm:a@1.0.0-rc.1", "1.0.0-rc.1", true),
            ("npm:a@1.0.0-rc.1", "1.0.0", false),
            ("npm:a@^1", "1.1.0-rc.1", false),
            ("npm:a@*", "1.1.0-rc.1", false),
            ("npm:a@>=1.1.0-rc.1 <2", "1.1.0-rc.2", true),
            ("npm:a@>=1.1.0-rc.1 <2", "1.2.0-rc.1", false),
            ("npm:a@>=1.1.0-rc.1 <2", "1.5.0", true),
            ("npm:a@^1", "1.0.0+evil", false),
            ("npm:a@1.0.0", "1.0.0+evil", false),
            ("npm:a@1.0.0 || 2.0.0", "2.0.0", true),
            ("npm:a@1.0.0 || 2.0.0", "1.5.0", false),
        ];
        check(&rows);
        assert!(spec("npm:a").admits(Some("1.0.0+build")));
        assert!(spec("npm:a").admits(Some("1.1.0-rc.1")));
    }

    #[test]
    fn npm_pins() {
        let p = spec("npm:lodash@^4");
        assert_eq!(p.as_str(), "npm:lodash@^4");
        assert!(p.admits(Some("4.17.21")));
        assert!(!p.admits(Some("3.10.1")));
        assert!(!p.admits(Some("5.0.0")));
        let s = spec("npm:@types/node@>=18.0.0 <19 || ^20");
        assert_eq!(s.package().as_str(), "npm:@types/node");
        assert_eq!(s.as_str(), "npm:@types/node@>=18.0.0,<19||^20");
        assert!(s.admits(Some("18.2.0")));
        assert!(s.admits(Some("20.1.0")));
        assert!(!s.admits(Some("19.0.0")));
        assert!(!spec("npm:@types/node").is_pinned());
        for bad in ["npm:lodash@", "npm:lodash@^x", "npm:Lodash@1"] {
            assert!(PackageSpec::parse(bad).is_err(), "{bad:?}");
        }
        // The canonical text parses back to itself.
        for s in [
            "npm:lodash@^4",
            "numpy==2.1.*",
            "a-b>=1,<2",
            "npm:@types/node@>=18.0.0,<19||^20",
        ] {
            assert_eq!(spec(s).as_str(), s);
        }
    }
}
