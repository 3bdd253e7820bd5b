//! One proxied request, start to finish: the pipeline the module list describes, with the
//! canonical decision log line and the status mapping (auth 407, refused 403, limit 429,
//! malformed 400, DNS/connect 502, timeout 504, store down 503).

use std::sync::Arc;
use std::time::Instant;

use egressgate_store::db::refusals::Subject;
use egressgate_store::{GrantKind, Mode, RefusalReason, SanitizedUrl};
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;

use crate::decide::{self, Decision};
use crate::decision_log::{Allowed, Line, Verdict};
use crate::dial::DialError;
use crate::forward::{self, Via};
use crate::identify::ActiveGuard;
use crate::in_flight;
use crate::present;
use crate::respond::{self, ProxyBody};
use crate::shared::{ClientConn, Refusal, Shared};
use crate::target;
use crate::tunnel;

/// Serves one request. A `CONNECT` carries its upgrade apart from the request, so a captured
/// connection's refusal can still be shown inside its stream (see [`present`]).
pub(crate) async fn handle(
    shared: Arc<Shared>,
    conn: Arc<ClientConn>,
    mut req: Request<Incoming>,
) -> Response<ProxyBody> {
    let connect = req.method() == Method::CONNECT;
    let captured = (connect && present::asked(req.headers()))
        .then(|| {
            req.uri()
                .authority()
                .map(|a| target::parse_authority(a.as_str()))
        })
        .flatten()
        .and_then(Result::ok);
    let command = present::command(req.headers());
    let mut upgrade = connect.then(|| hyper::upgrade::on(&mut req));
    let answer = serve(Arc::clone(&shared), conn, req, &mut upgrade, command).await;
    match (captured, upgrade) {
        (Some(target), Some(upgrade)) => present::present(&shared, target, upgrade, answer),
        _ => answer,
    }
}

