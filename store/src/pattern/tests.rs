//! The site pattern rules on tables of spellings: what parses, what matches, what a person
//! can approve as a whole.

use super::*;

fn p(s: &str) -> Result<SitePattern, PatternError> {
    SitePattern::parse(s, &[])
}

use crate::host::test_host as host;

#[test]
fn rejects_dangerous_patterns() {
    for (s, e) in [
        ("*", PatternError::PublicSuffix),
        ("*.com", PatternError::PublicSuffix),
        ("*.co.uk", PatternError::PublicSuffix),
        ("*.CO.UK.", PatternError::PublicSuffix),
        ("co.uk", PatternError::PublicSuffix),
        ("*.github.io", PatternError::PublicSuffix),
        // Wildcards above private rules: every tenant's bucket or blob store.
        ("*.amazonaws.com", PatternError::PublicSuffix),
        ("*.s3.amazonaws.com", PatternError::PublicSuffix),
        ("*.core.windows.net", PatternError::PublicSuffix),
        ("*.windows.net", PatternError::PublicSuffix),
        ("*.blogspot.com", PatternError::PublicSuffix),
        // An exact public suffix is refused too: such a host serves every tenant
        // (`s3.amazonaws.com/<bucket>`), so it is the same hole by another spelling.
        ("s3.amazonaws.com", PatternError::PublicSuffix),
        ("github.io", PatternError::PublicSuffix),
        ("*.1.2.3.4", PatternError::IpLiteral),
        ("10.0.0.1", PatternError::IpLiteral),
        ("[::1]", PatternError::IpLiteral),
        ("*.localhost", PatternError::Internal),
        ("db.internal", PatternError::Internal),
        ("intranet", PatternError::Internal),
        ("a.*.example.com", PatternError::Wildcard),
        ("*example.com", PatternError::Wildcard),
    ] {
        assert_eq!(p(s), Err(e), "{s}");
    }
    assert!(matches!(p("exa mple.com"), Err(PatternError::Host(_))));
    // Found by fuzzing: a full-width asterisk maps to '*' and must not become a wildcard
    // when the stored pattern is read back.
    assert!(p("＊.com").is_err());
    assert!(p("＊.example.com").is_err());
}

#[test]
fn names_below_the_rules_stay_approvable() -> Result<(), PatternError> {
    for s in [
        "amazonaws.com",
        "bucket.s3.amazonaws.com",
        "*.bucket.s3.amazonaws.com",
        "*.example.com",
        "*.github.com",
        "files.example.co.uk",
        "*.pages.example.github.io",
    ] {
        p(s)?;
    }
    Ok(())
}

#[test]
fn stored_wildcards_above_a_rule_never_match() {
    // A row written before the rule tightened is not read back, is not a lookup key and
    // matches nothing even when built by hand.
    assert_eq!(SitePattern::from_db("*.amazonaws.com"), None);
    let keys = SitePattern::candidate_keys(&host("evil.s3.amazonaws.com"));
    assert_eq!(keys, ["evil.s3.amazonaws.com"]);
    let by_hand = SitePattern::Subdomains(host("amazonaws.com"));
    assert!(!by_hand.matches(&host("evil.s3.amazonaws.com")));
}

#[test]
fn path_multi_tenant_hosts_are_no_whole_host_grants_unless_opted_in() {
    for s in [
        "storage.googleapis.com",
        "raw.githubusercontent.com",
        "codeload.github.com",
        "f000.backblazeb2.com",
        "*.backblazeb2.com",
        "*.jsdelivr.net",
    ] {
        assert!(
            matches!(
                SitePattern::parse_grant(s, &[], &[]),
                Err(PatternError::PathMultiTenant(_))
            ),
            "{s}"
        );
    }
    // Per-tenant names and the parents' other hosts stay grants.
    for s in [
        "bucket.storage.googleapis.com",
        "api.github.com",
        "*.a.githubusercontent.com",
    ] {
        assert!(SitePattern::parse_grant(s, &[], &[]).is_ok(), "{s}");
    }
    let opted = [host("raw.githubusercontent.com")];
    assert!(SitePattern::parse_grant("raw.githubusercontent.com", &[], &opted).is_ok());
    assert!(SitePattern::parse_grant("gist.githubusercontent.com", &[], &opted).is_err());
    // The one "can a person approve this host" answer.
    assert!(approvable_host(&host("files.example.com"), &[], &[]).is_ok());
    assert!(approvable_host(&host("github.io"), &[], &[]).is_err());
    assert!(approvable_host(&host("unpkg.com"), &[], &[]).is_err());
    assert!(approvable_host(&host("unpkg.com"), &[], &[host("unpkg.com")]).is_ok());
    assert!(approvable_host(&host("db.internal"), &[], &[]).is_err());
    // One refusal: the reason first, then the host.
    let not_approved = RefusalReason::NotApproved;
    assert!(refusal_approvable(
        not_approved,
        false,
        "files.example.com",
        &[]
    ));
    assert!(!refusal_approvable(not_approved, false, "github.io", &[]));
    assert!(!refusal_approvable(
        not_approved,
        false,
        "storage.googleapis.com",
        &[]
    ));
    let opted = [host("storage.googleapis.com")];
    assert!(refusal_approvable(
        not_approved,
        false,
        "storage.googleapis.com",
        &opted
    ));
    assert!(!refusal_approvable(
        RefusalReason::PrivateAddress,
        false,
        "files.example.com",
        &[]
    ));
    let package = RefusalReason::PackageNotApproved;
    assert!(refusal_approvable(package, true, "pypi.org", &[]));
    assert!(!refusal_approvable(package, false, "pypi.org", &[]));
}

#[test]
fn wildcard_matches_subdomains_only() -> Result<(), PatternError> {
    let w = p("*.Example.com.")?;
    assert_eq!(w.to_key(), "*.example.com");
    assert!(w.matches(&host("a.example.com")));
    assert!(w.matches(&host("a.b.EXAMPLE.com")));
    assert!(!w.matches(&host("example.com")));
    assert!(!w.matches(&host("badexample.com")));
    let e = p("Example.com")?;
    assert!(e.matches(&host("example.com.")));
    assert!(!e.matches(&host("a.example.com")));
    Ok(())
}

#[test]
fn candidate_keys_cover_exact_and_wildcards() {
    assert_eq!(
        SitePattern::candidate_keys(&host("a.b.example.com")),
        ["a.b.example.com", "*.b.example.com", "*.example.com"]
    );
}

#[test]
fn db_round_trip() -> Result<(), PatternError> {
    for s in ["*.example.com", "files.example.org"] {
        assert_eq!(SitePattern::from_db(s), Some(p(s)?));
    }
    assert_eq!(SitePattern::from_db("Not Normal"), None);
    Ok(())
}
