//! The kept list of path-style multi-tenant hosts (`data/path-tenant-hosts.txt`): hosts outside
//! the Public Suffix List that serve many tenants' files told apart by path, so a whole-host
//! grant of one opens every tenant. The file says why each entry is there.

use std::sync::LazyLock;

/// The list as shipped: a host or `*.suffix` first on each line, then its reason.
const LIST: &str = include_str!("../../data/path-tenant-hosts.txt");

/// One entry: exactly a host, or every host strictly below a suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Exactly this host.
    Host(&'static str),
    /// Every host strictly below this one.
    Below(&'static str),
}

impl Entry {
    /// The entry's own name (`storage.googleapis.com`, or `backblazeb2.com` for `*.` ones).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Host(h) | Self::Below(h) => h,
        }
    }

    /// Whether `name` (a normalised host) is a host this entry lists.
    pub(crate) fn lists(&self, name: &str) -> bool {
        match self {
            Self::Host(h) => name == *h,
            Self::Below(s) => name.strip_suffix(s).is_some_and(|rest| rest.ends_with('.')),
        }
    }
}

/// The entries, read once.
pub(crate) static ENTRIES: LazyLock<Vec<Entry>> = LazyLock::new(|| {
    LIST.lines()
        .filter_map(|line| {
            let first = line.split_whitespace().next()?;
            if first.starts_with('#') {
                return None;
            }
            Some(match first.strip_prefix("*.") {
                Some(s) => Entry::Below(s),
                None => Entry::Host(first),
            })
        })
        .collect()
});

/// The entry listing `name` (a normalised host), if any.
pub(crate) fn listing(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.lists(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_reads_and_every_entry_is_a_normal_host_off_the_psl() {
        assert!(ENTRIES.len() >= 15, "{:?}", *ENTRIES);
        for e in ENTRIES.iter() {
            let h = crate::Host::parse(e.name()).unwrap_or_else(|err| unreachable!("{e:?}: {err}"));
            assert_eq!(h.as_str(), e.name(), "not normalised: {e:?}");
            // Listed hosts are not PSL rules themselves (those are refused anyway).
            assert!(!super::super::suffixes::rule_at_or_below(e.name()), "{e:?}");
        }
        assert_eq!(
            listing("raw.githubusercontent.com"),
            Some(&Entry::Host("raw.githubusercontent.com"))
        );
        assert!(listing("f003.backblazeb2.com").is_some());
        assert!(listing("backblazeb2.com").is_none());
        assert!(listing("xbackblazeb2.com").is_none());
        assert!(listing("githubusercontent.com").is_none());
        assert!(listing("files.example.com").is_none());
    }
}
