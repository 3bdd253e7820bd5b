//! One proxied request, start to finish: the pipeline the module list describes, with the
//! canonical decision log line and the status mapping (auth 407, refused 403, limit 429,
//! malformed 400, DNS/connect 502, timeout 504, store down 503).

use std::sync::Arc;
use std::time::Instant;

use egressgate_store::db::refusals::{RefusalCandidate, RefusalEvent};
use egressgate_store::{
    Grant, GrantKind, Host, Mode, RefusalReason, SanitizedUrl, Store, Timestamp,
};
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use tokio::sync::watch;

use crate::decide::{self, Decision};
use crate::decision_log::{Allowed, DecisionLog, Line, Verdict};
use crate::dial::{DialError, Dialer};
use crate::identify::{ActiveGuard, AuthError, ConnAuth, TurnCache, TurnEntry};
use crate::metrics::{Metrics, ReasonLabel};
use crate::recorder::Recorder;
use crate::respond::{self, ProxyBody};
use crate::revoke::{ConnWatch, Registry};
use crate::settings::Settings;
use crate::target;
use crate::{forward, tunnel};

/// State shared by every connection.
pub(crate) struct Shared {
    pub settings: Settings,
    pub store: Store,
    pub turns: TurnCache,
    pub dialer: Dialer,
    pub recorder: Recorder,
    pub metrics: Metrics,
    /// The cache epoch cached allow decisions are checked against.
    pub epoch: decide::CacheEpoch,
    /// Open connections and tunnels (for the total limit and the shutdown drain).
    pub active: Arc<crate::server::Active>,
    /// Idle upstream connections for forwarded requests.
    pub pool: Arc<crate::pool::Pool>,
    /// Flips to true when the process starts draining.
    pub draining: watch::Receiver<bool>,
    /// Open tunnels and keep-alive connections with the grant behind each, so a revocation
    /// closes them.
    pub registry: Arc<Registry>,
    /// The canonical decision lines (sampling, repeat limit).
    pub log: Arc<DecisionLog>,
}

/// What one client connection carries between its requests.
#[derive(Default)]
pub(crate) struct ClientConn {
    /// The credential it last proved.
    pub auth: ConnAuth,
    /// Its registrations for revocation, and the signal that closes it.
    pub watch: ConnWatch,
}

/// What a refusal is about, for the record and the log.
pub(crate) struct Refusal<'a> {
    pub turn: &'a TurnEntry,
    pub host: &'a str,
    pub port: u16,
    pub reason: RefusalReason,
    pub url: Option<String>,
    /// Shadow mode: recorded and logged, but the request goes ahead (only ever set for a
    /// [`RefusalReason::shadowable`] reason).
    pub shadow: bool,
}

impl<'a> Refusal<'a> {
    fn event(&self) -> RefusalEvent {
        RefusalEvent {
            turn: self.turn.turn.id.clone(),
            host: self.host.to_owned(),
            port: self.port,
            reason: self.reason,
            url: self.url.clone(),
            at: Timestamp::now(),
            shadow: self.shadow,
        }
    }
}

impl Shared {
    /// Records a refusal (before anything is sent) and logs the canonical decision line.
    /// `false` when the record could not be committed: the caller answers 503.
    pub async fn record_refusal(&self, r: Refusal<'_>) -> bool {
        let started = Instant::now();
        let ok = self.recorder.refusal(r.event()).await.is_ok();
        self.metrics
            .record_seconds
            .observe(started.elapsed().as_secs_f64());
        self.refused(&r, ok, started);
        ok
    }

    /// Metrics and the canonical decision line of a refusal (`503` when it could not be
    /// recorded; for a shadowed one, the status it would have had).
    fn refused(&self, r: &Refusal<'_>, recorded: bool, started: Instant) {
        self.metrics
            .refusals
            .get_or_create(&ReasonLabel {
                reason: r.reason.as_str(),
            })
            .inc();
        let status = if !recorded {
            503
        } else if r.reason == RefusalReason::LimitExceeded {
            429
        } else {
            403
        };
        let kind = if r.url.is_some() {
            "forward"
        } else {
            "connect"
        };
        self.log.refused(&Line {
            reason: Some(r.reason.as_str()),
            turn: Some(&r.turn.turn.id),
            chat: Some(&r.turn.turn.chat),
            host: r.host,
            port: r.port,
            shadow: r.shadow,
            ..Line::new(Verdict::Refuse, status, kind, started)
        });
    }

    /// The decision line of a request that failed before or outside a policy decision.
    pub(crate) fn failed(&self, line: Line<'_>) {
        self.metrics.count_status(line.status);
        self.log.refused(&line);
    }

