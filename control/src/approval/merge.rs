//! Steps 2–5 of the approval tool, pure: merge the named hosts with the hosts the proxy
//! refused this turn as `not_approved` (and the named packages with the packages it refused
//! as `package_not_approved`), refuse an empty call, refuse named hosts that were
//! refused for a reason no approval fixes, and drop what the turn's grants already cover.
//! Named and merged hosts are kept apart, so the card can always list the named ones first
//! (see `fit`).

use std::collections::{BTreeMap, BTreeSet};

use egressgate_store::db::refusals::RefusalRow;
use egressgate_store::{
    Card, Host, Package, PackageSpec, RefusalReason, SanitizedUrl, SitePattern,
};

use super::input::ValidRequest;
use crate::grants::Grants;

/// What a card could ask for, before and after dropping granted items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// Hosts the agent named in `urls`, sorted.
    pub(crate) named: BTreeSet<Host>,
    /// Other hosts refused this turn as `not_approved`, most recently refused first (then
    /// most often, then by name): the order in which they fill a card's free places.
    pub(crate) refused: Vec<Host>,
    /// Named URLs whose host is still wanted.
    pub(crate) urls: Vec<SanitizedUrl>,
    /// Packages, sorted: the named ones with their pins, then refused ones nobody named
    /// (unpinned: a card for a refused package opens every version of it).
    pub(crate) packages: BTreeSet<PackageSpec>,
}

impl Wanted {
    /// Nothing at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.named.is_empty() && self.refused.is_empty() && self.packages.is_empty()
    }
}

/// The approvable hosts refused this turn and not named, in [`Wanted::refused`]'s order. A
/// host refused on several ports counts once, with its latest time and its total count.
fn refused_not_named(
    refusals: &[RefusalRow],
    named: &BTreeSet<Host>,
    extra_internal: &[Host],
) -> Vec<Host> {
    let mut seen: BTreeMap<Host, (i64, i64)> = BTreeMap::new();
    for r in refusals
        .iter()
        // A shadow-mode refusal was let through: nothing to ask a person for.
        // `method_not_allowed`: the host is allowed at `read`; a card can grant it `full`.
        .filter(|r| {
            matches!(
                r.reason,
                RefusalReason::NotApproved | RefusalReason::MethodNotAllowed
            ) && !r.shadow
        })
    {
        let Some(h) = approvable_host(&r.host, extra_internal) else {
            continue;
        };
        if named.contains(&h) {
            continue;
        }
        let e = seen.entry(h).or_insert((i64::MIN, 0));
        e.0 = e.0.max(r.last_seen.millis());
        e.1 = e.1.saturating_add(r.count);
    }
    let mut order: Vec<(Host, (i64, i64))> = seen.into_iter().collect();
    // Stable sort over name order: ties on time and count stay sorted by name.
    order.sort_by_key(|(_, (last, count))| std::cmp::Reverse((*last, *count)));
    order.into_iter().map(|(h, _)| h).collect()
}

/// The early answers of steps 3 and 4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Early {
    /// Step 3: nothing named and nothing refused to merge.
    NothingToApprove,
    /// Step 4: named hosts refused this turn for reasons no approval fixes, sorted.
    NotApprovable(Vec<(Host, RefusalReason)>),
}

/// A refused host that a card may carry: it normalises and is an exact host a pattern could
/// name. Anything else (raw authority text, public suffixes) is left out: no approval fixes it.
fn approvable_host(raw: &str, extra_internal: &[Host]) -> Option<Host> {
    let host = Host::parse(raw).ok()?;
    match SitePattern::parse(host.as_str(), extra_internal) {
        Ok(SitePattern::Exact(h)) if h == host => Some(host),
        _ => None,
    }
}

