//! The card's evidence on small tables: only the card's sites and packages, sorted, bounded,
//! and the named URLs nothing tried marked apart.

use egressgate_store::{RefusalReason, Timestamp};

use super::*;
use crate::approval::testing::{host, spec, url};

fn row(host: &str, port: u16, method: Option<&str>, url: Option<&str>, at: i64) -> EvidenceRow {
    EvidenceRow {
        host: host.into(),
        port,
        reason: RefusalReason::NotApproved,
        package: None,
        method: method.map(Into::into),
        url: url.map(Into::into),
        upload: method == Some("POST"),
        count: 3,
        first_seen: Timestamp::from_millis(at),
        last_seen: Timestamp::from_millis(at + 1),
        command: None,
    }
}

fn refused(host: &str) -> RefusalRow {
    RefusalRow {
        host: host.into(),
        port: 80,
        reason: RefusalReason::NotApproved,
        approvable: true,
        url: None,
        method: None,
        package: None,
        count: 1,
        first_seen: Timestamp::from_millis(0),
        last_seen: Timestamp::from_millis(0),
        shadow: false,
    }
}

fn card(sites: &[&str], packages: &[&str]) -> Card {
    Card::new(
        sites.iter().map(|h| host(h)).collect(),
        vec![],
        packages.iter().map(|p| spec(p)).collect(),
        "r".into(),
    )
}

#[test]
fn requests_about_the_card_are_listed_in_order_with_untried_urls_last() {
    let up = "http://up.example.net/upload/all";
    let rows = [
        row("up.example.net", 80, Some("POST"), Some(up), 30),
        row(
            "get.example.org",
            80,
            Some("GET"),
            Some("http://get.example.org/b"),
            20,
        ),
        row("other.example.com", 80, Some("GET"), None, 10),
        EvidenceRow {
            package: Some("requests".into()),
            reason: RefusalReason::PackageNotApproved,
            ..row("pypi.org", 443, Some("GET"), None, 5)
        },
    ];
    let refusals = [
        refused("up.example.net"),
        refused("get.example.org"),
        refused("other.example.com"),
        refused("pypi.org"),
    ];
    let c = card(
        &["get.example.org", "up.example.net", "never.example.com"],
        &["requests==2.*"],
    );
    let named = [
        url("http://never.example.com/holidays.ics"),
        url("http://get.example.org/b"),
        url("http://get.example.org/other"),
    ];
    let e = for_card(&c, &rows, &refusals, &named);
    let listed: Vec<(&str, Option<&str>, bool, bool)> = e
        .iter()
        .map(|e| (e.host.as_str(), e.url.as_deref(), e.upload, e.tried))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "get.example.org",
                Some("http://get.example.org/b"),
                false,
                true
            ),
            ("pypi.org", None, false, true),
            ("up.example.net", Some(up), true, true),
            (
                "never.example.com",
                Some("http://never.example.com/holidays.ics"),
                false,
                false
            ),
            (
                "get.example.org",
                Some("http://get.example.org/other"),
                false,
                false
            ),
        ],
        "other.example.com is not on the card; a named URL of a tried host that no request \
         named is untried too"
    );
    assert_eq!(e[2].method.as_deref(), Some("POST"));
    assert_eq!(e[2].count, 3);
    assert_eq!(e[2].reason.as_deref(), Some("not_approved"));
    assert_eq!(e[1].package.as_deref(), Some("requests"));
    assert_eq!((e[3].count, e[3].reason.as_deref()), (0, None));
    assert_eq!(e[3].port, 80);
}

#[test]
fn a_tunnel_may_have_been_any_url_and_the_card_holds_a_bounded_number() {
    // The proxy saw only a tunnel to the host's port 443: the named https URL may be it.
    let rows = [row("t.example.com", 443, None, None, 1)];
    let refusals = [refused("t.example.com")];
    let c = card(&["t.example.com"], &[]);
    let named = [
        url("https://t.example.com/x"),
        url("http://t.example.com/x"),
    ];
    let e = for_card(&c, &rows, &refusals, &named);
    let untried: Vec<&str> = e
        .iter()
        .filter(|e| !e.tried)
        .filter_map(|e| e.url.as_deref())
        .collect();
    assert_eq!(untried, ["http://t.example.com/x"], "port 80 saw nothing");

    let many: Vec<EvidenceRow> = (0..100)
        .map(|i| {
            let u = format!("http://t.example.com/{i:03}");
            row("t.example.com", 80, Some("GET"), Some(&u), 1000 - i)
        })
        .collect();
    let e = for_card(&c, &many, &refusals, &[]);
    assert_eq!(e.len(), MAX_ON_CARD);
    assert_eq!(
        e.last().and_then(|e| e.url.as_deref()),
        Some("http://t.example.com/063"),
        "the most recently seen are kept"
    );
}
