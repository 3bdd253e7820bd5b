//! The state every connection shares (settings, store, caches, pools, counters) and the one
//! way refusals are recorded and logged. Its own module so that `server`, `handler`, `tunnel`
//! and `forward` all import it downward and none of them imports another for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use egressgate_store::db::policy::ApprovalsOf;
use egressgate_store::db::refusals::{RefusalCandidate, RefusalEvent, Subject};
use egressgate_store::{Grant, Host, Package, RefusalReason, Store, Timestamp};
use http::{Response, StatusCode};
use tokio::sync::{Notify, watch};

use crate::decide;
use crate::decision_log::{DecisionLog, Line, Verdict};
use crate::dial::Dialer;
use crate::identify::{AuthError, ConnAuth, TurnCache, TurnEntry};
use crate::metrics::{Metrics, ReasonLabel};
use crate::recorder::Recorder;
use crate::respond::{self, ProxyBody};
use crate::revoke::{ConnWatch, Registry};
use crate::settings::Settings;

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
    pub active: Arc<Active>,
    /// Idle upstream connections for forwarded requests.
    pub pool: Arc<crate::pool::Pool>,
    /// Idle origin connections of relayed plain-HTTP tunnels, for the same turn's next
    /// tunnel to the same host (the same reuse rules as `pool`).
    pub tunnel_pool: crate::pool::Pool<tokio::net::TcpStream>,
    /// Flips to true when the process starts draining.
    pub draining: watch::Receiver<bool>,
    /// Open tunnels and keep-alive connections with the grant behind each, so a revocation
    /// closes them.
    pub registry: Arc<Registry>,
    /// The canonical decision lines (sampling, repeat limit).
    pub log: Arc<DecisionLog>,
    /// Which hosts are inspected, and the TLS on both sides of them.
    pub inspection: crate::inspect::Inspection,
    /// Bounds on the proxy's own reads of refused wheels (for their dependencies).
    pub wheel_reads: crate::registry::reads::WheelReads,
}

/// What one client connection carries between its requests.
#[derive(Default)]
pub(crate) struct ClientConn {
    /// The credential it last proved.
    pub auth: ConnAuth,
    /// Its registrations for revocation, and the signal that closes it.
    pub watch: ConnWatch,
    /// A request is in the handler, its response head not yet given to the client. A stop
    /// then lets the handler answer it (see `in_flight`) before the connection closes; at
    /// any other time (idle, or a body streaming) the stop closes it at once. Only the
    /// connection's own task reads and writes it, so no ordering is needed.
    heading: AtomicBool,
}

impl ClientConn {
    /// Marks a request in the handler until the returned guard drops.
    pub(crate) fn heading(&self) -> Heading<'_> {
        self.heading.store(true, Ordering::Relaxed);
        Heading(&self.heading)
    }

    /// Whether a request is in the handler (see [`ClientConn::heading`]).
    pub(crate) fn is_heading(&self) -> bool {
        self.heading.load(Ordering::Relaxed)
    }
}

/// A request in the handler: clears [`ClientConn::is_heading`] when it is done or dropped.
pub(crate) struct Heading<'a>(&'a AtomicBool);

impl Drop for Heading<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// What a refusal is about, for the record and the log.
pub(crate) struct Refusal<'a> {
    pub turn: &'a TurnEntry,
    pub host: &'a str,
    pub port: u16,
    pub reason: RefusalReason,
    pub url: Option<String>,
    /// The package a `package_not_approved` refusal is about.
    pub package: Option<Package>,
    /// Shadow mode: recorded and logged, but the request goes ahead (only ever set for a
    /// [`RefusalReason::shadowable`] reason).
    pub shadow: bool,
    /// The request's method, when the proxy saw the request.
    pub method: Option<String>,
    /// The request sent data (see [`crate::access::Asked::uploads`]).
    pub upload: bool,
    /// The command the sandbox reported for a captured connection (see
    /// [`crate::present::command`]).
    pub command: Option<String>,
}

