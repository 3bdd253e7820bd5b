//! "New events were committed": a counter every subscriber of this process watches, bumped
//! after each commit that may have appended events and, on PostgreSQL, by a `LISTEN` on the
//! channel that other processes' commits `NOTIFY`. Missing a wake-up only delays delivery
//! until the subscribers' next poll.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// The PostgreSQL channel that carries "new events were committed".
pub(crate) const CHANNEL: &str = "egressgate_events";

/// Wakes subscribers when events were committed; shared by every clone of a `Store`.
#[derive(Debug)]
pub(crate) struct EventSignal {
    tx: watch::Sender<u64>,
    listening: AtomicBool,
    /// The database to `LISTEN` on: PostgreSQL only (SQLite has one process).
    url: Option<String>,
}

impl EventSignal {
    /// A signal for one pool; `url` names the PostgreSQL server to listen to, if any.
    pub(crate) fn new(url: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            tx: watch::Sender::new(0),
            listening: AtomicBool::new(false),
            url,
        })
    }

    /// Tells this process's subscribers that events may have been committed.
    pub(crate) fn bump(&self) {
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes whenever events may have been committed; the first
    /// subscriber on PostgreSQL starts the one listener this signal needs.
    pub(crate) fn subscribe(self: &Arc<Self>) -> watch::Receiver<u64> {
        if let Some(url) = &self.url
            && !self.listening.swap(true, Ordering::SeqCst)
        {
            tokio::spawn(listen(url.clone(), self.clone()));
        }
        self.tx.subscribe()
    }
}

/// Forwards PostgreSQL notifications to the in-process signal, reconnecting on failure.
/// Missed notifications only delay delivery until the subscribers' next poll.
async fn listen(url: String, signal: Arc<EventSignal>) {
    loop {
        match sqlx::postgres::PgListener::connect(&url).await {
            Ok(mut l) => {
                if let Err(e) = l.listen(CHANNEL).await {
                    tracing::warn!(error = %e, "event LISTEN failed; polling meanwhile");
                } else {
                    loop {
                        match l.recv().await {
                            Ok(_) => signal.bump(),
                            Err(e) => {
                                tracing::warn!(error = %e, "event listener lost; reconnecting");
                                break;
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "event listener cannot connect; polling"),
        }
        // Whatever was committed while we were away is found by the next read.
        signal.bump();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