/// Steps 2–4.
pub(crate) fn merge(
    req: &ValidRequest,
    refusals: &[RefusalRow],
    extra_internal: &[Host],
) -> Result<Wanted, Early> {
    let named = req.named_hosts();
    let refused = refused_not_named(refusals, &named, extra_internal);
    // A package the agent named keeps its pin; a refusal of the same package adds nothing.
    let mut packages = req.packages.clone();
    let named_packages: BTreeSet<&Package> =
        req.packages.iter().map(PackageSpec::package).collect();
    packages.extend(
        refused_packages(refusals)
            .filter(|p| !named_packages.contains(p))
            .map(PackageSpec::unpinned),
    );
    if named.is_empty() && refused.is_empty() && packages.is_empty() {
        return Err(Early::NothingToApprove);
    }
    let blocked: BTreeSet<(Host, RefusalReason)> = refusals
        .iter()
        .filter(|r| !r.reason.approvable() && !r.shadow)
        .filter_map(|r| {
            named
                .iter()
                .find(|h| h.as_str() == r.host)
                .map(|h| (h.clone(), r.reason))
        })
        .collect();
    if !blocked.is_empty() {
        return Err(Early::NotApprovable(blocked.into_iter().collect()));
    }
    Ok(Wanted {
        named,
        refused,
        urls: req.urls.clone(),
        packages,
    })
}

/// The packages the proxy refused this turn as `package_not_approved` (one row each, in
/// the canonical spelling the proxy and the card share); shadow-mode rows went through.
fn refused_packages(refusals: &[RefusalRow]) -> impl Iterator<Item = Package> + '_ {
    refusals
        .iter()
        .filter(|r| r.reason == RefusalReason::PackageNotApproved && !r.shadow)
        .filter_map(|r| r.package.as_deref())
        .filter_map(|p| Package::parse(p).ok())
}

/// Keeps the sites and packages the predicates accept, and the URLs of kept named hosts.
fn retain(
    wanted: Wanted,
    keep_site: impl Fn(&Host) -> bool,
    keep_package: impl Fn(&PackageSpec) -> bool,
) -> Wanted {
    let named: BTreeSet<Host> = wanted.named.into_iter().filter(|h| keep_site(h)).collect();
    let refused = wanted
        .refused
        .into_iter()
        .filter(|h| keep_site(h))
        .collect();
    let urls = wanted
        .urls
        .into_iter()
        .filter(|u| named.contains(&u.host))
        .collect();
    let packages = wanted
        .packages
        .into_iter()
        .filter(|p| keep_package(p))
        .collect();
    Wanted {
        named,
        refused,
        urls,
        packages,
    }
}

/// Step 5: drops sites and packages the grants already cover, and the URLs of dropped hosts.
pub(crate) fn drop_granted(wanted: Wanted, grants: &Grants) -> Wanted {
    retain(
        wanted,
        |h| !grants.allows_site(h),
        |p| !grants.allows_package(p),
    )
}

