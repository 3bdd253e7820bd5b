//! A forwarded request whose client connection is told to stop (a revocation, its turn
//! ending, the drain time running out) after it was admitted but before the origin's response
//! head arrived. It is answered as its retry would be, not cut: a bare close reads to a
//! script as a network fault to retry blindly, and tells the person nothing. A response whose
//! head already went out is still cut (its body is what the revocation withdraws).
//!
//! The connection's side of this is in `server` (it waits for this answer while a request is
//! in the handler, see [`crate::shared::ClientConn::heading`]); the race of the origin's head
//! against the stop is in `handler`.

use std::time::Instant;

use egressgate_store::db::refusals::Subject;
use egressgate_store::{Mode, RefusalReason, SanitizedUrl};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use hyper::body::Incoming;

use crate::respond::{self, ProxyBody};
use crate::shared::{ClientConn, Refusal, Shared};
use crate::target::Target;

/// What deciding a forwarded request again takes, kept before the request goes upstream.
/// Clones of shared bytes (the URI, the credential header), so keeping it costs no copy on
/// the hot path; the refusal's text is only built if it is ever needed.
pub(crate) struct Asked {
    method: Method,
    uri: Uri,
    auth: Option<HeaderValue>,
    /// The request sent data (see [`crate::access::Asked::uploads`]).
    upload: bool,
    /// What a captured connection's sandbox reported, kept with a refusal.
    command: Option<String>,
}

impl Asked {
    /// Keeps what [`answer`] needs of `req`.
    pub(crate) fn of(req: &Request<Incoming>, upload: bool, command: Option<String>) -> Self {
        Self {
            method: req.method().clone(),
            uri: req.uri().clone(),
            auth: req.headers().get(header::PROXY_AUTHORIZATION).cloned(),
            upload,
            command,
        }
    }
}

/// The answer to `asked`, stopped on `conn` before its head arrived, for `target`: what a
/// retry sent now would get. The drain running out is `503`. After a revocation the
/// credential is checked again under the new cache epoch (an ended or hidden turn: `407`,
/// as for any request of it), then the store is asked whether anything still allows the
/// host: nothing does, so the refusal is recorded like any other and answered `403
/// not_approved`, which a person can approve again. Should something allow it after all
/// (shadow mode; another grant took over; or the revocation was of another host this
/// keep-alive connection reached before, as its stop is one for the whole connection),
/// `503` asks for the retry that will pass.
pub(crate) async fn answer(
    shared: &Shared,
    conn: &ClientConn,
    asked: Asked,
    target: &Target,
    begun: Instant,
) -> Response<ProxyBody> {
    if !conn.watch.stop.is_revoked() {
        return respond::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "the proxy is shutting down; retry",
        );
    }
    let epoch = shared.epoch.get();
    let presented = asked.auth.as_ref().map(HeaderValue::as_bytes);
    let to = (target.host.as_str(), target.port);
    let turn = match shared
        .identified(conn, presented, epoch, to, "forward", begun)
        .await
    {
        Ok(turn) => turn,
        Err(answer) => return answer,
    };
    let reason = RefusalReason::NotApproved;
    let shadow = turn.mode(shared.settings.mode) == Mode::Shadow && reason.shadowable();
    let url = SanitizedUrl::from_parts("http", &target.host, target.port, asked.uri.path());
    let refusal = Refusal {
        turn: &turn,
        host: target.host.as_str(),
        port: target.port,
        reason,
        url: Some(url.text),
        package: None,
        shadow,
        method: Some(asked.method.to_string()),
        upload: asked.upload,
        command: asked.command,
    };
    let subject = Subject::Site(target.host.clone());
    match shared.refuse_unless_allowed(refusal, subject, epoch).await {
        Err(refused) => refused,
        Ok(_) => respond::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "the connection closed under this request (a grant it relied on changed); retry it",
        ),
    }
}
