//! The one Public Suffix List question `psl` cannot answer: does any rule lie at or below a
//! name? (`psl` answers "what is the suffix of this name", which says nothing about
//! `s3.amazonaws.com` when asked about `amazonaws.com`.)
//!
//! `data/psl-rules.txt` is the rule list the locked `psl` crate was generated from (its own
//! `data/rules.txt`, ICANN and private sections); `store/data/README.md` says how to refresh it.
//! It is read once, on the first pattern validated, into the set of every rule and every
//! parent of a rule: a name is in that set exactly when some rule equals it or ends with
//! `.name`.

use std::collections::HashSet;
use std::sync::LazyLock;

/// The rules, one a line (Unicode or A-labels, `*.` wildcards, `!` exceptions).
const RULES: &str = include_str!("../../data/psl-rules.txt");

/// Every rule (wildcards without their `*.`) and every proper parent of one, as A-labels.
static AT_OR_ABOVE_A_RULE: LazyLock<HashSet<Box<str>>> = LazyLock::new(|| {
    let mut set = HashSet::new();
    for rule in rules() {
        let mut rest = rule.as_str();
        loop {
            set.insert(Box::from(rest));
            match rest.split_once('.') {
                Some((_, parent)) => rest = parent,
                None => break,
            }
        }
    }
    set
});

/// The list's rules as normalised names: comments, blank lines and exceptions (`!name`,
/// which only ever narrow a wildcard) skipped, a leading `*.` dropped, IDNA to ASCII.
fn rules() -> impl Iterator<Item = String> {
    RULES.lines().filter_map(|line| {
        let rule = line.split_whitespace().next()?;
        if rule.starts_with("//") || rule.starts_with('!') {
            return None;
        }
        let rule = rule.strip_prefix("*.").unwrap_or(rule);
        if rule.is_ascii() {
            Some(rule.to_ascii_lowercase())
        } else {
            idna::domain_to_ascii(rule).ok()
        }
    })
}

/// True when some public-suffix rule is `name` itself or lies below it (`amazonaws.com`:
/// `s3.amazonaws.com`; `com`: `com`). `name` must be a normalised host (lower-case A-labels).
pub(crate) fn rule_at_or_below(name: &str) -> bool {
    AT_OR_ABOVE_A_RULE.contains(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_above_private_rules_are_found() {
        for name in [
            "com",
            "co.uk",
            "uk",
            "amazonaws.com",
            "s3.amazonaws.com",
            "windows.net",
            "core.windows.net",
            "github.io",
            "io",
            // `*.ck` is a rule: `ck` is at it.
            "ck",
            // Unicode rules are found by their A-labels (`公司.cn`).
            "xn--55qx5d.cn",
        ] {
            assert!(rule_at_or_below(name), "{name}");
        }
        for name in [
            "example.com",
            "files.example.com",
            "bucket.s3.amazonaws.com",
            "pypi.org",
            "github.com",
            // Exceptions narrow a wildcard; they are not rules of their own.
            "www.ck",
        ] {
            assert!(!rule_at_or_below(name), "{name}");
        }
    }

    /// The copy must not be ahead of (or apart from) the `psl` crate it was taken from: every
    /// plain rule in it is a suffix to `psl` too. A failure means the file and `Cargo.lock`'s
    /// `psl` were refreshed apart; refresh them together.
    #[test]
    fn the_copy_agrees_with_the_psl_crate() {
        let mut checked = 0;
        for line in RULES.lines() {
            let rule = line.trim();
            if rule.is_empty() || rule.starts_with("//") || rule.starts_with('!') {
                continue;
            }
            if rule.starts_with("*.") || !rule.is_ascii() {
                continue;
            }
            assert_eq!(psl::suffix_str(rule), Some(rule), "{rule}");
            checked += 1;
        }
        assert!(checked > 5_000, "only {checked} rules read");
    }
}
