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
    /// What the sandbox really tried this turn for the card's sites and packages, from the
    /// proxy's own record, and an entry `"tried": false` for each site or URL the agent named
    /// that no request tried: the person weighs the agent's story against the facts. Always
    /// present (`[]` for a card drafted before evidence was kept).
    #[serde(default)]
    pub evidence: Vec<Evidence>,
}

/// One line of a card's evidence: requests of one kind the proxy refused this turn (host,
/// port, method, URL without query, package, reason), or a site or URL the agent named that
/// nothing tried (`tried: false`, `count` 0, no reason or times). Unknown parts are `null`
/// (the proxy sees no method or URL inside a tunnel it does not inspect).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Evidence {
    /// The host.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The request method, when the proxy saw it.
    pub method: Option<String>,
    /// The URL without query or fragment, when the proxy saw it (or the URL the agent named).
    pub url: Option<String>,
    /// The package, for a refused package download.
    pub package: Option<String>,
    /// The refusal reason (`null` on an entry nothing tried).
    pub reason: Option<String>,
    /// How many such requests were refused.
    pub count: i64,
    /// The first one, RFC 3339.
    pub first_at: Option<String>,
    /// The latest one, RFC 3339.
    pub last_at: Option<String>,
    /// Such a request carried data out (POST, PUT, PATCH or a body): the card page says so in
    /// words before its buttons. Present only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub upload: bool,
    /// `false` on a site or URL the agent named that no request of the turn tried; absent
    /// (true) on what was tried.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub tried: bool,
    /// The command the sandbox reported as having opened such a connection (a captured one,
    /// the first reported for the kind): evidence from the sandbox's side, which the page
    /// labels as such; any script holding the turn's credential could claim one. Absent
    /// when none was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

fn yes() -> bool {
    true
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
            evidence: Vec::new(),
        }
    }

    /// The same card with its evidence.
    pub fn with_evidence(mut self, evidence: Vec<Evidence>) -> Self {
        self.evidence = evidence;
        self
    }

    /// The hosts the evidence shows an upload to, sorted: what the page and the message warn
    /// about.
    pub fn upload_hosts(&self) -> Vec<String> {
        let hosts: std::collections::BTreeSet<&str> = self
            .evidence
            .iter()
            .filter(|e| e.upload)
            .map(|e| e.host.as_str())
            .collect();
        hosts.into_iter().map(str::to_owned).collect()
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
        let uploads = self.upload_hosts();
        if !uploads.is_empty() {
            message.push_str(&format!(
                " The script tried to send data to {}.",
                join_words(&uploads)
            ));
        }
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
            evidence: vec![],
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

    #[test]
    fn evidence_travels_with_the_card_and_uploads_are_named()
    -> Result<(), Box<dyn std::error::Error>> {
        let tried = |host: &str, method: &str, upload: bool| Evidence {
            host: host.into(),
            port: 80,
            method: Some(method.into()),
            url: Some(format!("http://{host}/x")),
            package: None,
            reason: Some("not_approved".into()),
            count: 2,
            first_at: Some("2026-01-01T00:00:00.000Z".into()),
            last_at: Some("2026-01-01T00:00:01.000Z".into()),
            upload,
            tried: true,
            command: None,
        };
        let plain = Card::new(vec![], vec![], vec![], "r".into());
        assert_eq!(
            serde_json::to_value(&plain)?["evidence"],
            serde_json::json!([])
        );
        let old: Card =
            serde_json::from_str(r#"{"sites":[],"urls":[],"packages":[],"reason":"r"}"#)?;
        assert_eq!(
            old, plain,
            "a card stored before evidence was kept still reads"
        );
        let c = Card {
            sites: vec!["a.example.com".into(), "b.example.com".into()],
            ..plain
        }
        .with_evidence(vec![
            tried("b.example.com", "POST", true),
            tried("a.example.com", "GET", false),
            tried("b.example.com", "PUT", true),
        ]);
        assert_eq!(c.upload_hosts(), ["b.example.com"]);
        assert_eq!(
            c.message(),
            "Allow connections (downloads and uploads) to a.example.com and b.example.com for the \
             rest of this chat? The script tried to send data to b.example.com."
        );
        let json = serde_json::to_value(&c)?;
        assert_eq!(json["evidence"][0]["upload"], true);
        assert_eq!(json["evidence"][0]["package"], serde_json::Value::Null);
        assert!(
            json["evidence"][1].get("upload").is_none(),
            "only when true"
        );
        assert!(
            json["evidence"][1].get("tried").is_none(),
            "absent when tried"
        );
        let untried = Evidence {
            tried: false,
            ..tried("c.example.com", "GET", false)
        };
        assert_eq!(serde_json::to_value(&untried)?["tried"], false);
        assert!(
            json["evidence"][0].get("command").is_none(),
            "absent when unreported"
        );
        let claimed = Evidence {
            command: Some("curl -s http://a.example.com/x".into()),
            ..tried("a.example.com", "GET", false)
        };
        assert_eq!(
            serde_json::to_value(&claimed)?["command"],
            "curl -s http://a.example.com/x"
        );
        let back: Card = serde_json::from_value(json)?;
        assert_eq!(back, c, "a stored card reads back whole");
        Ok(())
    }
}
