//! Prometheus metrics for the data plane. Label sets are closed (request kind, refusal reason,
//! direction), so recording is an atomic add on a pre-created series.

use egressgate_store::label_sets;
use egressgate_store::metric_registry::{Prefixed, series};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

label_sets! {
    KindLabel(kind): "What the client asked for: `connect` or `forward`.";
    ReasonLabel(reason): "Why a request was refused: a refusal reason.";
    DirectionLabel(direction): "Of relayed bytes: `up` (client → origin) or `down`.";
}

/// `status` label: an answer the proxy gave itself (not an origin's).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    /// The HTTP status code.
    pub status: u16,
}

/// The proxy's metrics. The hot-path series are resolved once here and kept as handles, so
/// counting a request or a relayed byte is one atomic add (no label hashing, no lock).
#[derive(Clone)]
pub struct Metrics {
    /// Refusals by reason (refusals are rare next to requests; looked up per refusal).
    pub refusals: Family<ReasonLabel, Counter>,
    /// Answers the proxy gave itself outside a refusal (`400`, `407`, `429`, `502`, `503`,
    /// `504`), by status; rare next to requests, so looked up per answer.
    pub failures: Family<StatusLabel, Counter>,
    /// `requests{kind="connect"}`.
    pub requests_connect: Counter,
    /// `requests{kind="forward"}`.
    pub requests_forward: Counter,
    /// `requests{kind="inspected"}`: requests decrypted on an inspected host and forwarded.
    pub inspected_requests: Counter,
    /// `relayed_bytes{direction="up"}` (client → origin).
    pub bytes_up: Counter,
    /// `relayed_bytes{direction="down"}` (origin → client).
    pub bytes_down: Counter,
    /// Open tunnels.
    pub active_tunnels: Gauge,
    /// The store's cache epoch as this process last read it (compare across processes).
    pub cache_epoch: Gauge,
    /// Seconds since this process last read the cache epoch: the bound on how stale its
    /// cached allows can be (a poll is 0.25 s; it grows while the database is unreachable).
    pub cache_epoch_age_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Open tunnels and keep-alive connections closed because a revocation left nothing
    /// that allows them.
    pub revoked_connections: Counter,
    /// Tunnels closed after their `200` because the origin could not be reached (TLS and
    /// opaque bytes, which cannot be answered; a plain request gets its `502` and is counted
    /// under `failures`).
    pub tunnel_cut_upstream: Counter,
    /// Time to decide an allowed request (seconds), including any database question.
    pub decision_seconds: Histogram,
    /// Time to commit a refusal record, or to learn from the database that there is none to
    /// make (seconds).
    pub record_seconds: Histogram,
}

impl Metrics {
    /// Creates the metrics and registers them under `egressgate_proxy_`, in the order
    /// `/metrics` lists them.
    pub fn new(registry: &mut Registry) -> Self {
        let mut r = Prefixed::new(registry, "egressgate_proxy");
        let requests: Family<KindLabel, Counter> = r.add("requests", "Proxy requests by kind");
        let refusals = r.add("refusals", "Refused requests by reason");
        let failures = r.add(
            "failures",
            "Requests the proxy answered itself outside a refusal (bad credentials, upstream or database failures, limits), by status",
        );
        let bytes: Family<DirectionLabel, Counter> =
            r.add("relayed_bytes", "Bytes relayed by direction");
        Self {
            refusals,
            failures,
            requests_connect: series(&requests, &KindLabel { kind: "connect" }),
            requests_forward: series(&requests, &KindLabel { kind: "forward" }),
            inspected_requests: series(&requests, &KindLabel { kind: "inspected" }),
            bytes_up: series(&bytes, &DirectionLabel { direction: "up" }),
            bytes_down: series(&bytes, &DirectionLabel { direction: "down" }),
            active_tunnels: r.add("active_tunnels", "Open CONNECT tunnels"),
            cache_epoch: r.add(
                "cache_epoch",
                "The store's cache epoch as this process last read it",
            ),
            cache_epoch_age_seconds: r.add(
                "cache_epoch_age_seconds",
                "Seconds since this process last read the cache epoch",
            ),
            revoked_connections: r.add(
                "revoked_connections",
                "Open connections closed by a revocation",
            ),
            tunnel_cut_upstream: r.add(
                "tunnel_upstream_failures",
                "Tunnels closed after their 200 because the origin could not be reached",
            ),
            decision_seconds: r.add_made(
                "decision_seconds",
                "Time to decide an allowed request, including any database question",
                Histogram::new(exponential_buckets(0.000_01, 4.0, 10)),
            ),
            record_seconds: r.add_made(
                "record_seconds",
                "Time to commit a refusal record",
                Histogram::new(exponential_buckets(0.000_1, 4.0, 10)),
            ),
        }
    }

    /// Counts one answer with `status` the proxy gave itself.
    pub fn count_status(&self, status: u16) {
        self.failures.get_or_create(&StatusLabel { status }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept handles are the registered series, not detached copies.
    #[test]
    fn handles_feed_the_registered_series() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry);
        m.requests_forward.inc();
        m.bytes_down.inc_by(42);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(
            text.contains(r#"egressgate_proxy_requests_total{kind="forward"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"egressgate_proxy_requests_total{kind="connect"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"egressgate_proxy_relayed_bytes_total{direction="down"} 42"#),
            "{text}"
        );
    }
}
