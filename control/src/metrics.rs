//! Prometheus metrics for the control plane, from one middleware: requests by route template
//! (never the raw path, so ids cannot blow up the label set), method and status, and their
//! latency by route and method; errors by
//! code; resume outcomes; claim conflicts; audit failures. Handlers need not count anything:
//! an error response carries its code as an extension ([`crate::error::ErrorCode`]).

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use egressgate_store::Store;
use egressgate_store::db::interrupts::InterruptState;
use egressgate_store::label_sets;
use egressgate_store::metric_registry::Prefixed;

use crate::error::ErrorCode;

/// The resume route's template.
const RESUME: &str = "/v1/interrupts/{id}/resume";

/// Codes that mean a claim lost a race or collided with an earlier decision.
const CLAIM_CONFLICTS: [&str; 3] = ["RESUME_IN_PROGRESS", "DECISION_CONFLICT", "CLAIM_LOST"];

/// Labels of one API request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    /// The route template (`/v1/turns/{turn_id}/refusals`), or `unmatched`.
    pub route: String,
    /// The HTTP method.
    pub method: String,
    /// The status answered.
    pub status: u16,
}

/// Labels of a request's latency: route and method only, so the histogram's series stay few.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteMethodLabel {
    /// The route template, or `unmatched`.
    pub route: String,
    /// The HTTP method.
    pub method: String,
}

/// A latency histogram from 0.5 ms to about 4 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 3.0, 9))
}

/// Labels of one error answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// The route template.
    pub route: String,
    /// The error code (`RESUME_IN_PROGRESS`, …).
    pub code: &'static str,
}

label_sets! {
    OutcomeLabel(outcome): "Of a resume: `ok` (claimed or replayed), or the error code.";
    StateLabel(state): "Of a card: `pending`, `claimed`, `done` or `expired`.";
}

/// The control plane's metrics.
#[derive(Clone)]
pub struct ControlMetrics {
    cards: Family<StateLabel, Gauge>,
    requests: Family<RouteLabel, Counter>,
    request_seconds: Family<RouteMethodLabel, Histogram, fn() -> Histogram>,
    errors: Family<CodeLabel, Counter>,
    resumes: Family<OutcomeLabel, Counter>,
    claim_conflicts: Counter,
    audit_failures: Counter,
}

impl ControlMetrics {
    /// Creates the metrics and registers them under `egressgate_control_`, in the order
    /// `/metrics` lists them.
    pub fn new(registry: &mut Registry) -> Self {
        let mut r = Prefixed::new(registry, "egressgate_control");
        Self {
            requests: r.add(
                "requests",
                "API requests by route template, method and status",
            ),
            request_seconds: r.add_made(
                "request_seconds",
                "Time to answer an API request (to its first byte for a stream), by route and method",
                Family::new_with_constructor(latency as fn() -> Histogram),
            ),
            errors: r.add("errors", "API errors by route and code"),
            cards: r.add(
                "cards",
                "Cards by state, in the whole database (read at each scrape)",
            ),
            resumes: r.add(
                "resumes",
                "Resume requests by outcome (ok, or the error code)",
            ),
            claim_conflicts: r.add(
                "claim_conflicts",
                "Resumes and claim calls that lost a race or collided with the first decision",
            ),
            audit_failures: r.add(
                "audit_failures",
                "Changes refused because their audit row could not be written",
            ),
        }
    }

    /// Re-reads the card counts (one grouped query), just before a scrape is encoded; on a
    /// database error the last counts stay.
    pub async fn refresh_cards(&self, store: &Store) {
        match store.card_states().await {
            Ok(rows) => {
                // Every state, so each series exists (at 0) from the first scrape.
                for state in InterruptState::ALL.map(InterruptState::as_str) {
                    let n = rows.iter().find(|(s, _)| s == state).map_or(0, |(_, n)| *n);
                    self.cards.get_or_create(&StateLabel { state }).set(n);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot count cards for /metrics"),
        }
    }

    fn observe(&self, route: &str, method: &str, resp: &Response, took: std::time::Duration) {
        let status = resp.status().as_u16();
        self.request_seconds
            .get_or_create(&RouteMethodLabel {
                route: route.to_owned(),
                method: method.to_owned(),
            })
            .observe(took.as_secs_f64());
        self.requests
            .get_or_create(&RouteLabel {
                route: route.to_owned(),
                method: method.to_owned(),
                status,
            })
            .inc();
        let code = resp.extensions().get::<ErrorCode>().map(|c| c.0);
        if let Some(code) = code {
            self.errors
                .get_or_create(&CodeLabel {
                    route: route.to_owned(),
                    code,
                })
                .inc();
            if CLAIM_CONFLICTS.contains(&code) {
                self.claim_conflicts.inc();
            }
            if code == "AUDIT_FAILED" {
                self.audit_failures.inc();
            }
        }
        if route == RESUME {
            let outcome = match code {
                Some(c) => c,
                None if resp.status().is_success() => "ok",
                None => "other",
            };
            self.resumes.get_or_create(&OutcomeLabel { outcome }).inc();
        }
    }
}

/// The middleware: counts each request under its route template once it is answered.
pub async fn track(State(m): State<ControlMetrics>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    m.observe(&route, &method, &resp, started.elapsed());
    resp
}
