//! Site patterns (`host` or `*.suffix`): how administrators, launch lists and approvals name
//! what may be reached, and the one matching rule they all share; and the one answer to "can
//! a person approve this host as a whole" ([`approvable_host`]).

use crate::host::{Host, HostError};
use crate::reason::RefusalReason;

mod suffixes;
mod tenants;

/// Why a pattern cannot be stored. Each variant is a 422 wherever patterns are accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The host part did not normalise.
    #[error("{0}")]
    Host(#[from] HostError),
    /// Addresses are never approvable: the gate judges names, and addresses are vetted after DNS.
    #[error("IP literals cannot be approved")]
    IpLiteral,
    /// Internal-looking names are never approvable.
    #[error("internal-looking names cannot be approved")]
    Internal,
    /// `*`, `*.com`, `*.co.uk`, `*.github.io`, a wildcard above a private rule
    /// (`*.amazonaws.com`, above `s3.amazonaws.com`), or a public suffix itself: would open a
    /// whole registry, or every tenant of a shared host, to everyone.
    #[error("pattern would match a whole public suffix")]
    PublicSuffix,
    /// A `*` anywhere but as the whole first label.
    #[error("only a leading '*.' wildcard is supported")]
    Wildcard,
    /// A whole-host grant of (or a wildcard over) a path-style multi-tenant host outside the
    /// PSL (`storage.googleapis.com`, `raw.githubusercontent.com`, ...): one host serves many
    /// tenants by path, so it would open every tenant's files. The host is named.
    #[error(
        "{0} serves many tenants' files by path, so a grant of the whole host would open all of \
         them: an administrator can opt the host in (allow-whole-host); grants narrowed to a \
         path prefix are not available yet"
    )]
    PathMultiTenant(String),
}

/// A validated, normalised site pattern. Exact patterns match one host; `*.suffix` matches
/// sub-domains only, never the apex and never `badexample.com`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SitePattern {
    /// Exactly this host.
    Exact(Host),
    /// Any proper sub-domain of this host.
    Subdomains(Host),
}

impl SitePattern {
    /// Parses and validates a pattern, applying the same normaliser as the proxy and refusing
    /// IP literals, internal names (including `extra_internal`), and public suffixes per the
    /// Public Suffix List.
    pub fn parse(input: &str, extra_internal: &[Host]) -> Result<Self, PatternError> {
        let input = input.trim();
        if input == "*" {
            return Err(PatternError::PublicSuffix);
        }
        let (wild, rest) = match input.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, input),
        };
        if rest.contains('*') {
            return Err(PatternError::Wildcard);
        }
        let host = Host::parse(rest)?;
        if host.is_ip_literal() {
            return Err(PatternError::IpLiteral);
        }
        // `*.localhost` is best explained as internal, `*.com` as a public suffix, and a bare
        // `intranet` as internal again.
        if host.has_internal_suffix(extra_internal) {
            return Err(PatternError::Internal);
        }
        if wild && !wildcard_allowed(&host) {
            return Err(PatternError::PublicSuffix);
        }
        if host.is_internal(extra_internal) {
            return Err(PatternError::Internal);
        }
        if is_public_suffix(&host) {
            return Err(PatternError::PublicSuffix);
        }
        Ok(if wild {
            Self::Subdomains(host)
        } else {
            Self::Exact(host)
        })
    }

    /// Rebuilds a pattern stored by [`SitePattern::parse`]; `None` if the row is not one we
    /// wrote, or a wildcard that [`SitePattern::parse`] now refuses (stored before a rule
    /// tightened): such a row never widens anything.
    pub fn from_db(s: &str) -> Option<Self> {
        let (wild, rest) = match s.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let host = Host::parse(rest).ok()?;
        if host.as_str() != rest || (wild && !wildcard_allowed(&host)) {
            return None;
        }
        Some(if wild {
            Self::Subdomains(host)
        } else {
            Self::Exact(host)
        })
    }

    /// The matching rule, used both in memory and (through [`SitePattern::candidate_keys`]) in SQL.
    pub fn matches(&self, host: &Host) -> bool {
        match self {
            Self::Exact(h) => h == host,
            Self::Subdomains(suffix) => {
                host.is_strictly_within(suffix.as_str()) && wildcard_allowed(suffix)
            }
        }
    }

    /// Whether every host `other` matches is matched by this pattern too (so a deployment-wide
    /// inspection pattern can vouch for a site entry).
    pub fn covers(&self, other: &SitePattern) -> bool {
        match (self, other) {
            (_, Self::Exact(h)) => self.matches(h),
            (Self::Subdomains(s), Self::Subdomains(t)) => {
                (t == s || t.is_strictly_within(s.as_str())) && wildcard_allowed(s)
            }
            (Self::Exact(_), Self::Subdomains(_)) => false,
        }
    }

    /// Refuses a grant that would cover a path-style multi-tenant host (the kept list in
    /// `data/path-tenant-hosts.txt`) the administrator did not opt in (`opted_in`): the host
    /// itself, or a wildcard over it.
    pub fn check_whole_host(&self, opted_in: &[Host]) -> Result<(), PatternError> {
        let opted = |name: &str| opted_in.iter().any(|h| h.as_str() == name);
        match self {
            Self::Exact(h) => match tenants::listing(h.as_str()) {
                Some(_) if !opted(h.as_str()) => Err(PatternError::PathMultiTenant(h.to_string())),
                _ => Ok(()),
            },
            Self::Subdomains(s) => {
                let covered = tenants::ENTRIES.iter().find(|e| {
                    let name = e.name();
                    let under = within(name, s.as_str())
                        || matches!(e, tenants::Entry::Below(b) if *b == s.as_str());
                    under && !opted(name)
                });
                match covered {
                    Some(e) => Err(PatternError::PathMultiTenant(e.name().to_owned())),
                    None => Ok(()),
                }
            }
        }
    }

    /// [`SitePattern::parse`] for a pattern about to be stored as a grant (admin sites,
    /// launch-time sites): also refuses path-style multi-tenant hosts not in `opted_in`.
    pub fn parse_grant(
        input: &str,
        extra_internal: &[Host],
        opted_in: &[Host],
    ) -> Result<Self, PatternError> {
        let p = Self::parse(input, extra_internal)?;
        p.check_whole_host(opted_in)?;
        Ok(p)
    }

    /// The canonical stored text (`host` or `*.host`).
    pub fn to_key(&self) -> String {
        match self {
            Self::Exact(h) => h.as_str().to_owned(),
            Self::Subdomains(h) => format!("*.{h}"),
        }
    }

    /// Every stored key that would match `host`: the host itself and `*.parent` for each parent
    /// a wildcard may stand on. Lets the store answer "is this host allowed" with one indexed
    /// `IN (...)` query; a wildcard row [`SitePattern::parse`] would refuse (`*.amazonaws.com`,
    /// stored before that rule) is never a candidate, so it cannot allow anything.
    pub fn candidate_keys(host: &Host) -> Vec<String> {
        std::iter::once(host.as_str().to_owned())
            .chain(
                host.parents()
                    .filter(|p| wildcard_allowed_str(p))
                    .map(|p| format!("*.{p}")),
            )
            .collect()
    }
}

