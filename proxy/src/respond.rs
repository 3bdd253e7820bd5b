//! Responses the proxy itself writes. A refusal names the host, the reason, whether a person
//! can approve it and the next step: a vague denial makes agents retry around it, a clear one
//! lets them ask.

use bytes::Bytes;
use egressgate_store::{Package, RefusalReason};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Empty, Full};

/// The body type of every proxy response (fixed text or a streamed upstream body).
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// A fixed body.
pub fn full(text: impl Into<Bytes>) -> ProxyBody {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut r = Response::new(full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// `403` for a refused request, after the refusal was recorded (`package`: the package a
/// registry request was about; `approvable`: the store's answer for this refusal, the same
/// the refusal record and the approval tool give).
pub fn refused(
    host: &str,
    port: u16,
    reason: RefusalReason,
    package: Option<&Package>,
    approvable: bool,
) -> Response<ProxyBody> {
    // The reason alone would be approvable, but the host is not one a person can grant.
    let whole_host = reason.approvable_for(package.is_some()) && !approvable;
    let next = if approvable && package.is_some() {
        "A person can approve this package: ask for approval with the approval tool (name the package); do not try to get around the proxy."
    } else if approvable {
        "A person can approve this host: ask for approval with the approval tool; do not try to get around the proxy."
    } else {
        "No approval can allow this; do not try to get around the proxy. Continue without it and say so."
    };
    let why = match reason {
        RefusalReason::NotApproved => "nobody has approved this host for this chat",
        RefusalReason::IpLiteral => {
            "the target is an IP address; only approved host names can be reached"
        }
        RefusalReason::InternalName => "the name looks internal to a network",
        RefusalReason::PortNotAllowed => "the port is not allowed",
        RefusalReason::PrivateAddress => "the name resolves to a non-public address",
        RefusalReason::SniMismatch => "the TLS server name differs from the CONNECT host",
        RefusalReason::HostMismatch => "the Host header differs from the request URI",
        RefusalReason::LimitExceeded => "a connection limit was exceeded",
        RefusalReason::MethodNotAllowed => {
            "this host is approved for downloads only (read); this request would upload or change something"
        }
        RefusalReason::PathNotAllowed => {
            "this host is approved only under some paths, and this request's path is not one of them"
        }
        RefusalReason::PackageNotApproved if package.is_some() => {
            "nobody has approved this package (or this version) for this chat"
        }
        RefusalReason::PackageNotApproved => {
            "a package registry request that names no package the proxy can tell"
        }
    };
    let why = if whole_host {
        format!(
            "{why}, and nobody can approve {host} as a whole: it is a public suffix or a host \
             that serves many tenants by path"
        )
    } else {
        why.to_owned()
    };
    let what = package.map_or(String::new(), |p| format!("package: {p}\n"));
    let body = format!(
        "egressgate refused {host}:{port}\n{what}reason: {reason} ({why})\napprovable: {approvable}\nnext step: {next}\n"
    );
    let mut r = plain(StatusCode::FORBIDDEN, body);
    let h = r.headers_mut();
    h.insert(
        "x-egress-refused",
        HeaderValue::from_static(reason.as_str()),
    );
    h.insert(
        "x-egress-approvable",
        HeaderValue::from_static(if approvable { "true" } else { "false" }),
    );
    r
}

/// `407`: no live turn credential.
pub fn auth_required(why: &str) -> Response<ProxyBody> {
    let mut r = plain(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        format!(
            "egressgate: {why}; send Proxy-Authorization with your turn's credential (the proxy_url of the turn)\n"
        ),
    );
    r.headers_mut().insert(
        header::PROXY_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"egressgate\""),
    );
    r
}

/// Any other status the proxy answers itself (400, 429, 502, 503, 504).
pub fn status(code: StatusCode, text: impl std::fmt::Display) -> Response<ProxyBody> {
    plain(code, format!("egressgate: {text}\n"))
}
