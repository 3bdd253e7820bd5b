//! The outbox worker every control process runs: announce card expiries, fan new events out
//! into deliveries, take the due ones and send them, record each attempt (retrying with
//! exponential backoff and jitter, up to a bound). All its state is in the database, so it
//! survives restarts and any process may finish what another began; the API only writes
//! rows, so a slow receiver never slows it.

use std::sync::Arc;
use std::time::Duration;

use egressgate_store::db::outbox::{Attempt, Due};
use egressgate_store::metric_registry::Prefixed;
use egressgate_store::{Store, Timestamp};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::WebhookSettings;
use super::webhooks::{self, Sent, Target};

/// Events fanned out per transaction, and deliveries taken per round.
const BATCH: i64 = 100;
/// Deliveries sent at once by one process.
const PARALLEL: i64 = 16;
/// How often the worker looks when no event woke it.
const POLL: Duration = Duration::from_millis(500);
/// Longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// Labels of one delivery attempt.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `delivered`, `retry` or `failed`.
    pub outcome: &'static str,
}

/// `egressgate_webhook_deliveries_total{outcome}` and `egressgate_webhook_deliveries_pending`.
#[derive(Clone, Debug)]
pub struct OutboxMetrics {
    attempts: Family<OutcomeLabel, Counter>,
    pending: Gauge,
}

impl OutboxMetrics {
    /// Registers the metrics under `egressgate_webhook_`.
    pub fn new(registry: &mut Registry) -> Self {
        let mut r = Prefixed::new(registry, "egressgate_webhook");
        let attempts: Family<OutcomeLabel, Counter> = r.add(
            "deliveries",
            "Webhook delivery attempts by outcome (delivered, retry, failed).",
        );
        // Every outcome is exported from the start at 0, so an alert's `rate()` has a series
        // to work on before the first failure (an absent series never fires).
        for outcome in ["delivered", "retry", "failed"] {
            drop(attempts.get_or_create(&OutcomeLabel { outcome }));
        }
        Self {
            attempts,
            pending: r.add(
                "deliveries_pending",
                "Webhook deliveries not yet delivered nor given up, deployment-wide.",
            ),
        }
    }
}