/// Serves one request; `upgrade` is a `CONNECT`'s, taken by the tunnel it opens; `command`
/// is what a captured connection's sandbox reported, kept with its refusal.
async fn serve(
    shared: Arc<Shared>,
    conn: Arc<ClientConn>,
    req: Request<Incoming>,
    upgrade: &mut Option<OnUpgrade>,
    command: Option<String>,
) -> Response<ProxyBody> {
    let begun = Instant::now();
    let connect = req.method() == Method::CONNECT;
    let kind = if connect { "connect" } else { "forward" };
    if connect {
        shared.metrics.requests_connect.inc();
    } else {
        shared.metrics.requests_forward.inc();
    }
    let auth = req
        .headers()
        .get(header::PROXY_AUTHORIZATION)
        .map(|v| v.as_bytes());
    // Read before any database question, so a revocation racing it voids what it allows.
    let epoch = shared.epoch.get();
    let to = (
        req.uri().host().unwrap_or(""),
        req.uri().port_u16().unwrap_or(0),
    );
    let turn = match shared.identified(&conn, auth, epoch, to, kind, begun).await {
        Ok(turn) => turn,
        Err(answer) => return answer,
    };
    let parsed = if connect {
        req.uri()
            .authority()
            .map_or(Err(target::TargetError::Authority), |a| {
                target::parse_authority(a.as_str())
            })
    } else {
        target::parse_absolute(req.uri())
    };
    let target = match parsed {
        Ok(t) => t,
        Err(e) => {
            shared.failed(Line {
                reason: Some("bad_target"),
                turn: Some(&turn.turn.id),
                chat: Some(&turn.turn.chat),
                host: req.uri().host().unwrap_or(""),
                port: req.uri().port_u16().unwrap_or(0),
                ..Line::new(Verdict::Fail, 400, kind, begun)
            });
            return respond::status(StatusCode::BAD_REQUEST, e);
        }
    };
    // The sanitised URL is only written with a refusal, so it is only built for one.
    let path = req.uri().path();
    let shadow_mode = turn.mode(shared.settings.mode) == Mode::Shadow;
    let upload = !connect && crate::access::Asked::of(&req).uploads();
    let refusal = |reason: RefusalReason| Refusal {
        turn: &turn,
        host: target.host.as_str(),
        port: target.port,
        reason,
        url: (!connect)
            .then(|| SanitizedUrl::from_parts("http", &target.host, target.port, path).text),
        package: None,
        shadow: shadow_mode && reason.shadowable(),
        method: (!connect).then(|| req.method().to_string()),
        upload,
        command: command.clone(),
    };

    let started = Instant::now();
    let decision = decide::decide(&turn, &target, &shared.settings, epoch);
    let grant = match decision {
        Decision::Allow(grant) => grant,
        Decision::Refuse(reason) => {
            let r = refusal(reason);
            if !r.shadow {
                return shared.refuse(r, StatusCode::FORBIDDEN).await;
            }
            match shared.shadow_pass(r).await {
                Ok(grant) => grant,
                Err(answer) => return answer,
            }
        }
        Decision::AskStore => {
            let r = refusal(RefusalReason::NotApproved);
            let subject = Subject::Site(target.host.clone());
            match shared.refuse_unless_allowed(r, subject, epoch).await {
                Ok(grant) => grant,
                Err(answer) => return answer,
            }
        }
    };
    shared
        .metrics
        .decision_seconds
        .observe(started.elapsed().as_secs_f64());
    if !connect && let Some(reason) = forward::host_header_mismatch(&req, &target, 80) {
        return shared.refuse(refusal(reason), StatusCode::FORBIDDEN).await;
    }
    let Some(guard) = ActiveGuard::try_new(&turn, shared.settings.max_connections_per_turn) else {
        return shared
            .refuse(
                refusal(RefusalReason::LimitExceeded),
                StatusCode::TOO_MANY_REQUESTS,
            )
            .await;
    };
    let addrs = match shared
        .dialer
        .resolve_vetted(&target.host, target.port)
        .await
    {
        Ok(a) => a,
        Err(DialError::Private { .. }) => {
            let r = refusal(RefusalReason::PrivateAddress);
            return shared.refuse(r, StatusCode::FORBIDDEN).await;
        }
        Err(e) => {
            let (status, reason) = match e {
                DialError::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "timeout"),
                DialError::Connect { .. } => (StatusCode::BAD_GATEWAY, "connect"),
                _ => (StatusCode::BAD_GATEWAY, "dns"),
            };
            shared.failed(Line {
                reason: Some(reason),
                turn: Some(&turn.turn.id),
                chat: Some(&turn.turn.chat),
                host: target.host.as_str(),
                port: target.port,
                grant: Some(&grant),
                ..Line::new(Verdict::Fail, status.as_u16(), kind, begun)
            });
            return respond::status(status, e);
        }
    };
    // The allowed line is written when the request or tunnel ends (with its bytes).
    let allowed = Allowed {
        kind,
        turn: turn.turn.id.clone(),
        chat: turn.turn.chat.clone(),
        host: target.host.clone(),
        port: target.port,
        shadow: matches!(grant.kind, GrantKind::Shadow { .. }),
        grant: grant.clone(),
        started: begun,
    };
    // A counted grant spends one use per admitted connection: a tunnel here, a forwarded
    // request once its own rules (access level, paths) let it, so a refused one spends none.
    if grant.counted.is_some() {
        if !connect
            && let Err(answer) =
                forward::per_request_rules(&shared, &turn, &target, &req, &allowed, Via::Plain)
                    .await
        {
            return answer;
        }
        let r = refusal(RefusalReason::NotApproved);
        if let Err(answer) = shared.spend_use(&grant, r).await {
            return answer;
        }
    }
    if let Some(upgrade) = upgrade.take() {
        tunnel::start(shared, turn, guard, allowed, epoch, target, addrs, upgrade)
    } else {
        // Once per (turn, host, grant) on this connection: a revocation closes it.
        conn.watch.watch(
            &shared.registry,
            &turn,
            &target.host,
            &grant,
            epoch,
            &shared.epoch,
        );
        // The origin's head races the connection's stop: a request a revocation overtakes
        // before its head is answered as its retry would be, not cut (see `in_flight`).
        let asked = in_flight::Asked::of(&req, upload, command);
        tokio::select! {
            biased;
            () = conn.watch.stop.stopped() => {
                in_flight::answer(&shared, &conn, asked, &target, begun).await
            }
            answer = forward::forward(&shared, &turn, &target, &addrs, req, allowed, Via::Plain) => {
                answer
            }
        }
    }
}