impl<'a> Refusal<'a> {
    pub(crate) fn event(&self) -> RefusalEvent {
        RefusalEvent {
            turn: self.turn.turn.id.clone(),
            host: self.host.to_owned(),
            port: self.port,
            reason: self.reason,
            url: self.url.clone(),
            package: self.package.clone(),
            at: Timestamp::now(),
            shadow: self.shadow,
            method: self.method.clone(),
            upload: self.upload,
            command: self.command.clone(),
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
    pub(crate) fn refused(&self, r: &Refusal<'_>, recorded: bool, started: Instant) {
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
            package: r.package.as_ref().map(Package::as_str),
            ..Line::new(Verdict::Refuse, status, kind, started)
        });
    }

    /// The live turn the presented credential names under cache epoch `epoch` (remembered on the
    /// connection), or the answer to one that names none: `407`, or `503` when the store cannot
    /// say (failing closed), with its decision line (`to`: the host and port the request named).
    pub(crate) async fn identified(
        &self,
        conn: &ClientConn,
        presented: Option<&[u8]>,
        epoch: Option<i64>,
        (host, port): (&str, u16),
        kind: &'static str,
        begun: Instant,
    ) -> Result<Arc<TurnEntry>, Response<ProxyBody>> {
        let e = match self
            .turns
            .authenticate_conn(&conn.auth, presented, epoch)
            .await
        {
            Ok(turn) => return Ok(turn),
            Err(e) => e,
        };
        let (status, reason) = match &e {
            AuthError::Store(_) => (503, "store_unavailable"),
            AuthError::Missing => (407, "credentials_missing"),
            AuthError::Wrong => (407, "credentials_wrong"),
            AuthError::Expired => (407, "turn_expired"),
        };
        self.failed(Line {
            reason: Some(reason),
            host,
            port,
            ..Line::new(Verdict::Fail, status, kind, begun)
        });
        if let AuthError::Store(e) = e {
            tracing::error!(error = %e, "cannot read turns; failing closed");
            return Err(respond::status(
                StatusCode::SERVICE_UNAVAILABLE,
                "approval state unavailable; refusing",
            ));
        }
        Err(respond::auth_required(&e.to_string()))
    }

    /// The decision line of a request that failed before or outside a policy decision.
    pub(crate) fn failed(&self, line: Line<'_>) {
        self.metrics.count_status(line.status);
        self.log.refused(&line);
    }

    /// A would-be refusal in shadow mode: recorded with `shadow: true` and logged, then the
    /// request goes ahead. `Err` (503) when the record could not be committed.
    pub(crate) async fn shadow_pass(&self, r: Refusal<'_>) -> Result<Grant, Response<ProxyBody>> {
        let reason = r.reason;
        if self.record_refusal(r).await {
            Ok(Grant::shadow(reason))
        } else {
            Err(unrecorded())
        }
    }

    /// Records and answers a refusal (`403`, or `status` for limits).
    pub(crate) async fn refuse(&self, r: Refusal<'_>, status: StatusCode) -> Response<ProxyBody> {
        let (host, port, reason) = (r.host, r.port, r.reason);
        let package = r.package.clone();
        if !self.record_refusal(r).await {
            return unrecorded();
        }
        let approvable = self
            .store
            .refusal_approvable(reason, package.is_some(), host);
        let mut resp = respond::refused(host, port, reason, package.as_ref(), approvable);
        *resp.status_mut() = status;
        resp
    }

    /// The grant the database holds for `host` now, remembered for the turn: asked when a
    /// remembered grant's access level refuses a request, so a person's fresh `full`
    /// approval works at once. `None` when nothing allows it or the database did not answer.
    pub(crate) async fn fresh_grant(&self, turn: &TurnEntry, host: &Host) -> Option<Grant> {
        let now = Timestamp::now();
        let at = ApprovalsOf {
            user: &turn.turn.user,
            chat: &turn.turn.chat,
            turn: &turn.turn.id,
        };
        let grant = match self.store.site_allowed(at, host, now).await {
            Ok(g) => g?,
            Err(e) => {
                tracing::warn!(error = %e, "cannot re-check a grant; keeping the refusal");
                return None;
            }
        };
        turn.remember_allowed(
            &Subject::Site(host.clone()),
            self.epoch.get(),
            grant.clone(),
        );
        Some(grant)
    }