/// Runs until `stop` resolves. An attempt in flight at that moment is dropped; its delivery
/// is taken again when its lease ends (at least once).
pub async fn run(
    store: Store,
    settings: WebhookSettings,
    metrics: OutboxMetrics,
    stop: impl std::future::Future<Output = ()>,
) {
    let Some(egress) = settings.egress.clone() else {
        return;
    };
    let worker = Worker {
        store,
        settings,
        egress,
        metrics,
    };
    let mut wake = worker.store.subscribe_events();
    let mut rounds: u64 = 0;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            () = worker.round(rounds) => {}
        }
        rounds += 1;
        tokio::select! {
            () = &mut stop => return,
            _ = wake.changed() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

struct Worker {
    store: Store,
    settings: WebhookSettings,
    egress: Arc<dyn super::Egress>,
    metrics: OutboxMetrics,
}

impl Worker {
    /// One pass; errors are logged and the next pass tries again.
    async fn round(&self, n: u64) {
        if let Err(e) = self.pass(n).await {
            tracing::warn!(error = %e, "webhook outbox pass failed");
        }
    }

    async fn pass(&self, n: u64) -> Result<(), egressgate_store::StoreError> {
        let now = Timestamp::now();
        if !self.store.webhooks().await?.is_empty() {
            self.store.announce_expiries(BATCH, now).await?;
        }
        let public = self.settings.public_url.clone();
        let build = move |e: &egressgate_store::db::outbox::OutboxEvent| {
            webhooks::payload(e, public.as_deref())
        };
        // Fan out everything new (in batches), then send what is due.
        for _ in 0..10 {
            if self.store.outbox_fan_out(BATCH, now, &build).await? == 0 {
                break;
            }
        }
        let lease = now.plus(self.settings.timeout + Duration::from_secs(5));
        let due = self.store.outbox_take_due(PARALLEL, now, lease).await?;
        let sends = due.iter().map(|d| self.attempt(d));
        for (d, attempt) in due.iter().zip(futures_util::future::join_all(sends).await) {
            let outcome = match &attempt {
                Attempt::Delivered { .. } => "delivered",
                Attempt::Failed {
                    retry_at: Some(_), ..
                } => "retry",
                Attempt::Failed { retry_at: None, .. } => "failed",
            };
            self.metrics
                .attempts
                .get_or_create(&OutcomeLabel { outcome })
                .inc();
            tracing::info!(webhook_id = %d.id, endpoint = %d.endpoint, event = %d.event_type,
                attempt = d.attempts + 1, outcome, "webhook delivery");
            self.store
                .outbox_record(&d.id, &attempt, Timestamp::now())
                .await?;
        }
        self.metrics.pending.set(self.store.outbox_pending().await?);
        if n.is_multiple_of(120) {
            self.store.outbox_prune(now).await?;
        }
        Ok(())
    }

    /// One POST of `d`, and what to record of it.
    async fn attempt(&self, d: &Due) -> Attempt {
        let sent = match self.prepare(d).await {
            Ok((target, secret, body)) => {
                webhooks::post(
                    self.egress.as_ref(),
                    &target,
                    &secret,
                    d.id.as_str(),
                    body,
                    self.settings.timeout,
                )
                .await
            }
            Err(e) => Sent::Error(e),
        };
        let (status, error) = match sent {
            Sent::Status(s) if (200..300).contains(&s) => {
                return Attempt::Delivered { status: s };
            }
            Sent::Status(s) => (Some(s), format!("HTTP {s}")),
            Sent::Error(e) => (None, e),
        };
        let made = u32::try_from(d.attempts + 1).unwrap_or(u32::MAX);
        let retry_at = (made < self.settings.max_attempts)
            .then(|| Timestamp::now().plus(backoff(self.settings.backoff, made)));
        Attempt::Failed {
            status,
            error,
            retry_at,
        }
    }

    /// The target, the signing secret (opened) and the body (with the card's link when the
    /// endpoint asked for it and one was kept).
    async fn prepare(&self, d: &Due) -> Result<(Target, String, String), String> {
        let seal = self
            .settings
            .seal
            .as_ref()
            .ok_or_else(|| "no seal key to open the signing secret".to_owned())?;
        let secret = seal
            .open_for(
                &super::secret_context(d.endpoint.as_str()),
                &d.secret_sealed,
            )
            .map_err(|e| format!("signing secret: {e}"))?;
        let target = Target::parse(&d.url, &[])?;
        let mut body = d.payload.clone();
        if let (true, Some(id)) = (d.include_link, &d.interrupt_id) {
            let kept = self
                .store
                .resume_link(id)
                .await
                .map_err(|e| e.to_string())?;
            if let Some(sealed) = kept {
                let link = seal
                    .open_for(&super::link_context(id), &sealed)
                    .map_err(|e| format!("resume link: {e}"))?;
                body = webhooks::with_link(&body, &link).unwrap_or(body);
            }
        }
        Ok((target, secret, body))
    }
}

/// The wait after the `made`th failed attempt: `base · 2^(made-1)`, at most an hour, less a
/// random part of up to a half (so receivers that came back are not hit by every sender at
/// once).
pub fn backoff(base: Duration, made: u32) -> Duration {
    let full = base
        .saturating_mul(1u32 << made.saturating_sub(1).min(20))
        .min(MAX_BACKOFF);
    let jitter: f64 = rand::random::<f64>() * 0.5;
    full.mul_f64(1.0 - jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_an_hour() {
        let base = Duration::from_secs(10);
        for (made, full) in [(1, 10), (2, 20), (3, 40), (12, 3600), (40, 3600)] {
            let d = backoff(base, made);
            let full = Duration::from_secs(full);
            assert!(d <= full && d >= full / 2, "{made}: {d:?}");
        }
    }
}