/// Step 6: drops what the person declined on a card of this turn (`card`), so the same turn
/// cannot ask again at once; returns what is left and what was dropped (sorted).
pub(crate) fn drop_declined(wanted: Wanted, card: &Card) -> (Wanted, Vec<String>, Vec<String>) {
    let declined_site = |h: &Host| card.sites.iter().any(|s| s == h.as_str());
    // Declined by package, whatever the pin: a turn cannot ask again at once for another
    // version range of what the person just said no to.
    let declined_package = |p: &PackageSpec| {
        card.packages
            .iter()
            .any(|s| PackageSpec::parse(s).is_ok_and(|c| c.package() == p.package()))
    };
    let sites = wanted
        .named
        .iter()
        .chain(wanted.refused.iter())
        .filter(|h| declined_site(h))
        .map(|h| h.as_str().to_owned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let packages = wanted
        .packages
        .iter()
        .filter(|p| declined_package(p))
        .map(|p| p.as_str().to_owned())
        .collect();
    let left = retain(wanted, |h| !declined_site(h), |p| !declined_package(p));
    (left, sites, packages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use egressgate_store::Timestamp;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn req(urls: &[&str], packages: &[&str]) -> ValidRequest {
        ValidRequest {
            reason: "r".into(),
            urls: urls
                .iter()
                .map(|u| SanitizedUrl::parse(u).unwrap_or_else(|e| unreachable!("{e}")))
                .collect(),
            packages: packages
                .iter()
                .map(|p| PackageSpec::parse(p).unwrap_or_else(|e| unreachable!("{e}")))
                .collect(),
            tool_call_id: None,
        }
    }

    fn refusal(h: &str, reason: RefusalReason) -> RefusalRow {
        seen(h, reason, 0, 1)
    }

    fn seen(h: &str, reason: RefusalReason, last_seen: i64, count: i64) -> RefusalRow {
        RefusalRow {
            host: h.into(),
            port: 443,
            reason,
            approvable: reason.approvable(),
            url: None,
            package: None,
            count,
            first_seen: Timestamp::from_millis(0),
            last_seen: Timestamp::from_millis(last_seen),
            shadow: false,
            method: None,
        }
    }

    #[test]
    fn refused_hosts_come_most_recent_then_most_frequent_first() {
        use RefusalReason::NotApproved as N;
        let refusals = [
            seen("old.example.com", N, 10, 50),
            seen("b.example.com", N, 30, 1),
            seen("a.example.com", N, 30, 1),
            seen("busy.example.com", N, 30, 7),
            // The same host on another port: one entry, latest time, summed count.
            seen("old.example.com", N, 5, 1),
            seen("new.example.com", N, 40, 1),
            seen("named.example.com", N, 99, 1),
        ];
        let w = merge(&req(&["https://named.example.com/"], &[]), &refusals, &[])
            .unwrap_or_else(|e| unreachable!("{e:?}"));
        let order: Vec<&str> = w.refused.iter().map(Host::as_str).collect();
        assert_eq!(
            order,
            [
                "new.example.com",
                "busy.example.com",
                "a.example.com",
                "b.example.com",
                "old.example.com"
            ]
        );
    }

    #[test]
    fn merges_named_and_not_approved_refusals_only() {
        let refusals = [
            refusal("pypi.org", RefusalReason::NotApproved),
            refusal("evil.example.net", RefusalReason::PrivateAddress),
            refusal("not a host", RefusalReason::NotApproved),
            refusal("github.io", RefusalReason::NotApproved),
        ];
        let w = merge(&req(&["https://files.example.com/a"], &[]), &refusals, &[])
            .unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!(
            w.named.iter().map(Host::as_str).collect::<Vec<_>>(),
            ["files.example.com"]
        );
        assert_eq!(w.refused, [host("pypi.org")]);
    }

    #[test]
    fn empty_call_with_nothing_refused_is_nothing_to_approve() {
        let refusals = [refusal("x.example.com", RefusalReason::PortNotAllowed)];
        assert_eq!(
            merge(&req(&[], &[]), &refusals, &[]),
            Err(Early::NothingToApprove)
        );
    }

    #[test]
    fn named_host_refused_for_a_fixed_reason_is_not_approvable() {
        let refusals = [
            refusal("b.example.com", RefusalReason::SniMismatch),
            refusal("a.example.com", RefusalReason::PrivateAddress),
            refusal("c.example.com", RefusalReason::PrivateAddress),
        ];
        let got = merge(
            &req(&["https://b.example.com/", "https://a.example.com/"], &[]),
            &refusals,
            &[],
        );
        assert_eq!(
            got,
            Err(Early::NotApprovable(vec![
                (host("a.example.com"), RefusalReason::PrivateAddress),
                (host("b.example.com"), RefusalReason::SniMismatch),
            ]))
        );
    }

    #[test]
    fn declined_items_and_their_urls_are_dropped_and_named() {
        let w = merge(
            &req(
                &["https://files.example.com/a", "https://pypi.org/simple/"],
                &["numpy", "pandas"],
            ),
            &[],
            &[],
        )
        .unwrap_or_else(|e| unreachable!("{e:?}"));
        let card = Card {
            sites: vec!["files.example.com".into(), "other.example.com".into()],
            urls: vec![],
            packages: vec!["numpy".into()],
            reason: "r".into(),
            sites_not_shown: 0,
        };
        let (left, sites, packages) = drop_declined(w, &card);
        assert_eq!(sites, ["files.example.com"]);
        assert_eq!(packages, ["numpy"]);
        assert_eq!(
            left.named.iter().map(Host::as_str).collect::<Vec<_>>(),
            ["pypi.org"]
        );
        assert_eq!(left.urls.len(), 1);
        assert_eq!(
            left.packages
                .iter()
                .map(PackageSpec::as_str)
                .collect::<Vec<_>>(),
            ["pandas"]
        );
    }

    #[test]
    fn granted_items_and_their_urls_are_dropped() {
        let grants = Grants::from_parts(
            [SitePattern::parse("*.example.com", &[]).unwrap_or_else(|e| unreachable!("{e}"))],
            ["numpy".to_owned()],
        );
        let w = merge(
            &req(
                &["https://files.example.com/a", "https://pypi.org/simple/"],
                &["numpy", "pandas"],
            ),
            &[],
            &[],
        )
        .unwrap_or_else(|e| unreachable!("{e:?}"));
        let left = drop_granted(w, &grants);
        assert_eq!(
            left.named.iter().map(Host::as_str).collect::<Vec<_>>(),
            ["pypi.org"]
        );
        assert_eq!(
            left.urls
                .iter()
                .map(|u| u.text.as_str())
                .collect::<Vec<_>>(),
            ["https://pypi.org/simple/"]
        );
        assert_eq!(
            left.packages
                .iter()
                .map(PackageSpec::as_str)
                .collect::<Vec<_>>(),
            ["pandas"]
        );
        assert!(!left.is_empty());
    }

    #[test]
    fn refused_packages_join_the_card() {
        let mut pkg = seen("pypi.test", RefusalReason::PackageNotApproved, 5, 1);
        pkg.package = Some("numpy".into());
        let mut unnamed = seen("pypi.test", RefusalReason::PackageNotApproved, 6, 1);
        unnamed.package = None;
        let mut shadowed = seen("pypi.test", RefusalReason::PackageNotApproved, 7, 1);
        shadowed.package = Some("scipy".into());
        shadowed.shadow = true;
        let w = merge(&req(&[], &["requests"]), &[pkg, unnamed, shadowed], &[])
            .unwrap_or_else(|e| unreachable!("{e:?}"));
        let names: Vec<&str> = w.packages.iter().map(PackageSpec::as_str).collect();
        assert_eq!(names, ["numpy", "requests"]);
        assert!(
            w.refused.is_empty(),
            "a registry host is never asked for as a site"
        );
    }

    #[test]
    fn a_named_pin_wins_over_a_refusal_of_the_same_package_and_a_decline_covers_every_pin() {
        let mut numpy = seen("pypi.test", RefusalReason::PackageNotApproved, 5, 1);
        numpy.package = Some("numpy".into());
        let w = merge(&req(&[], &["NumPy==2.1.*"]), &[numpy], &[])
            .unwrap_or_else(|e| unreachable!("{e:?}"));
        let names: Vec<&str> = w.packages.iter().map(PackageSpec::as_str).collect();
        assert_eq!(names, ["numpy==2.1.*"], "one entry, with the agent's pin");
        let declined = Card::new(
            Vec::new(),
            Vec::new(),
            vec![PackageSpec::parse("numpy>=3").unwrap_or_else(|e| unreachable!("{e}"))],
            "r".into(),
        );
        let (left, _, packages) = drop_declined(w, &declined);
        assert!(
            left.packages.is_empty(),
            "another pin of a declined package"
        );
        assert_eq!(packages, ["numpy==2.1.*"]);
    }
}
