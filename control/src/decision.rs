//! Turning a resume entry into a decision, failing closed: only `resolved` with
//! `payload.approved === true` approves (any other status, payload or shape declines), and
//! the person may only narrow the card's package list. A parser that defaults to yes is the
//! cheapest bug in an approval path.

use egressgate_store::db::interrupts::{Decision, Outcome};
use egressgate_store::{Access, Card, PackageSpec};
use serde_json::Value;

/// The AG-UI resume entry's status, read leniently: a missing, mistyped or unknown status is
/// [`ResumeStatus::Other`], which declines (fail closed) instead of failing the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeStatus {
    /// `"resolved"`: the person answered (the payload says how).
    Resolved,
    /// `"cancelled"`: the person never answered (typed instead, or the card expired
    /// client-side).
    Cancelled,
    /// Anything else, or no status at all.
    Other,
}

impl ResumeStatus {
    /// Reads the entry's `status` value, whatever its JSON type.
    pub fn of(status: Option<&Value>) -> Self {
        match status.and_then(Value::as_str) {
            Some("resolved") => Self::Resolved,
            Some("cancelled") => Self::Cancelled,
            _ => Self::Other,
        }
    }
}

/// Why a decision cannot be applied: the answer tried to widen the card.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidDecision(pub String);

/// Computes the decision for `card`. Anything but an explicit approval declines; a package
/// list that names anything not on the card (or is not a list of names) is invalid.
pub fn decide(
    card: &Card,
    status: ResumeStatus,
    payload: Option<&Value>,
) -> Result<Decision, InvalidDecision> {
    let declined = |outcome| Decision {
        outcome,
        sites: Vec::new(),
        packages: Vec::new(),
        access: Access::Full,
    };
    match status {
        ResumeStatus::Resolved => {}
        ResumeStatus::Cancelled => return Ok(declined(Outcome::Cancelled)),
        ResumeStatus::Other => return Ok(declined(Outcome::Declined)),
    }
    let fields = payload.and_then(Value::as_object);
    let packages = match fields.and_then(|o| o.get("packages")) {
        None => card.packages.clone(),
        Some(list) => narrow(card, list)?,
    };
    // The card grants `full`; an answer may keep it or narrow it to `read`, nothing else.
    let access = match fields.and_then(|o| o.get("access")) {
        None => Access::Full,
        Some(v) => v.as_str().and_then(Access::parse).ok_or_else(|| {
            InvalidDecision(
                "payload.access must be \"full\" (the card's level) or \"read\" (downloads only)"
                    .into(),
            )
        })?,
    };
    if fields.and_then(|o| o.get("approved")) != Some(&Value::Bool(true)) {
        return Ok(declined(Outcome::Declined));
    }
    Ok(Decision {
        outcome: Outcome::Approved,
        sites: card.sites.clone(),
        packages,
        access,
    })
}

/// The card's packages that `list` keeps, in the card's order.
fn narrow(card: &Card, list: &Value) -> Result<Vec<String>, InvalidDecision> {
    let not_a_list = || InvalidDecision("payload.packages must be a list of package names".into());
    let items = list.as_array().ok_or_else(not_a_list)?;
    let mut keep = Vec::with_capacity(items.len());
    for item in items {
        let name = item.as_str().ok_or_else(not_a_list)?;
        let canonical = PackageSpec::parse(name)
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|_| name.to_owned());
        let on_card = card
            .packages
            .iter()
            .find(|p| **p == canonical || p.as_str() == name);
        match on_card {
            Some(p) => keep.push(p.clone()),
            None => {
                return Err(InvalidDecision(format!(
                    "package {name:?} is not on the card: the answer may only remove packages"
                )));
            }
        }
    }
    Ok(card
        .packages
        .iter()
        .filter(|p| keep.contains(p))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        match decide(&card(), status, Some(&payload)) {
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
        assert!(decide(&card(), Resolved, None).is_ok_and(|d| d.outcome == Outcome::Declined));
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
        let with = |v: Value| decide(&card(), ResumeStatus::Resolved, Some(&v)).map(|d| d.access);
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
        let declined = decide(&card(), ResumeStatus::Cancelled, None).map(|d| d.access);
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
        );
        assert_eq!(d.map(|d| d.packages), Ok(vec!["requests".to_owned()]));
        let d = decide(
            &card(),
            ResumeStatus::Resolved,
            Some(&json!({"approved": true})),
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
            );
            assert!(d.is_err());
        }
    }
}
