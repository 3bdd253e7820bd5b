//! The approval tool's fixed answers. Each is a template over sorted lists, so the same input
//! gives byte-identical text, and each tells the model what to do next in plain words: a
//! vague denial makes agents retry around it, a clear one lets them move on.

use egressgate_store::card::join_words;
use egressgate_store::{Host, RefusalReason};

/// Step 3's error message.
pub(crate) const NOTHING_TO_APPROVE: &str =
    "name the URLs or packages, or run the step first so the blocked sites are recorded";

/// Step 5's message.
pub(crate) const ALREADY_APPROVED: &str = "already approved: run it";

/// Every denial ends with this.
pub(crate) const CONTINUE: &str = "Continue without that data and say so.";

/// Who cannot answer, for step 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// The turn was opened with `can_ask_human: false`.
    NoHuman,
    /// The user may not approve.
    NotPermitted,
}

impl NoAnswer {
    /// The answer's `code`.
    pub(crate) fn code(self) -> DenyCode {
        match self {
            Self::NoHuman => DenyCode::NoHuman,
            Self::NotPermitted => DenyCode::NotPermitted,
        }
    }
}

/// Why the approval tool denied, each a fixed template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DenyCode {
    /// A named host was refused for a reason no approval fixes.
    NotApprovable,
    /// The person declined it on this turn's card.
    DeclinedThisTurn,
    /// The turn was opened with `can_ask_human: false`.
    NoHuman,
    /// The user may not approve.
    NotPermitted,
}

/// What stays blocked: `sites a and b; packages c`. Both lists come sorted.
fn blocked(sites: &[String], packages: &[String]) -> String {
    let mut parts = Vec::new();
    if !sites.is_empty() {
        parts.push(format!("sites {}", join_words(sites)));
    }
    if !packages.is_empty() {
        parts.push(format!("packages {}", join_words(packages)));
    }
    parts.join("; ")
}

/// Step 6: nobody can answer a card in this run.
pub(crate) fn denied(who: NoAnswer, sites: &[String], packages: &[String]) -> String {
    let why = match who {
        NoAnswer::NoHuman => "No person can answer an approval request in this run",
        NoAnswer::NotPermitted => "This user is not permitted to approve downloads",
    };
    format!(
        "{why}, so these stay blocked: {}. {CONTINUE}",
        blocked(sites, packages)
    )
}

/// Step 6: the person declined these on a card of this turn.
pub(crate) fn declined_this_turn(sites: &[String], packages: &[String]) -> String {
    format!(
        "The person declined {} in this turn; do not ask again until the next user message. \
         {CONTINUE}",
        blocked(sites, packages)
    )
}

/// Step 8: the chat already has a card waiting for the person.
pub(crate) const PENDING: &str = "A person has not answered this chat's open approval request \
     yet; wait for that answer instead of asking again.";

/// Step 4: named hosts refused for a reason no approval fixes; `pairs` come sorted.
pub(crate) fn not_approvable(pairs: &[(Host, RefusalReason)]) -> String {
    let items: Vec<String> = pairs.iter().map(|(h, r)| format!("{h} ({r})")).collect();
    format!(
        "No approval can fix these refusals: {}. Do not try to get around the proxy. {CONTINUE}",
        items.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_fixed() {
        let s = ["a.example.com".to_owned(), "b.example.com".to_owned()];
        let p = ["numpy".to_owned()];
        assert_eq!(
            denied(NoAnswer::NoHuman, &s, &p),
            "No person can answer an approval request in this run, so these stay blocked: \
             sites a.example.com and b.example.com; packages numpy. Continue without that data and say so."
        );
        assert_eq!(
            denied(NoAnswer::NotPermitted, &[], &p),
            "This user is not permitted to approve downloads, so these stay blocked: packages numpy. \
             Continue without that data and say so."
        );
        assert_eq!(
            declined_this_turn(&s, &[]),
            "The person declined sites a.example.com and b.example.com in this turn; do not ask \
             again until the next user message. Continue without that data and say so."
        );
        let h = crate::approval::testing::host("x.example.com");
        assert_eq!(
            not_approvable(&[(h, RefusalReason::PrivateAddress)]),
            "No approval can fix these refusals: x.example.com (private_address). \
             Do not try to get around the proxy. Continue without that data and say so."
        );
    }
}
