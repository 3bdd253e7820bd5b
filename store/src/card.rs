//! The card: what a person is shown and answers. Computed by the server from the approval
//! request and the turn's refusals, stored as a draft, then frozen in the pointer record; the
//! runtime can never alter it, and the person may only narrow its package list.

use crate::host::Host;
use crate::package::PackageSpec;

/// One approval card. Lists are sorted and de-duplicated so the same request always yields
/// a byte-identical card.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Card {
    /// Hosts to allow (exact, normalised).
    pub sites: Vec<String>,
    /// Sanitised URLs the agent named (no credentials, query or fragment).
    pub urls: Vec<String>,
    /// Canonical package names, each with the pin the agent asked for if any
    /// (`numpy==2.1.*`, `npm:lodash@^4`): the approval rows grant exactly that.
    pub packages: Vec<String>,
    /// The agent's one-sentence reason.
    pub reason: String,
    /// Blocked hosts that did not fit on the card (`card-max-sites`); the card does not
    /// approve them, and says so. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sites_not_shown: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Card {
    /// Builds a card with sorted, de-duplicated lists.
    pub fn new(
        sites: Vec<Host>,
        urls: Vec<String>,
        packages: Vec<PackageSpec>,
        reason: String,
    ) -> Self {
        let mut sites: Vec<String> = sites.iter().map(|h| h.as_str().to_owned()).collect();
        let mut urls = urls;
        let mut packages: Vec<String> = packages.iter().map(|p| p.as_str().to_owned()).collect();
        for v in [&mut sites, &mut urls, &mut packages] {
            v.sort();
            v.dedup();
        }
        Self {
            sites,
            urls,
            packages,
            reason,
            sites_not_shown: 0,
        }
    }

    /// The same card, saying that `n` more blocked hosts were left out.
    pub fn with_sites_not_shown(mut self, n: usize) -> Self {
        self.sites_not_shown = n;
        self
    }

    /// The consequence in words, for the AG-UI interrupt `message`: "Allow connections
    /// (downloads and uploads) to a and b for the rest of this chat?"
    pub fn message(&self) -> String {
        let mut parts = Vec::new();
        if !self.sites.is_empty() {
            parts.push(format!(
                "Allow connections (downloads and uploads) to {}",
                join_words(&self.sites)
            ));
        }
        if !self.packages.is_empty() {
            let verb = if parts.is_empty() {
                "Allow installing"
            } else {
                "and installing"
            };
            parts.push(format!("{verb} {}", join_words(&self.packages)));
        }
        let mut message = format!("{} for the rest of this chat?", parts.join(" "));
        if self.sites_not_shown > 0 {
            let n = self.sites_not_shown;
            let s = if n == 1 { "site" } else { "sites" };
            message.push_str(&format!(
                " ({n} more blocked {s} not shown and not included: ask for them separately.)"
            ));
        }
        message
    }
}

/// `a`, `a and b`, `a, b and c`.
pub fn join_words(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_the_consequence() {
        let c = Card {
            sites: vec!["files.example.com".into(), "pypi.org".into()],
            urls: vec![],
            packages: vec![],
            reason: "r".into(),
            sites_not_shown: 0,
        };
        assert_eq!(
            c.message(),
            "Allow connections (downloads and uploads) to files.example.com and pypi.org for the rest of this chat?"
        );
        let c = Card {
            sites: vec![],
            packages: vec!["requests".into()],
            ..c
        };
        assert_eq!(
            c.message(),
            "Allow installing requests for the rest of this chat?"
        );
        let c = Card {
            sites: vec!["a.example.com".into()],
            packages: vec![],
            ..c
        }
        .with_sites_not_shown(3);
        assert_eq!(
            c.message(),
            "Allow connections (downloads and uploads) to a.example.com for the rest of this chat? \
             (3 more blocked sites not shown and not included: ask for them separately.)"
        );
        let json = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(json["sites_not_shown"], 3);
        let plain = Card::new(vec![], vec![], vec![], "r".into());
        let json = serde_json::to_value(&plain).unwrap_or_default();
        assert!(json.get("sites_not_shown").is_none(), "absent when zero");
    }
}