impl std::fmt::Display for SitePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exact(h) => write!(f, "{h}"),
            Self::Subdomains(h) => write!(f, "*.{h}"),
        }
    }
}

/// Whether a person can approve `host` as a whole, and if not why: it must be a name an exact
/// pattern stores (not an IP literal, internal-looking or a public suffix) and not a
/// path-style multi-tenant host the administrator did not opt in. The proxy's
/// `X-Egress-Approvable`, the refusal record's `approvable` and the approval tool all ask
/// here, so they never disagree.
pub fn approvable_host(
    host: &Host,
    extra_internal: &[Host],
    opted_in: &[Host],
) -> Result<(), PatternError> {
    match SitePattern::parse(host.as_str(), extra_internal)? {
        p @ SitePattern::Exact(_) => p.check_whole_host(opted_in),
        SitePattern::Subdomains(_) => Err(PatternError::Wildcard),
    }
}

/// Whether a person can approve one refusal: its reason is one an approval fixes (a package
/// refusal only when it names the package) and, for a host refusal, [`approvable_host`] says
/// yes (`host` is the recorded host text; internal names were refused for that reason before,
/// so only public suffixes and path-style multi-tenant hosts not in `opted_in` are left). The
/// proxy's `X-Egress-Approvable`, the refusal record's `approvable` and the approval tool's
/// merge all answer with this.
pub fn refusal_approvable(
    reason: RefusalReason,
    names_package: bool,
    host: &str,
    opted_in: &[Host],
) -> bool {
    if !reason.approvable_for(names_package) {
        return false;
    }
    reason == RefusalReason::PackageNotApproved
        || Host::parse(host).is_ok_and(|h| approvable_host(&h, &[], opted_in).is_ok())
}

/// Whether the normalised name `name` lies strictly below `suffix`.
fn within(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix)
        .is_some_and(|rest| rest.ends_with('.'))
}

/// True when `*.host` may be stored: no public-suffix rule (ICANN or private) lies at or
/// below `host`, and `psl` does not call it a suffix either (its default rule makes every
/// unknown TLD one). `*.amazonaws.com` fails because `s3.amazonaws.com` is a rule, exactly
/// like `*.s3.amazonaws.com`.
fn wildcard_allowed(host: &Host) -> bool {
    wildcard_allowed_str(host.as_str())
}

/// [`wildcard_allowed`] on a normalised name.
fn wildcard_allowed_str(name: &str) -> bool {
    !suffixes::rule_at_or_below(name) && psl::suffix_str(name).is_some_and(|s| s != name)
}

/// True when the name is itself a public suffix (ICANN or private section of the PSL,
/// including its `*` default rule for unknown TLDs).
fn is_public_suffix(host: &Host) -> bool {
    psl::suffix_str(host.as_str()).is_some_and(|s| s == host.as_str())
}

#[cfg(test)]
mod tests;
