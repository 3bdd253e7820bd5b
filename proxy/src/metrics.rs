//! Prometheus metrics for the data plane. Label sets are closed (request kind, refusal reason,
//! direction), so recording is an atomic add on a pre-created series.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `kind` label: what the client asked for.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `connect` or `forward`.
    pub kind: &'static str,
}

/// `reason` label: why a request was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// A refusal reason.
    pub reason: &'static str,
}

/// `direction` label for relayed bytes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabel {
    /// `up` (client → origin) or `down`.
    pub direction: &'static str,
}

/// The proxy's metrics.
#[derive(Clone)]
pub struct Metrics {
    /// Requests by kind.
    pub requests: Family<KindLabel, Counter>,
    /// Refusals by reason.
    pub refusals: Family<ReasonLabel, Counter>,
    /// Bytes relayed by direction.
    pub bytes: Family<DirectionLabel, Counter>,
    /// Open tunnels.
    pub active_tunnels: Gauge,
    /// Time to decide a request (seconds), including any database lookup.
    pub decision_seconds: Histogram,
    /// Time to commit a refusal record (seconds).
    pub record_seconds: Histogram,
}

impl Metrics {
    /// Creates the metrics and registers them under `egressgate_proxy_`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            requests: Family::default(),
            refusals: Family::default(),
            bytes: Family::default(),
            active_tunnels: Gauge::default(),
            decision_seconds: Histogram::new(exponential_buckets(0.000_01, 4.0, 10)),
            record_seconds: Histogram::new(exponential_buckets(0.000_1, 4.0, 10)),
        };
        let r = registry.sub_registry_with_prefix("egressgate_proxy");
        r.register("requests", "Proxy requests by kind", m.requests.clone());
        r.register("refusals", "Refused requests by reason", m.refusals.clone());
        r.register(
            "relayed_bytes",
            "Bytes relayed by direction",
            m.bytes.clone(),
        );
        r.register(
            "active_tunnels",
            "Open CONNECT tunnels",
            m.active_tunnels.clone(),
        );
        r.register(
            "decision_seconds",
            "Time to decide a request",
            m.decision_seconds.clone(),
        );
        r.register(
            "record_seconds",
            "Time to commit a refusal record",
            m.record_seconds.clone(),
        );
        m
    }
}
