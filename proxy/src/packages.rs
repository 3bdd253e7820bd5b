//! The per-request package rule: a request to a host of an enabled registry is mapped to the
//! package it is about (see [`crate::registry`]) and allowed only when the administrators'
//! list, the turn's launch-time packages or an unexpired package approval of the chat names
//! that package (with a pin that admits the version). Otherwise the refusal is recorded with
//! the package before anything is answered. Plain HTTP forwarding, plain HTTP inside
//! tunnels and inspected TLS all call [`judge`] for every request, and forward an allowed
//! one with the path re-encoded from the segments it was judged by, never the client's
//! bytes; a query, or a header some servers read as the path or method, names no package.
//!
//! Dependencies, so one install needs one card: metadata about a package that is not
//! approved is still served (its refusal is recorded, so it goes on the card), which lets an
//! installer's resolver go on to ask for the rest; only files that install code are
//! refused. When the refused file is a wheel, the proxy reads the wheel itself (capped) and
//! records the packages its `METADATA` requires as refusals too, for indexes without PEP
//! 658 metadata, where an installer would learn them only from the wheel.

mod dependencies;

use std::net::SocketAddr;

use egressgate_store::db::refusals::Subject;
use egressgate_store::{Mode, Package, RefusalReason, SanitizedUrl, Timestamp};
use http::uri::PathAndQuery;
use http::{HeaderMap, Method, Response, StatusCode, Uri};

use crate::identify::TurnEntry;
use crate::registry::{self, Artifact, Judged, Mapping};
use crate::respond::ProxyBody;
use crate::shared::{Refusal, Shared};
use crate::target::Target;

use dependencies::{Origin, record_dependencies};

/// Headers some servers and frameworks read as the request's path or method instead of the
/// request line's (IIS, Symfony, method-override middleware): the proxy would forward a
/// request it did not judge, so a registry request carrying one names no package.
const REWRITING_HEADERS: [&str; 5] = [
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// What the rule says about one request.
pub(crate) enum Verdict {
    /// The host is no registry's: the site rules decided it.
    NotRegistry,
    /// Forward it with this path: the judged segments re-encoded, so the origin receives
    /// exactly what was judged (`None`: as sent, only for a shadow-mode pass of a request
    /// that names no package). Put it in place with [`JudgedPath::apply`].
    Allow(Option<JudgedPath>),
    /// Send this answer (a recorded refusal, or `503` when it could not be recorded).
    Refuse(Response<ProxyBody>),
}

/// The origin-form path a registry request is forwarded with.
pub(crate) struct JudgedPath(PathAndQuery);

impl JudgedPath {
    /// Replaces the path (and query: a judged request has none) of `uri`, keeping its scheme
    /// and authority.
    pub(crate) fn apply(self, uri: &mut Uri) {
        let mut parts = std::mem::take(uri).into_parts();
        parts.path_and_query = Some(self.0.clone());
        *uri = Uri::from_parts(parts).unwrap_or_else(|_| Uri::from(self.0));
    }
}

/// The request as the rule sees it: how it arrived (`http`, or `https` when inspected), its
/// method, its path with the query, and its headers.
pub(crate) struct RegistryRequest<'a> {
    /// The scheme written into the refusal's sample URL.
    pub scheme: &'static str,
    /// The method (only reads map to a package).
    pub method: &'a Method,
    /// The request's URI (its path still percent-encoded).
    pub uri: &'a Uri,
    /// Its headers (a path-rewriting one makes it unmappable).
    pub headers: &'a HeaderMap,
}

/// Judges one request to `target` (`addrs`: its vetted addresses, for reading a refused
/// wheel over plain HTTP). Reads the cache epoch before any database question, like the
/// site rules.
pub(crate) async fn judge(
    shared: &Shared,
    turn: &TurnEntry,
    target: &Target,
    addrs: &[SocketAddr],
    req: RegistryRequest<'_>,
) -> Verdict {
    let RegistryRequest {
        scheme,
        method,
        uri,
        headers,
    } = req;
    let path = uri.path();
    let Some(eco) = shared.settings.registries.ecosystem(&target.host) else {
        return Verdict::NotRegistry;
    };
    let epoch = shared.epoch.get();
    let shadow = turn.mode(shared.settings.mode) == Mode::Shadow;
    let url = SanitizedUrl::from_parts(scheme, &target.host, target.port, path).text;
    let refusal = |package: Option<Package>| Refusal {
        turn,
        host: target.host.as_str(),
        port: target.port,
        reason: RefusalReason::PackageNotApproved,
        url: Some(url.clone()),
        package,
        shadow,
        method: Some(method.to_string()),
        upload: crate::access::method_uploads(method.as_str()),
        command: None,
    };
    let target_path = uri.path_and_query().map_or(path, PathAndQuery::as_str);
    let rewritten = REWRITING_HEADERS.iter().any(|h| headers.contains_key(*h));
    let judged = (!rewritten).then(|| registry::judge(eco, method, target_path));
    // The judged segments re-encoded always parse as a path; were one not to, it names no
    // package.
    let judged = judged.and_then(|Judged { mapping, path }| {
        let path = PathAndQuery::try_from(path?).ok()?;
        Some((mapping, JudgedPath(path)))
    });
    let (package, version, artifact, forward) = match judged {
        Some((Mapping::Metadata, forward)) => return Verdict::Allow(Some(forward)),
        Some((
            Mapping::Package {
                package,
                version,
                artifact,
            },
            forward,
        )) => (package, version, artifact, forward),
        Some((Mapping::Unmappable, _)) | None if shadow => {
            return match shared.shadow_pass(refusal(None)).await {
                Ok(_) => Verdict::Allow(None),
                Err(answer) => Verdict::Refuse(answer),
            };
        }
        Some((Mapping::Unmappable, _)) | None => {
            return Verdict::Refuse(shared.refuse(refusal(None), StatusCode::FORBIDDEN).await);
        }
    };
    let subject = Subject::Package {
        package: package.clone(),
        version: version.clone(),
    };
    let ttl = shared.settings.allow_cache_ttl;
    let warm = turn
        .allowed_recently(&subject, ttl, epoch, Timestamp::now())
        .or_else(|| turn.launch_package_grant(&package, version.as_deref()));
    if warm.is_some() {
        return Verdict::Allow(Some(forward));
    }
    match shared
        .refuse_unless_allowed(refusal(Some(package)), subject, epoch)
        .await
    {
        Ok(_) => Verdict::Allow(Some(forward)),
        // Metadata of a package nobody approved yet: recorded (so it goes on the card) and
        // served, so the resolver can go on to name everything the install needs.
        Err(answer) if artifact == Artifact::None && answer.status() == StatusCode::FORBIDDEN => {
            Verdict::Allow(Some(forward))
        }
        Err(answer) => {
            if artifact == Artifact::Wheel && answer.status() == StatusCode::FORBIDDEN {
                let origin = Origin {
                    target,
                    addrs,
                    tls: scheme == "https",
                };
                record_dependencies(shared, turn, origin, forward.0.path(), epoch).await;
            }
            Verdict::Refuse(answer)
        }
    }
}
