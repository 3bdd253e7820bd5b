//! Steps 2–5 of the approval tool, pure: merge the named hosts with the hosts the proxy
//! refused this turn as `not_approved`, refuse an empty call, refuse named hosts that were
//! refused for a reason no approval fixes, and drop what the turn's grants already cover.

use std::collections::BTreeSet;

use egressgate_store::db::refusals::RefusalRow;
use egressgate_store::{Host, Package, RefusalReason, SanitizedUrl, SitePattern};

use super::input::ValidRequest;
use crate::grants::Grants;

/// What a card could ask for, before and after dropping granted items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// Hosts, sorted.
    pub(crate) sites: BTreeSet<Host>,
    /// Named URLs whose host is still wanted.
    pub(crate) urls: Vec<SanitizedUrl>,
    /// Packages, sorted.
    pub(crate) packages: BTreeSet<Package>,
}

impl Wanted {
    /// Nothing at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.sites.is_empty() && self.packages.is_empty()
    }
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
    let mut sites = named.clone();
    sites.extend(
        refusals
            .iter()
            // A shadow-mode refusal was let through: nothing to ask a person for.
            .filter(|r| r.reason == RefusalReason::NotApproved && !r.shadow)
            .filter_map(|r| approvable_host(&r.host, extra_internal)),
    );
    if sites.is_empty() && req.packages.is_empty() {
        return Err(Early::NothingToApprove);
    }
    let blocked: BTreeSet<(Host, RefusalReason)> = refusals
        .iter()
        .filter(|r| !r.reason.approvable())
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
        sites,
        urls: req.urls.clone(),
        packages: req.packages.clone(),
    })
}

/// Step 5: drops sites and packages the grants already cover, and the URLs of dropped hosts.
pub(crate) fn drop_granted(wanted: Wanted, grants: &Grants) -> Wanted {
    let sites: BTreeSet<Host> = wanted
        .sites
        .into_iter()
        .filter(|h| !grants.allows_site(h))
        .collect();
    let urls = wanted
        .urls
        .into_iter()
        .filter(|u| sites.contains(&u.host))
        .collect();
    let packages = wanted
        .packages
        .into_iter()
        .filter(|p| !grants.allows_package(p))
        .collect();
    Wanted {
        sites,
        urls,
        packages,
    }
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
                .map(|p| Package::parse(p).unwrap_or_else(|e| unreachable!("{e}")))
                .collect(),
            tool_call_id: None,
        }
    }

    fn refusal(h: &str, reason: RefusalReason) -> RefusalRow {
        RefusalRow {
            host: h.into(),
            port: 443,
            reason,
            approvable: reason.approvable(),
            url: None,
            count: 1,
            first_seen: Timestamp::from_millis(0),
            last_seen: Timestamp::from_millis(0),
            shadow: false,
        }
    }

    #[test]
    fn merges_named_and_not_approved_refusals_only() {
        let refusals = [
            refusal("pypi.org", RefusalReason::NotApproved),
            refusal("evil.example.net", RefusalReason::PrivateAddress),
            refusal("not a host", RefusalReason::NotApproved),
            refusal("github.io", RefusalReason::NotApproved),
        ];
        let w = merge(&req(&["https://files.example.com/a"], &[]), &refusals, &[]);
        let sites: Vec<&str> = w
            .as_ref()
            .map(|w| w.sites.iter().map(Host::as_str).collect())
            .unwrap_or_default();
        assert_eq!(sites, ["files.example.com", "pypi.org"]);
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
            left.sites.iter().map(Host::as_str).collect::<Vec<_>>(),
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
                .map(Package::as_str)
                .collect::<Vec<_>>(),
            ["pandas"]
        );
        assert!(!left.is_empty());
    }
}
