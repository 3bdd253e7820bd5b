//! The inspected names as X.509 name constraints, and back. A constrained deployment CA
//! permits exactly the names the proxy inspects, so its key, stolen, mints nothing a client
//! accepts for any other host: `host` is permitted without the names below it (the dNSName
//! `host` with `.host` excluded), `*.suffix` as every name below `suffix` (`.suffix`), and no
//! IP address at all. With nothing inspected it permits no name.
//!
//! X.509 cannot say "this host but not below it" when a wildcard below the same host is also
//! inspected (`example.com` and `*.git.example.com`): the exclusion would remove the
//! wildcard's names too, so then everything below the host is permitted. The only widening.

use rcgen::{CidrSubnet, GeneralSubtree, NameConstraints};

use crate::pattern::SitePattern;

/// `names` sorted, without repeats and without a pattern another one already covers.
pub(super) fn minimal(mut names: Vec<SitePattern>) -> Vec<SitePattern> {
    names.sort();
    names.dedup();
    let all = names.clone();
    names.retain(|n| !all.iter().any(|o| o != n && o.covers(n)));
    names
}

/// The name constraints permitting exactly `names` (see the module's text).
pub(super) fn constraints(names: &[SitePattern]) -> NameConstraints {
    let names = minimal(names.to_vec());
    let mut permitted = Vec::new();
    let mut excluded = Vec::new();
    for n in &names {
        match n {
            SitePattern::Exact(h) => {
                permitted.push(GeneralSubtree::DnsName(h.as_str().to_owned()));
                let wildcard_at_or_below = names.iter().any(|o| {
                    matches!(o, SitePattern::Subdomains(s) if s == h || s.is_strictly_within(h.as_str()))
                });
                if !wildcard_at_or_below {
                    excluded.push(GeneralSubtree::DnsName(format!(".{h}")));
                }
            }
            SitePattern::Subdomains(s) => permitted.push(GeneralSubtree::DnsName(format!(".{s}"))),
        }
    }
    if permitted.is_empty() {
        // The empty dNSName forbids every name.
        excluded.push(GeneralSubtree::DnsName(String::new()));
    }
    excluded.push(GeneralSubtree::IpAddress(CidrSubnet::V4([0; 4], [0; 4])));
    excluded.push(GeneralSubtree::IpAddress(CidrSubnet::V6([0; 16], [0; 16])));
    NameConstraints {
        permitted_subtrees: permitted,
        excluded_subtrees: excluded,
    }
}

/// The names a CA's permitted and excluded dNSName subtrees stand for: what [`constraints`]
/// wrote, or more (a permitted `host` whose `.host` is not excluded is also `*.host`). An
/// entry no site pattern can state is left out, so a CA is never taken to cover more than it
/// does.
pub(super) fn from_constraints(permitted: &[&str], excluded: &[&str]) -> Vec<SitePattern> {
    let mut out = Vec::new();
    for p in permitted {
        match p.strip_prefix('.') {
            Some(suffix) => out.extend(SitePattern::from_db(&format!("*.{suffix}"))),
            None => {
                out.extend(SitePattern::from_db(p));
                if !excluded.contains(&format!(".{p}").as_str()) {
                    out.extend(SitePattern::from_db(&format!("*.{p}")));
                }
            }
        }
    }
    minimal(out)
}

/// Whether a CA permitting `ca` (`None`: any name) covers every name of `wanted` (`None`: any
/// name, which only an unconstrained CA covers).
pub(super) fn covers(ca: Option<&[SitePattern]>, wanted: Option<&[SitePattern]>) -> bool {
    match (ca, wanted) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(ca), Some(wanted)) => wanted.iter().all(|w| ca.iter().any(|c| c.covers(w))),
    }
}

/// The names two CAs permit together (`None`: any name).
pub(super) fn union(
    a: Option<&[SitePattern]>,
    b: Option<&[SitePattern]>,
) -> Option<Vec<SitePattern>> {
    Some(minimal([a?, b?].concat()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> SitePattern {
        SitePattern::parse(s, &[]).unwrap_or_else(|e| unreachable!("{s}: {e}"))
    }

    fn dns(subtrees: &[GeneralSubtree]) -> Vec<String> {
        subtrees
            .iter()
            .filter_map(|s| match s {
                GeneralSubtree::DnsName(n) => Some(n.clone()),
                _ => None,
            })
            .collect()
    }

    /// Encodes, then decodes as a reader of the certificate would.
    fn round_trip(names: &[SitePattern]) -> Vec<SitePattern> {
        let c = constraints(names);
        let (perm, excl) = (dns(&c.permitted_subtrees), dns(&c.excluded_subtrees));
        let perm: Vec<&str> = perm.iter().map(String::as_str).collect();
        let excl: Vec<&str> = excl.iter().map(String::as_str).collect();
        from_constraints(&perm, &excl)
    }

    #[test]
    fn exact_hosts_exclude_their_subdomains_and_wildcards_their_apex() {
        let c = constraints(&[p("git.example.com"), p("*.example.org")]);
        assert_eq!(
            dns(&c.permitted_subtrees),
            ["git.example.com", ".example.org"]
        );
        assert_eq!(dns(&c.excluded_subtrees), [".git.example.com"]);
        assert_eq!(
            c.excluded_subtrees.len(),
            3,
            "and every IPv4 and IPv6 address"
        );
    }

    #[test]
    fn an_empty_set_permits_no_name() {
        let c = constraints(&[]);
        assert!(c.permitted_subtrees.is_empty());
        assert_eq!(dns(&c.excluded_subtrees), [""]);
        assert_eq!(round_trip(&[]), []);
    }

    #[test]
    fn a_wildcard_at_or_below_an_exact_host_keeps_its_names() {
        let names = [p("example.com"), p("*.example.com")];
        assert_eq!(
            dns(&constraints(&names).excluded_subtrees),
            Vec::<String>::new()
        );
        assert_eq!(round_trip(&names), names);
        let below = [p("example.com"), p("*.git.example.com")];
        assert_eq!(
            dns(&constraints(&below).excluded_subtrees),
            Vec::<String>::new()
        );
        assert_eq!(
            round_trip(&below),
            [p("example.com"), p("*.example.com")],
            "read back as wider, never narrower"
        );
    }

    #[test]
    fn names_read_back_are_the_names_written() {
        for names in [
            vec![p("files.example.com")],
            vec![p("*.example.org"), p("registry.npmjs.org"), p("pypi.org")],
        ] {
            assert_eq!(round_trip(&names), minimal(names.clone()));
        }
    }

    #[test]
    fn covered_names_and_unions() {
        let ca = [p("*.example.com"), p("pypi.org")];
        assert!(covers(
            Some(&ca),
            Some(&[p("git.example.com"), p("*.a.example.com")])
        ));
        assert!(!covers(Some(&ca), Some(&[p("example.com")])));
        assert!(!covers(Some(&ca), Some(&[p("files.pythonhosted.org")])));
        assert!(!covers(Some(&ca), None), "an open set needs an open CA");
        assert!(covers(None, Some(&ca)));
        assert_eq!(
            union(Some(&ca), Some(&[p("git.example.com"), p("x.org")])),
            Some(vec![p("pypi.org"), p("x.org"), p("*.example.com")])
        );
        assert_eq!(union(None, Some(&ca)), None);
        assert_eq!(
            minimal(vec![
                p("b.example.com"),
                p("*.example.com"),
                p("*.example.com")
            ]),
            [p("*.example.com")]
        );
    }
}
