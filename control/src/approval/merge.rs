//! Steps 2–5 of the approval tool, pure: merge the named hosts with the hosts the proxy
//! refused this turn as `not_approved` (and the named packages with the packages it refused
//! as `package_not_approved`), refuse an empty call, refuse named hosts that were
//! refused for a reason no approval fixes, and drop what the turn's grants already cover.
//! Named and merged hosts are kept apart, so the card can always list the named ones first
//! (see `fit`).

use std::collections::{BTreeMap, BTreeSet};

use egressgate_store::db::refusals::RefusalRow;
use egressgate_store::{Card, Host, Package, PackageSpec, RefusalReason, SanitizedUrl};

use super::input::ValidRequest;
use crate::grants::Grants;
use crate::settings::Settings;

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
    settings: &Settings,
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
        let Some(h) = approvable_host(&r.host, settings) else {
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
    /// Step 3: nothing named and nothing refused to merge; what was refused this turn (none
    /// of it approvable: a reason no approval fixes, or a name no approval can hold), by host
    /// and reason, sorted, so the answer can say why instead of asking for a rerun.
    NothingToApprove(Vec<(String, RefusalReason)>),
    /// Step 4: named hosts refused this turn for reasons no approval fixes, sorted.
    NotApprovable(Vec<(Host, RefusalReason)>),
}

/// A refused host that a card may carry: it normalises and a person can approve it as a whole
/// (the store's one answer, which the proxy's `X-Egress-Approvable` gives too). Anything else
/// (raw authority text, public suffixes, path-style multi-tenant hosts not opted in) is left
/// out: no approval fixes it.
fn approvable_host(raw: &str, settings: &Settings) -> Option<Host> {
    let host = Host::parse(raw).ok()?;
    settings.approvable(&host).ok().map(|()| host)
}

/// Steps 2–4.
pub(crate) fn merge(
    req: &ValidRequest,
    refusals: &[RefusalRow],
    settings: &Settings,
) -> Result<Wanted, Early> {
    let named = req.named_hosts();
    let refused = refused_not_named(refusals, &named, settings);
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
        // Refused hosts no person can approve as a whole (a public suffix, a path-style
        // multi-tenant host not opted in) are not "nothing": the proxy said
        // `X-Egress-Approvable: false` for them, and the answer names them.
        let unapprovable: BTreeSet<(Host, RefusalReason)> = refusals
            .iter()
            .filter(|r| {
                matches!(
                    r.reason,
                    RefusalReason::NotApproved | RefusalReason::MethodNotAllowed
                ) && !r.approvable
                    && !r.shadow
            })
            .filter_map(|r| Host::parse(&r.host).ok().map(|h| (h, r.reason)))
            .collect();
        if !unapprovable.is_empty() {
            return Err(Early::NotApprovable(unapprovable.into_iter().collect()));
        }
        let unfixable: BTreeSet<(String, RefusalReason)> = refusals
            .iter()
            .filter(|r| !r.shadow)
            .map(|r| (r.host.clone(), r.reason))
            .collect();
        return Err(Early::NothingToApprove(unfixable.into_iter().collect()));
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
mod tests;