    /// A would-be refusal in shadow mode: recorded with `shadow: true` and logged, then the
    /// request goes ahead. `Err` (503) when the record could not be committed.
    async fn shadow_pass(&self, r: Refusal<'_>) -> Result<Grant, Response<ProxyBody>> {
        let reason = r.reason;
        if self.record_refusal(r).await {
            Ok(Grant::shadow(reason))
        } else {
            Err(unrecorded())
        }
    }

    /// Records and answers a refusal (`403`, or `status` for limits).
    async fn refuse(&self, r: Refusal<'_>, status: StatusCode) -> Response<ProxyBody> {
        let (host, port, reason) = (r.host, r.port, r.reason);
        if !self.record_refusal(r).await {
            return unrecorded();
        }
        let mut resp = respond::refused(host, port, reason);
        *resp.status_mut() = status;
        resp
    }

    /// A host nothing in memory allows: the database decides, in the transaction that
    /// records the refusal if it stands. `Ok(grant)`: allowed after all (and cached for the
    /// turn under `epoch`, read before asking, until the grant ends); `Err(answer)`: the
    /// answer to send.
    async fn refuse_unless_allowed(
        &self,
        r: Refusal<'_>,
        host: &Host,
        epoch: Option<i64>,
    ) -> Result<Grant, Response<ProxyBody>> {
        let started = Instant::now();
        let candidate = RefusalCandidate {
            event: r.event(),
            user: r.turn.turn.user.clone(),
            chat: r.turn.turn.chat.clone(),
            host: host.clone(),
        };
        let verdict = self.recorder.refuse_unless_allowed(candidate).await;
        self.metrics
            .record_seconds
            .observe(started.elapsed().as_secs_f64());
        match verdict {
            Ok(Some(grant)) => {
                r.turn.remember_allowed(host, epoch, grant.clone());
                Ok(grant)
            }
            Ok(None) if r.shadow => {
                self.refused(&r, true, started);
                Ok(Grant::shadow(r.reason))
            }
            Ok(None) => {
                self.refused(&r, true, started);
                Err(respond::refused(r.host, r.port, r.reason))
            }
            Err(_) => {
                self.refused(&r, false, started);
                Err(unrecorded())
            }
        }
    }
}

/// The answer when a refusal could not be committed: still a refusal, never a pass.
fn unrecorded() -> Response<ProxyBody> {
    respond::status(
        StatusCode::SERVICE_UNAVAILABLE,
        "refusal could not be recorded; refusing",
    )
}

/// Serves one request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    conn: Arc<ClientConn>,
    req: Request<Incoming>,
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
    let turn = match shared
        .turns
        .authenticate_conn(&conn.auth, auth, epoch)
        .await
    {
        Ok(t) => t,
        Err(e) => {
            let (status, reason) = match &e {
                AuthError::Store(_) => (503, "store_unavailable"),
                AuthError::Missing => (407, "credentials_missing"),
                AuthError::Wrong => (407, "credentials_wrong"),
                AuthError::Expired => (407, "turn_expired"),
            };
            shared.failed(Line {
                reason: Some(reason),
                host: req.uri().host().unwrap_or(""),
                port: req.uri().port_u16().unwrap_or(0),
                ..Line::new(Verdict::Fail, status, kind, begun)
            });
            if let AuthError::Store(e) = e {
                tracing::error!(error = %e, "cannot read turns; failing closed");
                return respond::status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "approval state unavailable; refusing",
                );
            }
            return respond::auth_required(&e.to_string());
        }
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
    let refusal = |reason: RefusalReason| Refusal {
        turn: &turn,
        host: target.host.as_str(),
        port: target.port,
        reason,
        url: (!connect)
            .then(|| SanitizedUrl::from_parts("http", &target.host, target.port, path).text),
        shadow: shadow_mode && reason.shadowable(),
    };

    let started = Instant::now();
    let decision = decide::decide(
        &turn,
        &target,
        &shared.settings.internal_suffixes,
        &shared.settings.allow_ports,
        shared.settings.allow_cache_ttl,
        epoch,
    );
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
            match shared.refuse_unless_allowed(r, &target.host, epoch).await {
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
    if connect {
        tunnel::start(shared, turn, guard, allowed, epoch, target, addrs, req)
    } else {
        // Once per (turn, host, grant) on this connection: a revocation closes it.
        conn.watch.watch(
            &shared.registry,
            &turn.turn,
            &target.host,
            &grant,
            epoch,
            &shared.epoch,
        );
        forward::forward(&shared, &turn, &target, &addrs, req, allowed).await
    }
}
