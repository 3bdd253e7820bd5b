//! What a turn may already use: the administrators' lists, the turn's launch lists and the
//! chat's unexpired approvals. The policy endpoint lists them; the approval tool drops what
//! they already cover. Matching uses `SitePattern::matches`, the proxy's own rule.

use std::collections::BTreeSet;

use egressgate_store::db::admin::AdminList;
use egressgate_store::db::policy::{ApprovalKind, ApprovalRow, ApprovalsOf};
use egressgate_store::db::turns::Turn;
use egressgate_store::{Access, Host, PackageSpec, SitePattern, Store, StoreError, Timestamp};

/// Every grant in force for one turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
    sites: BTreeSet<SitePattern>,
    /// Sites granted short of their whole host (`read`, path prefixes, counted uses): listed,
    /// but a card may still ask to widen them.
    read_sites: BTreeSet<SitePattern>,
    packages: BTreeSet<String>,
}

impl Grants {
    /// Builds grants from parts (pure; the store-backed [`Grants::load`] feeds it).
    pub(crate) fn from_parts(
        sites: impl IntoIterator<Item = SitePattern>,
        packages: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            sites: sites.into_iter().collect(),
            read_sites: BTreeSet::new(),
            packages: packages.into_iter().collect(),
        }
    }

    /// Reads the three sources for `turn` at `now`. A stored value that no longer parses as
    /// a pattern is skipped, never widened: the worst case is asking a person again.
    pub(crate) async fn load(
        store: &Store,
        turn: &Turn,
        now: Timestamp,
    ) -> Result<Self, StoreError> {
        let admin_sites = store.admin_list(AdminList::Sites).await?;
        let admin_packages = store.admin_list(AdminList::Packages).await?;
        let of = ApprovalsOf {
            user: &turn.user,
            chat: &turn.chat,
            turn: &turn.id,
        };
        let approvals = store.turn_approvals(of, now).await?;
        let mut sites: Vec<SitePattern> = turn.launch.sites.clone();
        let mut read_sites: Vec<SitePattern> = turn.launch.read_sites.clone();
        let mut packages: Vec<String> = turn
            .launch
            .packages
            .iter()
            .map(|p| p.as_str().to_owned())
            .collect();
        for e in &admin_sites {
            let into = match e.rules.access {
                Access::Full => &mut sites,
                Access::Read => &mut read_sites,
            };
            into.extend(stored_pattern(&e.value));
        }
        packages.extend(admin_packages.into_iter().map(|e| e.value));
        // A spent row grants nothing; a row narrowed to `read`, paths or counted uses is
        // listed, but a card may still ask for more of its host.
        for row in approvals.into_iter().filter(ApprovalRow::admits) {
            match (row.kind, row.is_whole()) {
                (ApprovalKind::Site, true) => sites.extend(stored_pattern(&row.value)),
                (ApprovalKind::Site, false) => read_sites.extend(stored_pattern(&row.value)),
                (ApprovalKind::Package, _) => packages.push(row.value),
            }
        }
        Ok(Self {
            read_sites: read_sites.into_iter().collect(),
            ..Self::from_parts(sites, packages)
        })
    }

    /// Whether some grant's pattern opens `host` fully (a `read` grant leaves a card something
    /// to ask for: `full`).
    pub(crate) fn allows_site(&self, host: &Host) -> bool {
        self.sites.iter().any(|p| p.matches(host))
    }

    /// Whether the package is granted.
    /// Whether the grants already cover every version `spec` asks for: an unpinned grant of
    /// its package, or a grant with exactly its pin. Another pin may cover only part of it,
    /// so the card still asks.
    pub(crate) fn allows_package(&self, spec: &PackageSpec) -> bool {
        self.packages.contains(spec.package().as_str()) || self.packages.contains(spec.as_str())
    }

    /// Every site pattern in canonical form, sorted and de-duplicated.
    pub(crate) fn site_keys(&self) -> Vec<String> {
        let keys: BTreeSet<String> = self
            .sites
            .iter()
            .chain(&self.read_sites)
            .map(SitePattern::to_key)
            .collect();
        keys.into_iter().collect()
    }

    /// Every package name, sorted and de-duplicated.
    pub(crate) fn package_names(&self) -> Vec<String> {
        self.packages.iter().cloned().collect()
    }
}

