//! Turning a resume entry into a decision, failing closed: only `resolved` with
//! `payload.approved === true` approves (any other status, payload or shape declines), and
//! the person may only narrow what the card asks (its package list, the access level, the
//! scope, the uses, the paths: `fields`); a payload field the gate does not know is refused,
//! never ignored. A parser that defaults to yes is the cheapest bug in an approval path.

mod fields;

pub use fields::MAX_USES;

use egressgate_store::db::interrupts::{Decision, Outcome};
use egressgate_store::{Access, Card, PackageSpec};
use serde_json::Value;

/// The payload fields a decision may carry; any other is refused.
pub const KNOWN_FIELDS: [&str; 6] = [
    "approved", "packages", "access", "scope", "max_uses", "paths",
];

/// What this deployment lets a person choose beyond narrowing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allowances {
    /// `"scope": "user"` (`--allow-user-scope`).
    pub user_scope: bool,
}

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

/// Computes the decision for `card`. Anything but an explicit approval declines; a field the
/// gate does not know, a package list that names anything not on the card, or a scope, use
/// count, access level or path list that is malformed or not allowed here is invalid (so
/// nothing is written).
pub fn decide(
    card: &Card,
    status: ResumeStatus,
    payload: Option<&Value>,
    allow: Allowances,
) -> Result<Decision, InvalidDecision> {
    let declined = |outcome| Decision {
        outcome,
        ..Decision::declined()
    };
    match status {
        ResumeStatus::Resolved => {}
        ResumeStatus::Cancelled => return Ok(declined(Outcome::Cancelled)),
        ResumeStatus::Other => return Ok(declined(Outcome::Declined)),
    }
    let fields = payload.and_then(Value::as_object);
    if let Some(unknown) =
        fields.and_then(|o| o.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())))
    {
        return Err(InvalidDecision(format!(
            "payload.{unknown} is not a field this gate knows (it knows {}); nothing was applied",
            KNOWN_FIELDS.join(", ")
        )));
    }
    let field = |name: &str| fields.and_then(|o| o.get(name));
    let scope = fields::scope(field("scope"), allow)?;
    let max_uses = fields::max_uses(field("max_uses"))?;
    let paths = fields::paths(field("paths"))?;
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
        scope,
        max_uses,
        paths,
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
mod tests;
