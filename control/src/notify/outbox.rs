//! The outbox worker every control process runs: announce card expiries, fan new events out
//! into deliveries (webhooks, and each configured [`Channel`]'s messages), take the due ones
//! and send them, record each attempt (retrying with exponential backoff and jitter, up to a
//! bound), the same for every queue. All its state is in the database, so it
//! survives restarts and any process may finish what another began; the API only writes
//! rows, so a slow receiver never slows it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use egressgate_store::db::outbox::{
    Attempt, Channel as Kind, ChannelDue, Due, Fanned, OutboxEvent, Queue,
};
use egressgate_store::ids::MessageId;
use egressgate_store::metric_registry::Prefixed;
use egressgate_store::{Store, StoreError, Timestamp};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::WebhookSettings;
use super::channel::{Channel, Sent};
use super::http::Target;
use super::webhooks;

/// Events fanned out per transaction, and deliveries taken per round.
const BATCH: i64 = 100;
/// Deliveries sent at once by one process, per queue.
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

/// One queue's metrics: `egressgate_{webhook,slack,email}_deliveries_total{outcome}` and
/// `…_deliveries_pending`.
#[derive(Clone, Debug)]
struct QueueMetrics {
    attempts: Family<OutcomeLabel, Counter>,
    pending: Gauge,
}

impl QueueMetrics {
    fn new(registry: &mut Registry, prefix: &str, what: &str) -> Self {
        let mut r = Prefixed::new(registry, prefix);
        let attempts: Family<OutcomeLabel, Counter> = r.add(
            "deliveries",
            &format!("{what} delivery attempts by outcome (delivered, retry, failed)."),
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
                &format!("{what} deliveries not yet delivered nor given up, deployment-wide."),
            ),
        }
    }
}

/// The outbox's metrics: one set for webhooks (`egressgate_webhook_`) and one per channel
/// (`egressgate_slack_`, `egressgate_email_`), each exported from the start.
#[derive(Clone, Debug)]
pub struct OutboxMetrics {
    webhooks: QueueMetrics,
    channels: HashMap<Kind, QueueMetrics>,
}

impl OutboxMetrics {
    /// Registers the metrics of webhooks and of every channel.
    pub fn new(registry: &mut Registry) -> Self {
        let channels = Kind::ALL
            .into_iter()
            .map(|k| {
                let prefix = format!("egressgate_{}", k.as_str());
                let what = match k {
                    Kind::Slack => "Slack message",
                    Kind::Email => "E-mail",
                };
                (k, QueueMetrics::new(registry, &prefix, what))
            })
            .collect();
        Self {
            webhooks: QueueMetrics::new(registry, "egressgate_webhook", "Webhook"),
            channels,
        }
    }

    fn of(&self, queue: Queue) -> Option<&QueueMetrics> {
        match queue {
            Queue::Webhooks => Some(&self.webhooks),
            Queue::Channel(k) => self.channels.get(&k),
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
            tracing::warn!(error = %e, "outbox pass failed");
        }
    }

    async fn pass(&self, n: u64) -> Result<(), StoreError> {
        let now = Timestamp::now();
        if !self.store.webhooks().await?.is_empty() {
            self.store.announce_expiries(BATCH, now).await?;
        }
        let public = self.settings.public_url.clone();
        let channels = &self.settings.channels;
        let build = move |e: &OutboxEvent| Fanned {
            webhook: webhooks::payload(e, public.as_deref()),
            messages: channels.iter().flat_map(|c| c.messages(e)).collect(),
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
        let sent = futures_util::future::join_all(sends).await;
        for (d, sent) in due.iter().zip(sent) {
            let outcome = self
                .record(Queue::Webhooks, &d.id, d.attempts, sent)
                .await?;
            tracing::info!(webhook_id = %d.id, endpoint = %d.endpoint, event = %d.event_type,
                attempt = d.attempts + 1, outcome, "webhook delivery");
        }
        for channel in channels {
            self.channel_pass(channel.as_ref(), now, lease).await?;
        }
        self.export_pending().await?;
        if n.is_multiple_of(120) {
            self.store.outbox_prune(now).await?;
        }
        Ok(())
    }

    /// Sends one channel's due messages.
    async fn channel_pass(
        &self,
        channel: &dyn Channel,
        now: Timestamp,
        lease: Timestamp,
    ) -> Result<(), StoreError> {
        let kind = channel.kind();
        let due: Vec<ChannelDue> = self
            .store
            .channel_take_due(kind, PARALLEL, now, lease)
            .await?;
        let timeout = self.settings.timeout;
        let sends = due.iter().map(|m| async move {
            match tokio::time::timeout(timeout, channel.send(m, timeout)).await {
                Ok(sent) => sent,
                Err(_) => Sent::error(format!("timed out after {timeout:?}")),
            }
        });
        let sent = futures_util::future::join_all(sends).await;
        for (m, sent) in due.iter().zip(sent) {
            let outcome = self
                .record(Queue::Channel(kind), &m.id, m.attempts, sent)
                .await?;
            tracing::info!(message_id = %m.id, channel = kind.as_str(), user = %m.user,
                event = %m.event_type, attempt = m.attempts + 1, outcome, "channel delivery");
        }
        Ok(())
    }

    /// Judges one attempt (accepted, or failed with a next try or given up), counts and
    /// records it; the outcome's name, for the caller's log line.
    async fn record(
        &self,
        queue: Queue,
        id: &MessageId,
        before: i64,
        sent: Sent,
    ) -> Result<&'static str, StoreError> {
        let attempt = judge(sent, before, &self.settings);
        let outcome = match &attempt {
            Attempt::Delivered { .. } => "delivered",
            Attempt::Failed {
                retry_at: Some(_), ..
            } => "retry",
            Attempt::Failed { retry_at: None, .. } => "failed",
        };
        if let Some(m) = self.metrics.of(queue) {
            m.attempts.get_or_create(&OutcomeLabel { outcome }).inc();
        }
        self.store
            .outbox_record(queue, id, &attempt, Timestamp::now())
            .await?;
        Ok(outcome)
    }

    /// Sets every pending gauge from the database (deployment-wide).
    async fn export_pending(&self) -> Result<(), StoreError> {
        let queues = std::iter::once(Queue::Webhooks).chain(Kind::ALL.map(Queue::Channel));
        for queue in queues {
            if let Some(m) = self.metrics.of(queue) {
                m.pending.set(self.store.outbox_pending(queue).await?);
            }
        }
        Ok(())
    }

    /// One POST of `d`.
    async fn attempt(&self, d: &Due) -> Sent {
        match self.prepare(d).await {
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
            Err(e) => Sent::error(e),
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

/// What to record of an attempt after `before` earlier ones: delivered, or failed with the
/// next try (backoff) until `max_attempts` were made.
fn judge(sent: Sent, before: i64, settings: &WebhookSettings) -> Attempt {
    let (status, error) = match sent {
        Sent::Accepted { status, reference } => {
            return Attempt::Delivered { status, reference };
        }
        Sent::Refused { status, error } => (status, error),
    };
    let made = u32::try_from(before + 1).unwrap_or(u32::MAX);
    let retry_at = (made < settings.max_attempts)
        .then(|| Timestamp::now().plus(backoff(settings.backoff, made)));
    Attempt::Failed {
        status,
        error,
        retry_at,
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
