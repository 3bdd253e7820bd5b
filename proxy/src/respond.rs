//! Responses the proxy itself writes. A refusal names the host, the reason, whether a person
//! can approve it and the next step: a vague denial makes agents retry around it, a clear one
//! lets them ask.

use bytes::Bytes;
use egressgate_store::{Package, RefusalReason};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Empty, Full};
use hyper::ext::ReasonPhrase;

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

/// A body the proxy made itself (so short and already in memory), read whole; a body that
/// fails to read yields nothing rather than a partial answer.
pub async fn read_whole(body: ProxyBody) -> Bytes {
    body.collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default()
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

/// The header naming a refusal's reason.
pub const REFUSED_HEADER: &str = "x-egress-refused";
/// The header saying whether a person can approve the refusal.
pub const APPROVABLE_HEADER: &str = "x-egress-approvable";

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
    r.extensions_mut().insert(reason_phrase(reason, approvable));
    let h = r.headers_mut();
    h.insert(REFUSED_HEADER, HeaderValue::from_static(reason.as_str()));
    h.insert(
        APPROVABLE_HEADER,
        HeaderValue::from_static(if approvable { "true" } else { "false" }),
    );
    r
}

/// Every refusal's HTTP/1.1 reason phrase starts so: clients that print nothing but the status
/// line (pip, npm, a failed `CONNECT` in curl) still say who refused and what to do next.
pub const PHRASE_PREFIX: &str = "Forbidden by egressgate: ";

/// The reason phrase of a refusal for `reason`, `approvable` as the body says: the next step in
/// a few words. Fixed text per (reason, approvable), checked at compile time, never a host
/// name or anything else a client chose (a reason phrase is written into the head as it is).
pub fn reason_phrase(reason: RefusalReason, approvable: bool) -> ReasonPhrase {
    /// The phrase `Forbidden by egressgate: <next>`, validated when compiled.
    macro_rules! phrase {
        ($next:literal) => {{
            const PHRASE: ReasonPhrase =
                ReasonPhrase::from_static(concat!("Forbidden by egressgate: ", $next).as_bytes());
            PHRASE
        }};
    }
    match (reason, approvable) {
        (RefusalReason::NotApproved, true) => {
            phrase!("not approved, ask with request_egress_approval")
        }
        (RefusalReason::MethodNotAllowed, true) => {
            phrase!("approved for reads only, ask with request_egress_approval")
        }
        (RefusalReason::PathNotAllowed, true) => {
            phrase!("path not approved, ask with request_egress_approval")
        }
        (RefusalReason::PackageNotApproved, true) => {
            phrase!("package not approved, ask with request_egress_approval")
        }
        (
            RefusalReason::NotApproved
            | RefusalReason::MethodNotAllowed
            | RefusalReason::PathNotAllowed,
            false,
        ) => {
            phrase!("whole host, cannot be approved")
        }
        (RefusalReason::PackageNotApproved, false) => {
            phrase!("names no package, cannot be approved")
        }
        (RefusalReason::IpLiteral, _) => phrase!("IP address, cannot be approved"),
        (RefusalReason::InternalName, _) => phrase!("internal name, cannot be approved"),
        (RefusalReason::PortNotAllowed, _) => phrase!("port not allowed, cannot be approved"),
        (RefusalReason::PrivateAddress, _) => phrase!("internal address, cannot be approved"),
        (RefusalReason::SniMismatch, _) => {
            phrase!("TLS name differs from host, cannot be approved")
        }
        (RefusalReason::HostMismatch, _) => {
            phrase!("Host header differs from target, cannot be approved")
        }
        (RefusalReason::LimitExceeded, _) => phrase!("connection limit reached, retry later"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_phrase_is_short_ascii_fixed_and_names_the_next_step() {
        for reason in RefusalReason::ALL {
            for approvable in [true, false] {
                let phrase = reason_phrase(reason, approvable);
                let text = std::str::from_utf8(phrase.as_bytes()).unwrap_or_default();
                assert!(text.starts_with(PHRASE_PREFIX), "{reason}: {text}");
                assert!(text.len() <= 100, "{reason}: {text}");
                assert!(
                    text.bytes().all(|b| b == b' ' || b.is_ascii_graphic()),
                    "{reason}: {text}"
                );
                let asks = text.ends_with("ask with request_egress_approval");
                let final_word =
                    text.ends_with("cannot be approved") || text.ends_with("retry later");
                assert!(asks != final_word, "{reason} {approvable}: {text}");
                // Asking is offered exactly when the body says a person can approve it.
                if reason.approvable_for(true) && approvable {
                    assert!(asks, "{reason}: {text}");
                } else {
                    assert!(!asks, "{reason}: {text}");
                }
                // The same refusal gets the same phrase every time, whatever the host.
                let a = refused("a.example.com", 443, reason, None, approvable);
                let b = refused("b.example.org", 80, reason, None, approvable);
                assert_eq!(
                    a.extensions().get::<ReasonPhrase>(),
                    b.extensions().get::<ReasonPhrase>()
                );
            }
        }
    }
}
