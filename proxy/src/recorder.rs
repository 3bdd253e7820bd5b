//! Step 6, record: refusals are written before the `403` goes out, and allowed traffic is
//! summarised. Concurrent records are grouped into one transaction (group commit), so the
//! refusal path stays correct under load without one database round trip per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use egressgate_store::db::refusals::{EgressEvent, RefusalCandidate, RefusalEvent};
use egressgate_store::{Grant, Host, Store, Timestamp, TurnId};
use tokio::sync::{mpsc, oneshot};

/// Most events folded into one transaction.
const BATCH: usize = 512;

enum Job {
    Refusal(RefusalEvent, oneshot::Sender<bool>),
    /// A refusal that stands only if the database does not allow the host after all; the
    /// answer is `Some(grant that allows it, if any)`, or `None` when the transaction failed.
    Candidate(RefusalCandidate, oneshot::Sender<Option<Option<Grant>>>),
}

/// Allowed traffic summed per (turn, host) since the last flush.
type Sums = HashMap<(TurnId, Host), Sum>;

/// A handle to the writer task; cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Job>,
    /// Summed on the data path under a short lock and taken by the writer once a second:
    /// counting a request's bytes neither queues a message nor wakes a task.
    egress: Arc<Mutex<Sums>>,
}

/// Recording failed: the caller must not claim the refusal was recorded (answer `503`).
#[derive(Debug, thiserror::Error)]
#[error("refusal could not be recorded")]
pub struct RecordError;

impl Recorder {
    /// Starts the writer task on the current runtime.
    pub fn spawn(store: Store, max_hosts_per_turn: i64) -> Self {
        let (tx, rx) = mpsc::channel(8192);
        let egress = Arc::new(Mutex::new(Sums::new()));
        tokio::spawn(writer(store, max_hosts_per_turn, rx, egress.clone()));
        Self { tx, egress }
    }

    /// Records a refusal and returns once it is committed.
    pub async fn refusal(&self, event: RefusalEvent) -> Result<(), RecordError> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Job::Refusal(event, done))
            .await
            .map_err(|_| RecordError)?;
        match wait.await {
            Ok(true) => Ok(()),
            _ => Err(RecordError),
        }
    }

    /// Refuses `candidate` unless the database allows its host, checked inside the
    /// transaction that records the refusal. `Ok(Some(grant))`: allowed by `grant`, nothing
    /// recorded; `Ok(None)`: refused, and the refusal is committed.
    pub async fn refuse_unless_allowed(
        &self,
        candidate: RefusalCandidate,
    ) -> Result<Option<Grant>, RecordError> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Job::Candidate(candidate, done))
            .await
            .map_err(|_| RecordError)?;
        wait.await.ok().flatten().ok_or(RecordError)
    }

    /// Adds allowed-traffic counters to the sums the writer flushes once a second.
    pub fn egress(&self, event: EgressEvent) {
        let EgressEvent {
            turn,
            host,
            connections,
            bytes_up,
            bytes_down,
            at,
        } = event;
        if let Ok(mut sums) = self.egress.lock() {
            let sum = sums.entry((turn, host)).or_default();
            sum.connections += connections;
            sum.bytes_up += bytes_up;
            sum.bytes_down += bytes_down;
            sum.at = Some(at);
        }
    }
}

/// How often summed egress counters are written.
const EGRESS_FLUSH: std::time::Duration = std::time::Duration::from_secs(1);

async fn writer(store: Store, max_hosts: i64, mut rx: mpsc::Receiver<Job>, sums: Arc<Mutex<Sums>>) {
    let mut jobs = Vec::with_capacity(BATCH);
    // Allowed traffic is summed in memory per (turn, host) and written once a second: a busy
    // keep-alive client must not cost a database write per request.
    let taken = || {
        sums.lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    };
    let mut tick = tokio::time::interval(EGRESS_FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut jobs, BATCH) => {
                if n == 0 {
                    flush_egress(&store, taken()).await;
                    return;
                }
            }
            _ = tick.tick() => {
                flush_egress(&store, taken()).await;
                continue;
            }
        }
        let mut batch = Batch::default();
        for job in jobs.drain(..) {
            match job {
                Job::Refusal(e, done) => {
                    batch.refusals.push(e);
                    batch.refusal_waiters.push(done);
                }
                Job::Candidate(c, done) => {
                    batch.candidates.push(c);
                    batch.candidate_waiters.push(done);
                }
            }
        }
        batch.commit(&store, max_hosts).await;
    }
}

/// The refusals of one group commit and who waits for them.
#[derive(Default)]
struct Batch {
    refusals: Vec<RefusalEvent>,
    refusal_waiters: Vec<oneshot::Sender<bool>>,
    candidates: Vec<RefusalCandidate>,
    candidate_waiters: Vec<oneshot::Sender<Option<Option<Grant>>>>,
}

impl Batch {
    /// One transaction for the whole batch; every waiter learns the outcome after commit.
    async fn commit(self, store: &Store, max_hosts: i64) {
        if self.candidates.is_empty() && self.refusals.is_empty() {
            return;
        }
        let outcome = store
            .refuse_unless_allowed(
                &self.candidates,
                &self.refusals,
                max_hosts,
                Timestamp::now(),
            )
            .await;
        if let Err(e) = &outcome {
            tracing::error!(error = %e, "could not check or record refusals; answering 503");
        }
        for w in self.refusal_waiters {
            let _ = w.send(outcome.is_ok());
        }
        match outcome {
            Ok(verdicts) => {
                for (w, allowed) in self.candidate_waiters.into_iter().zip(verdicts) {
                    let _ = w.send(Some(allowed));
                }
            }
            Err(_) => {
                for w in self.candidate_waiters {
                    let _ = w.send(None);
                }
            }
        }
    }
}

/// Allowed traffic of one (turn, host) since the last flush.
#[derive(Default)]
struct Sum {
    connections: i64,
    bytes_up: i64,
    bytes_down: i64,
    at: Option<Timestamp>,
}

async fn flush_egress(store: &Store, egress: Sums) {
    if egress.is_empty() {
        return;
    }
    let batch: Vec<EgressEvent> = egress
        .into_iter()
        .map(|((turn, host), sum)| EgressEvent {
            turn,
            host,
            connections: sum.connections,
            bytes_up: sum.bytes_up,
            bytes_down: sum.bytes_down,
            at: sum.at.unwrap_or_else(Timestamp::now),
        })
        .collect();
    if let Err(e) = store.record_egress(&batch).await {
        tracing::warn!(error = %e, lost = batch.len(), "could not record egress summary");
    }
}
