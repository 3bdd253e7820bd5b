//! The decision parser's cases: what approves, what declines, what is refused.

use super::*;
use egressgate_store::{PathPrefix, Scope};
use serde_json::json;

const ALLOW: Allowances = Allowances { user_scope: true };

fn card() -> Card {
    Card {
        sites: vec!["pypi.org".into()],
        urls: vec![],
        packages: vec!["numpy".into(), "requests".into()],
        reason: "r".into(),
        sites_not_shown: 0,
        evidence: vec![],
    }
}

fn outcome(status: ResumeStatus, payload: Value) -> Outcome {
    match decide(&card(), status, Some(&payload), ALLOW) {
        Ok(d) => d.outcome,
        Err(e) => unreachable!("{e}"),
    }
}

#[test]
fn only_an_explicit_true_approves() {
    use ResumeStatus::*;
    assert_eq!(
        outcome(Resolved, json!({"approved": true})),
        Outcome::Approved
    );
    for p in [
        json!({"approved": "true"}),
        json!({"approved": 1}),
        json!({}),
        json!(true),
        json!(null),
    ] {
        assert_eq!(outcome(Resolved, p), Outcome::Declined);
    }
    assert_eq!(
        outcome(Cancelled, json!({"approved": true})),
        Outcome::Cancelled
    );
    assert!(decide(&card(), Resolved, None, ALLOW).is_ok_and(|d| d.outcome == Outcome::Declined));
    assert_eq!(
        outcome(Other, json!({"approved": true, "packages": ["torch"]})),
        Outcome::Declined
    );
}

#[test]
fn only_the_two_known_statuses_are_read_as_such() {
    use ResumeStatus::*;
    assert_eq!(ResumeStatus::of(Some(&json!("resolved"))), Resolved);
    assert_eq!(ResumeStatus::of(Some(&json!("cancelled"))), Cancelled);
    for other in [
        json!("approved"),
        json!("Resolved"),
        json!(1),
        json!(null),
        json!({}),
    ] {
        assert_eq!(ResumeStatus::of(Some(&other)), Other, "{other}");
    }
    assert_eq!(ResumeStatus::of(None), Other);
}

#[test]
fn access_defaults_to_the_cards_full_and_may_only_be_narrowed_to_read() {
    let with =
        |v: Value| decide(&card(), ResumeStatus::Resolved, Some(&v), ALLOW).map(|d| d.access);
    assert_eq!(with(json!({"approved": true})), Ok(Access::Full));
    assert_eq!(
        with(json!({"approved": true, "access": "full"})),
        Ok(Access::Full)
    );
    assert_eq!(
        with(json!({"approved": true, "access": "read"})),
        Ok(Access::Read)
    );
    for bad in [json!("write"), json!("READ"), json!(1), json!(null)] {
        assert!(
            with(json!({"approved": true, "access": bad})).is_err(),
            "{bad}"
        );
    }
    let declined = decide(&card(), ResumeStatus::Cancelled, None, ALLOW).map(|d| d.access);
    assert_eq!(
        declined,
        Ok(Access::Full),
        "a decline grants nothing at any level"
    );
}

#[test]
fn packages_may_only_be_narrowed() {
    let d = decide(
        &card(),
        ResumeStatus::Resolved,
        Some(&json!({"approved": true, "packages": ["Requests"]})),
        ALLOW,
    );
    assert_eq!(d.map(|d| d.packages), Ok(vec!["requests".to_owned()]));
    let d = decide(
        &card(),
        ResumeStatus::Resolved,
        Some(&json!({"approved": true})),
        ALLOW,
    );
    assert_eq!(
        d.map(|d| (d.sites, d.packages)),
        Ok((card().sites, card().packages))
    );
    for bad in [json!(["torch"]), json!("numpy"), json!([1])] {
        let d = decide(
            &card(),
            ResumeStatus::Resolved,
            Some(&json!({"approved": true, "packages": bad})),
            ALLOW,
        );
        assert!(d.is_err());
    }
}

fn decided(v: Value, allow: Allowances) -> Result<Decision, InvalidDecision> {
    decide(&card(), ResumeStatus::Resolved, Some(&v), allow)
}

#[test]
fn a_narrow_grant_reads_scope_uses_and_paths() {
    let d = decided(
        json!({"approved": true, "scope": "turn", "max_uses": 2, "access": "read",
               "paths": ["/org/", "/org/"]}),
        ALLOW,
    );
    let d = d.unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(d.scope, Scope::Turn);
    assert_eq!(d.max_uses, Some(2));
    assert_eq!(d.access, Access::Read);
    let paths: Vec<&str> = d.paths.iter().flatten().map(PathPrefix::as_str).collect();
    assert_eq!(paths, ["/org/"], "a repeated prefix is kept once");
    let plain = decided(json!({"approved": true}), ALLOW).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(
        (plain.scope, plain.max_uses, plain.paths),
        (Scope::Chat, None, None)
    );
    let user = decided(json!({"approved": true, "scope": "user"}), ALLOW);
    assert_eq!(user.map(|d| d.scope), Ok(Scope::User));
}

#[test]
fn anything_unknown_or_out_of_bounds_is_refused() {
    let off = Allowances::default();
    assert!(decided(json!({"approved": true, "scope": "user"}), off).is_err());
    for bad in [
        json!({"approved": true, "note": "x"}),
        json!({"approved": false, "scopes": "turn"}),
        json!({"approved": true, "scope": "forever"}),
        json!({"approved": true, "scope": "Chat"}),
        json!({"approved": true, "scope": 1}),
        json!({"approved": true, "scope": null}),
        json!({"approved": true, "max_uses": 0}),
        json!({"approved": true, "max_uses": -1}),
        json!({"approved": true, "max_uses": 2.5}),
        json!({"approved": true, "max_uses": "2"}),
        json!({"approved": true, "max_uses": fields::MAX_USES + 1}),
        json!({"approved": true, "max_uses": u64::MAX}),
        json!({"approved": true, "paths": []}),
        json!({"approved": true, "paths": "/org/"}),
        json!({"approved": true, "paths": [1]}),
        json!({"approved": true, "paths": ["org/"]}),
        json!({"approved": true, "paths": ["/org/../x/"]}),
        json!({"approved": true, "paths": ["/org//"]}),
        json!({"approved": true, "paths": ["/org/%2e%2e/"]}),
        json!({"approved": true, "paths": ["/org;x/"]}),
        json!({"approved": true, "paths": ["/./org/"]}),
    ] {
        assert!(decided(bad.clone(), ALLOW).is_err(), "{bad}");
    }
    let many: Vec<String> = (0..=egressgate_store::path_prefix::MAX_PREFIXES)
        .map(|i| format!("/p{i}/"))
        .collect();
    assert!(decided(json!({"approved": true, "paths": many}), ALLOW).is_err());
}
