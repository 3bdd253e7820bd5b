//! Steps 2–5 on small tables: which hosts and packages a call asks for, in which order, and
//! what the turn's grants and the person's declines take away.

use egressgate_store::{SitePattern, Timestamp};

use super::*;
use crate::approval::testing::{host, spec, url};
use crate::settings::Settings;

fn req(urls: &[&str], packages: &[&str]) -> ValidRequest {
    ValidRequest {
        reason: "r".into(),
        urls: urls.iter().map(|u| url(u)).collect(),
        packages: packages.iter().map(|p| spec(p)).collect(),
        tool_call_id: None,
    }
}

/// Steps 2–5 under the default settings for a call naming `urls` and `packages` in a turn
/// refused `refusals`: the card's contents or the early answer.
fn merged(urls: &[&str], packages: &[&str], refusals: &[RefusalRow]) -> Result<Wanted, Early> {
    merge(&req(urls, packages), refusals, &Settings::default())
}

/// [`merged`] for a row that expects a card.
fn wanted(urls: &[&str], packages: &[&str], refusals: &[RefusalRow]) -> Wanted {
    merged(urls, packages, refusals).unwrap_or_else(|e| unreachable!("{e:?}"))
}

/// Two named URLs (two hosts) and two named packages, nothing refused.
fn files_pypi_numpy_pandas() -> Wanted {
    let urls = ["https://files.example.com/a", "https://pypi.org/simple/"];
    wanted(&urls, &["numpy", "pandas"], &[])
}

fn named_hosts(w: &Wanted) -> Vec<&str> {
    w.named.iter().map(Host::as_str).collect()
}

fn package_names(w: &Wanted) -> Vec<&str> {
    w.packages.iter().map(PackageSpec::as_str).collect()
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
    let w = wanted(&["https://named.example.com/"], &[], &refusals);
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
    let w = wanted(&["https://files.example.com/a"], &[], &refusals);
    assert_eq!(named_hosts(&w), ["files.example.com"]);
    assert_eq!(w.refused, [host("pypi.org")]);
}

#[test]
fn empty_call_with_nothing_approvable_refused_is_nothing_to_approve_naming_why() {
    assert_eq!(merged(&[], &[], &[]), Err(Early::NothingToApprove(vec![])));
    let refusals = [
        refusal("x.example.com", RefusalReason::PortNotAllowed),
        refusal("10.0.0.1", RefusalReason::IpLiteral),
        refusal("x.example.com", RefusalReason::PortNotAllowed),
        // A name no approval can hold (a public suffix) is refused as `not_approved`.
        refusal("co.uk", RefusalReason::NotApproved),
    ];
    assert_eq!(
        merged(&[], &[], &refusals),
        Err(Early::NothingToApprove(vec![
            ("10.0.0.1".into(), RefusalReason::IpLiteral),
            ("co.uk".into(), RefusalReason::NotApproved),
            ("x.example.com".into(), RefusalReason::PortNotAllowed),
        ]))
    );
}

#[test]
fn named_host_refused_for_a_fixed_reason_is_not_approvable() {
    let refusals = [
        refusal("b.example.com", RefusalReason::SniMismatch),
        refusal("a.example.com", RefusalReason::PrivateAddress),
        refusal("c.example.com", RefusalReason::PrivateAddress),
    ];
    let named = ["https://b.example.com/", "https://a.example.com/"];
    let got = merged(&named, &[], &refusals);
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
    let w = files_pypi_numpy_pandas();
    let card = Card {
        sites: vec!["files.example.com".into(), "other.example.com".into()],
        urls: vec![],
        packages: vec!["numpy".into()],
        reason: "r".into(),
        sites_not_shown: 0,
        evidence: vec![],
    };
    let (left, sites, packages) = drop_declined(w, &card);
    assert_eq!(sites, ["files.example.com"]);
    assert_eq!(packages, ["numpy"]);
    assert_eq!(named_hosts(&left), ["pypi.org"]);
    assert_eq!(left.urls.len(), 1);
    assert_eq!(package_names(&left), ["pandas"]);
}

#[test]
fn granted_items_and_their_urls_are_dropped() {
    let grants = Grants::from_parts(
        [SitePattern::parse("*.example.com", &[]).unwrap_or_else(|e| unreachable!("{e}"))],
        ["numpy".to_owned()],
    );
    let w = files_pypi_numpy_pandas();
    let left = drop_granted(w, &grants);
    assert_eq!(named_hosts(&left), ["pypi.org"]);
    assert_eq!(
        left.urls
            .iter()
            .map(|u| u.text.as_str())
            .collect::<Vec<_>>(),
        ["https://pypi.org/simple/"]
    );
    assert_eq!(package_names(&left), ["pandas"]);
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
    let w = wanted(&[], &["requests"], &[pkg, unnamed, shadowed]);
    assert_eq!(package_names(&w), ["numpy", "requests"]);
    assert!(
        w.refused.is_empty(),
        "a registry host is never asked for as a site"
    );
}

#[test]
fn a_named_pin_wins_over_a_refusal_of_the_same_package_and_a_decline_covers_every_pin() {
    let mut numpy = seen("pypi.test", RefusalReason::PackageNotApproved, 5, 1);
    numpy.package = Some("numpy".into());
    let w = wanted(&[], &["NumPy==2.1.*"], &[numpy]);
    assert_eq!(
        package_names(&w),
        ["numpy==2.1.*"],
        "one entry, with the agent's pin"
    );
    let declined = Card::new(Vec::new(), Vec::new(), vec![spec("numpy>=3")], "r".into());
    let (left, _, packages) = drop_declined(w, &declined);
    assert!(
        left.packages.is_empty(),
        "another pin of a declined package"
    );
    assert_eq!(packages, ["numpy==2.1.*"]);
}