/// The patterns whose hosts the proxy inspects: the deployment-wide `--inspect` ones and the
/// administrators' entries marked `inspect`. A `read` grant can only be kept where the proxy
/// sees each request.
pub(crate) async fn inspected_patterns(
    state: &crate::state::AppState,
) -> Result<Vec<SitePattern>, StoreError> {
    patterns(&state.store, &state.settings.inspect).await
}

async fn patterns(store: &Store, inspect: &[SitePattern]) -> Result<Vec<SitePattern>, StoreError> {
    let mut patterns = inspect.to_vec();
    patterns.extend(
        store
            .admin_list(AdminList::Sites)
            .await?
            .into_iter()
            .filter(|e| e.rules.inspect)
            .filter_map(|e| stored_pattern(&e.value)),
    );
    Ok(patterns)
}

/// The first of `sites` (exact hosts) that the proxy does not inspect.
pub(crate) async fn first_not_inspected(
    state: &crate::state::AppState,
    sites: &[String],
) -> Result<Option<String>, StoreError> {
    let inspected = inspected_patterns(state).await?;
    Ok(sites.iter().find(|s| !covered(&inspected, s)).cloned())
}

/// Those of `sites` (exact hosts) the proxy inspects: the card page offers `read` and path
/// prefixes only where the resume would keep them.
pub(crate) async fn inspected_sites(
    state: &crate::state::AppState,
    sites: &[String],
) -> Result<Vec<String>, StoreError> {
    inspected_in(&state.store, &state.settings.inspect, sites).await
}

/// [`inspected_sites`] from the parts (the Slack channel has no request state).
pub(crate) async fn inspected_in(
    store: &Store,
    inspect: &[SitePattern],
    sites: &[String],
) -> Result<Vec<String>, StoreError> {
    let inspected = patterns(store, inspect).await?;
    Ok(sites
        .iter()
        .filter(|s| covered(&inspected, s))
        .cloned()
        .collect())
}

/// Whether one of `patterns` matches the exact host `site` (a host that does not parse never is).
fn covered(patterns: &[SitePattern], site: &str) -> bool {
    Host::parse(site).is_ok_and(|h| patterns.iter().any(|p| p.matches(&h)))
}

fn stored_pattern(value: &str) -> Option<SitePattern> {
    let parsed = SitePattern::from_db(value);
    if parsed.is_none() {
        tracing::warn!(value, "stored site pattern does not parse; ignored");
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(s: &str) -> SitePattern {
        SitePattern::parse(s, &[]).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn wildcards_match_subdomains_only_and_lists_are_sorted() {
        let g = Grants::from_parts(
            [pat("*.example.com"), pat("b.org"), pat("b.org")],
            ["requests".to_owned(), "numpy".to_owned()],
        );
        assert!(g.allows_site(&host("files.example.com")));
        assert!(!g.allows_site(&host("example.com")));
        assert!(!g.allows_site(&host("a.b.org")));
        assert!(g.allows_site(&host("B.org.")));
        assert_eq!(g.site_keys(), ["*.example.com", "b.org"]);
        assert_eq!(g.package_names(), ["numpy", "requests"]);
        let spec = |s: &str| PackageSpec::parse(s).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(g.allows_package(&spec("Requests")));
        // An unpinned grant covers every pin; a pinned one only the same pin.
        assert!(g.allows_package(&spec("numpy==2.1.*")));
        let pinned = Grants::from_parts([], ["torch==2.*".to_owned()]);
        assert!(pinned.allows_package(&spec("torch==2.*")));
        assert!(!pinned.allows_package(&spec("torch")));
        assert!(!pinned.allows_package(&spec("torch>=3")));
    }
}
