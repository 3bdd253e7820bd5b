//! The per-request package rule: a request to a host of an enabled registry is mapped to the
//! package it is about (see [`crate::registry`]) and allowed only when the administrators'
//! list, the turn's launch-time packages or an unexpired package approval of the chat names
//! that package (with a pin that admits the version). Otherwise the refusal is recorded with
//! the package before anything is answered. Plain HTTP forwarding and plain HTTP inside
//! tunnels both call [`judge`] for every request; inspected TLS is meant to call it too.
//!
//! Dependencies, so one install needs one card: metadata about a package that is not
//! approved is still served (its refusal is recorded, so it goes on the card), which lets an
//! installer's resolver go on to ask for the rest; only files that install code are
//! refused. When the refused file is a wheel, the proxy reads the wheel itself (capped) and
//! records the packages its `METADATA` requires as refusals too, for indexes without PEP
//! 658 metadata, where an installer would learn them only from the wheel.

use std::net::SocketAddr;
use std::time::Duration;

use egressgate_store::db::refusals::Subject;
use egressgate_store::{Mode, Package, RefusalReason, SanitizedUrl, Timestamp};
use http::{Method, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::rt::TokioIo;

use crate::identify::TurnEntry;
use crate::registry::wheel::WHEEL_MAX;
use crate::registry::{self, Artifact, Mapping};
use crate::respond::ProxyBody;
use crate::shared::{Refusal, Shared};
use crate::target::Target;

/// Time allowed to fetch a refused wheel for its dependencies.
const WHEEL_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// What the rule says about one request.
pub(crate) enum Verdict {
    /// The host is no registry's: the site rules decided it.
    NotRegistry,
    /// Forward it.
    Allow,
    /// Send this answer (a recorded refusal, or `503` when it could not be recorded).
    Refuse(Response<ProxyBody>),
}

/// The request as the rule sees it: how it arrived (`http`; `https` once inspected TLS
/// calls the rule), its method and its path.
pub(crate) struct RegistryRequest<'a> {
    /// The scheme written into the refusal's sample URL.
    pub scheme: &'static str,
    /// The method (only reads map to a package).
    pub method: &'a Method,
    /// The path, still percent-encoded.
    pub path: &'a str,
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
        path,
    } = req;
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
    };
    let (package, version, artifact) = match registry::map(eco, method, path) {
        Mapping::Metadata => return Verdict::Allow,
        Mapping::Unmappable if shadow => {
            return match shared.shadow_pass(refusal(None)).await {
                Ok(_) => Verdict::Allow,
                Err(answer) => Verdict::Refuse(answer),
            };
        }
        Mapping::Unmappable => {
            return Verdict::Refuse(shared.refuse(refusal(None), StatusCode::FORBIDDEN).await);
        }
        Mapping::Package {
            package,
            version,
            artifact,
        } => (package, version, artifact),
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
        return Verdict::Allow;
    }
    match shared
        .refuse_unless_allowed(refusal(Some(package)), subject, epoch)
        .await
    {
        Ok(_) => Verdict::Allow,
        // Metadata of a package nobody approved yet: recorded (so it goes on the card) and
        // served, so the resolver can go on to name everything the install needs.
        Err(answer) if artifact == Artifact::None && answer.status() == StatusCode::FORBIDDEN => {
            Verdict::Allow
        }
        Err(answer) => {
            if artifact == Artifact::Wheel && answer.status() == StatusCode::FORBIDDEN {
                let origin = Origin {
                    target,
                    addrs,
                    tls: scheme == "https",
                };
                record_dependencies(shared, turn, origin, path, epoch).await;
            }
            Verdict::Refuse(answer)
        }
    }
}

/// Reads the refused wheel at `path` and records each package it requires that nothing
/// allows yet, before the wheel's `403` goes out. Best effort: a wheel that cannot be read
/// adds nothing (the installer then asks for its dependencies after the approval).
async fn record_dependencies(
    shared: &Shared,
    turn: &TurnEntry,
    origin: Origin<'_>,
    path: &str,
    epoch: Option<i64>,
) {
    let target = origin.target;
    let reads = &shared.wheel_reads;
    if !reads.first(turn.turn.id.as_str(), target.host.as_str(), path) {
        return;
    }
    let Some(_slot) = reads.slot().await else {
        return;
    };
    let fetched = tokio::time::timeout(WHEEL_FETCH_TIMEOUT, fetch(shared, origin, path));
    let Ok(Some(wheel)) = fetched.await else {
        tracing::debug!(host = %target.host, "refused wheel could not be read for dependencies");
        return;
    };
    let deps = registry::wheel::requires(&wheel);
    for dep in deps {
        if turn.launch_package_grant(&dep, None).is_some() {
            continue;
        }
        let subject = Subject::Package {
            package: dep.clone(),
            version: None,
        };
        let r = Refusal {
            turn,
            host: target.host.as_str(),
            port: target.port,
            reason: RefusalReason::PackageNotApproved,
            url: None,
            package: Some(dep),
            shadow: false,
            method: None,
        };
        // The answer is not sent anywhere: only the record matters.
        let _ = shared.refuse_unless_allowed(r, subject, epoch).await;
    }
}

/// Where a refused wheel came from, for the proxy's own read of it: the vetted addresses the
/// request was going to, and whether the origin speaks TLS (an inspected registry host: then
/// it is verified exactly like the client's own requests to it).
#[derive(Clone, Copy)]
struct Origin<'a> {
    target: &'a Target,
    addrs: &'a [SocketAddr],
    tls: bool,
}

/// `GET path` from the origin on a fresh connection to a vetted address, the body capped
/// at [`WHEEL_MAX`]; `None` on any failure or a status other than `200`.
async fn fetch(shared: &Shared, origin: Origin<'_>, path: &str) -> Option<bytes::Bytes> {
    let target = origin.target;
    let stream = shared
        .dialer
        .connect(&target.host, origin.addrs)
        .await
        .ok()?;
    let default_port = if origin.tls { 443 } else { 80 };
    let authority = if target.port == default_port {
        target.host.to_string()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    if origin.tls {
        let tls = shared
            .inspection
            .upstream
            .connect(&target.host, stream)
            .await
            .ok()?;
        get_capped(tls, authority, path).await
    } else {
        get_capped(stream, authority, path).await
    }
}

/// One `GET path` over `io` (HTTP/1.1), the body capped at [`WHEEL_MAX`].
async fn get_capped<I>(io: I, authority: String, path: &str) -> Option<bytes::Bytes>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .ok()?;
    let conn = tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(header::HOST, authority)
        .header(header::USER_AGENT, "egressgate (dependency check)")
        .body(Empty::<bytes::Bytes>::new())
        .ok()?;
    let resp = sender.send_request(req).await.ok()?;
    let out = if resp.status() == StatusCode::OK {
        Limited::new(resp.into_body(), WHEEL_MAX)
            .collect()
            .await
            .ok()
            .map(|b| b.to_bytes())
    } else {
        None
    };
    conn.abort();
    out
}
