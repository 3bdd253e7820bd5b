//! The card's evidence, pure: from the proxy's own record of this turn, what the sandbox
//! really tried for the card's sites and packages, and which sites and URLs the agent named
//! that no request tried. The person then weighs the agent's story against the facts: an
//! upload the agent did not mention, or a URL only the agent talks about.

use std::collections::BTreeSet;

use egressgate_store::card::Evidence;
use egressgate_store::db::refusals::{EvidenceRow, RefusalRow};
use egressgate_store::{Card, PackageSpec, SanitizedUrl};

/// At most this many lines of requests on one card (the most recently seen), so the card
/// stays small in the pointer record and readable; the untried entries come on top, at most
/// one per named URL (`card-max-urls`).
pub(crate) const MAX_ON_CARD: usize = 64;

/// The evidence for `card`: `rows` (the turn's evidence, most recent first) about its sites
/// and packages, sorted by host, port, URL, method, package and reason; then an entry
/// `tried: false` for each named URL (`named`) that no refusal of the turn (`refusals`) shows
/// was tried.
pub(crate) fn for_card(
    card: &Card,
    rows: &[EvidenceRow],
    refusals: &[RefusalRow],
    named: &[SanitizedUrl],
) -> Vec<Evidence> {
    let packages: BTreeSet<String> = card
        .packages
        .iter()
        .filter_map(|p| PackageSpec::parse(p).ok())
        .map(|p| p.package().as_str().to_owned())
        .collect();
    let about_card = |r: &&EvidenceRow| {
        card.sites.contains(&r.host) || r.package.as_ref().is_some_and(|p| packages.contains(p))
    };
    let mut shown: Vec<&EvidenceRow> = rows.iter().filter(about_card).take(MAX_ON_CARD).collect();
    shown.sort_by(|a, b| {
        (&a.host, a.port, &a.url, &a.method, &a.package, a.reason)
            .cmp(&(&b.host, b.port, &b.url, &b.method, &b.package, b.reason))
    });
    let mut out: Vec<Evidence> = shown.into_iter().map(tried).collect();
    out.extend(
        named
            .iter()
            .filter(|u| !was_tried(u, rows, refusals))
            .map(untried),
    );
    out
}

fn tried(r: &EvidenceRow) -> Evidence {
    Evidence {
        host: r.host.clone(),
        port: r.port,
        method: r.method.clone(),
        url: r.url.clone(),
        package: r.package.clone(),
        reason: Some(r.reason.as_str().to_owned()),
        count: r.count,
        first_at: Some(r.first_seen.rfc3339()),
        last_at: Some(r.last_seen.rfc3339()),
        upload: r.upload,
        tried: true,
        command: r.command.clone(),
    }
}

fn untried(u: &SanitizedUrl) -> Evidence {
    Evidence {
        host: u.host.as_str().to_owned(),
        port: u.port,
        method: None,
        url: Some(u.text.clone()),
        package: None,
        reason: None,
        count: 0,
        first_at: None,
        last_at: None,
        upload: false,
        tried: false,
        command: None,
    }
}

/// Whether a request of the turn tried `u`: its host was refused at all, and on its port
/// either that very URL was recorded or a request whose URL the proxy could not see (a
/// tunnel it does not inspect: the path may have been this one).
fn was_tried(u: &SanitizedUrl, rows: &[EvidenceRow], refusals: &[RefusalRow]) -> bool {
    let host = u.host.as_str();
    if !refusals.iter().any(|r| r.host == host) {
        return false;
    }
    let on_port: Vec<&EvidenceRow> = rows
        .iter()
        .filter(|r| r.host == host && r.port == u.port)
        .collect();
    // A host refused without evidence (recorded before evidence was kept): do not claim more
    // than the record shows.
    if on_port.is_empty() && !rows.iter().any(|r| r.host == host) {
        return true;
    }
    on_port
        .iter()
        .any(|r| r.url.as_deref().is_none_or(|url| url == u.text))
}

#[cfg(test)]
mod tests;