    /// Spends one use of a counted `grant` for a connection about to be admitted; `Err`
    /// (the answer to send) when none is left: the refusal is `not_approved` again, recorded
    /// and approvable. An unlimited grant spends nothing and costs no database trip.
    pub(crate) async fn spend_use(
        &self,
        grant: &Grant,
        r: Refusal<'_>,
    ) -> Result<(), Response<ProxyBody>> {
        let Some(row) = &grant.counted else {
            return Ok(());
        };
        match self.store.spend_use(row, Timestamp::now()).await {
            Ok(true) => Ok(()),
            Ok(false) if r.shadow => self.shadow_pass(r).await.map(|_| ()),
            Ok(false) => Err(self.refuse(r, StatusCode::FORBIDDEN).await),
            Err(e) => {
                tracing::error!(error = %e, "cannot spend a counted grant's use; refusing");
                Err(unrecorded())
            }
        }
    }

    /// A host or package nothing in memory allows: the database decides, in the transaction
    /// that records the refusal if it stands. `Ok(grant)`: allowed after all (and cached for
    /// the turn under `epoch`, read before asking, until the grant ends); `Err(answer)`: the
    /// answer to send.
    pub(crate) async fn refuse_unless_allowed(
        &self,
        r: Refusal<'_>,
        subject: Subject,
        epoch: Option<i64>,
    ) -> Result<Grant, Response<ProxyBody>> {
        let started = Instant::now();
        let candidate = RefusalCandidate {
            event: r.event(),
            user: r.turn.turn.user.clone(),
            chat: r.turn.turn.chat.clone(),
            subject: subject.clone(),
        };
        let verdict = self.recorder.refuse_unless_allowed(candidate).await;
        self.metrics
            .record_seconds
            .observe(started.elapsed().as_secs_f64());
        match verdict {
            Ok(Some(grant)) => {
                r.turn.remember_allowed(&subject, epoch, grant.clone());
                Ok(grant)
            }
            Ok(None) if r.shadow => {
                self.refused(&r, true, started);
                Ok(Grant::shadow(r.reason))
            }
            Ok(None) => {
                self.refused(&r, true, started);
                Err(respond::refused(
                    r.host,
                    r.port,
                    r.reason,
                    r.package.as_ref(),
                    self.store
                        .refusal_approvable(r.reason, r.package.is_some(), r.host),
                ))
            }
            Err(_) => {
                self.refused(&r, false, started);
                Err(unrecorded())
            }
        }
    }
}

/// The answer when a refusal could not be committed: still a refusal, never a pass.
pub(crate) fn unrecorded() -> Response<ProxyBody> {
    respond::status(
        StatusCode::SERVICE_UNAVAILABLE,
        "refusal could not be recorded; refusing",
    )
}

/// Open client connections and tunnels (an upgraded connection outlives hyper's connection
/// future), for `max-connections` and so shutdown can wait for them; `gauge` shows the count
/// on `/metrics`.
#[derive(Default)]
pub(crate) struct Active {
    pub(crate) count: AtomicUsize,
    pub(crate) idle: Notify,
    pub(crate) gauge: prometheus_client::metrics::gauge::Gauge,
}

/// Counts one open connection or tunnel while it lives.
pub(crate) struct ConnGuard(Arc<Active>);

impl ConnGuard {
    /// Counts one more; returns the guard and the count before it.
    pub(crate) fn new(active: &Arc<Active>) -> (Self, usize) {
        let prev = active.count.fetch_add(1, Ordering::AcqRel);
        active.gauge.inc();
        (Self(active.clone()), prev)
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.gauge.dec();
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}
