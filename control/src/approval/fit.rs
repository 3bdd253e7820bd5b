//! What a card lists when more hosts were refused than it holds (`card-max-sites`). Hosts the
//! agent named always make it (step 1 already refused more named hosts than a card holds);
//! refused hosts fill the free places in [`Wanted::refused`]'s order (most recently refused
//! first, then most often, then by name), and the card says how many were left out. The
//! approval grants only what the card lists, so probing can neither push the named host off
//! the card nor slip in a host the person did not see.

use std::collections::BTreeSet;

use egressgate_store::{Host, PackageSpec};

use super::merge::Wanted;

/// The hosts a card lists, and how many more blocked ones it leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fitted {
    /// The listed hosts, sorted.
    pub(crate) sites: BTreeSet<Host>,
    /// Refused hosts that did not fit.
    pub(crate) not_shown: usize,
}

/// Fits `wanted`'s hosts into `max_sites` places.
pub(crate) fn fit(wanted: &Wanted, max_sites: usize) -> Fitted {
    let free = max_sites.saturating_sub(wanted.named.len());
    let mut sites = wanted.named.clone();
    sites.extend(wanted.refused.iter().take(free).cloned());
    Fitted {
        sites,
        not_shown: wanted.refused.len().saturating_sub(free),
    }
}

/// The packages a card lists: every one the agent named (step 1 refused more than a card
/// holds), then those the proxy refused this turn, in name order, while places are free
/// (`card-max-packages`); the rest wait for a later card.
pub(crate) fn fit_packages(
    wanted: &Wanted,
    named: &BTreeSet<PackageSpec>,
    max_packages: usize,
) -> BTreeSet<PackageSpec> {
    let (mut listed, refused): (BTreeSet<PackageSpec>, Vec<&PackageSpec>) = (
        wanted.packages.intersection(named).cloned().collect(),
        wanted.packages.difference(named).collect(),
    );
    let free = max_packages.saturating_sub(listed.len());
    listed.extend(refused.into_iter().take(free).cloned());
    listed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::testing::{host, spec};

    fn wanted(named: &[&str], refused: &[&str]) -> Wanted {
        Wanted {
            named: named.iter().map(|h| host(h)).collect(),
            refused: refused.iter().map(|h| host(h)).collect(),
            urls: Vec::new(),
            packages: BTreeSet::new(),
        }
    }

    #[test]
    fn named_packages_always_fit_and_refused_ones_fill_the_rest() {
        let mut w = wanted(&[], &[]);
        w.packages = ["zeta", "alpha", "beta", "gamma"].map(spec).into();
        let named: BTreeSet<PackageSpec> = [spec("zeta")].into();
        let list =
            |f: BTreeSet<PackageSpec>| f.iter().map(|p| p.as_str().to_owned()).collect::<Vec<_>>();
        assert_eq!(list(fit_packages(&w, &named, 2)), ["alpha", "zeta"]);
        assert_eq!(list(fit_packages(&w, &named, 1)), ["zeta"]);
        assert_eq!(fit_packages(&w, &named, 50).len(), 4);
    }

    fn names(f: &Fitted) -> Vec<&str> {
        f.sites.iter().map(Host::as_str).collect()
    }

    #[test]
    fn named_hosts_always_fit_and_refused_ones_fill_the_rest_in_order() {
        let w = wanted(
            &["z.example.com", "y.example.com"],
            &["r1.example.com", "r2.example.com", "r3.example.com"],
        );
        let f = fit(&w, 3);
        assert_eq!(
            names(&f),
            ["r1.example.com", "y.example.com", "z.example.com"]
        );
        assert_eq!(f.not_shown, 2);
        let f = fit(&w, 2);
        assert_eq!(names(&f), ["y.example.com", "z.example.com"]);
        assert_eq!(f.not_shown, 3);
        let f = fit(&w, 20);
        assert_eq!(f.sites.len(), 5);
        assert_eq!(f.not_shown, 0);
    }
}
