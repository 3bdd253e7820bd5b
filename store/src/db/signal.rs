//! "Something others must hear about was committed": one counter per [`Topic`] that every
//! subscriber of this process watches, bumped after each commit that may concern it and, on
//! PostgreSQL, by one `LISTEN` connection per process on the topics' channels, which other
//! processes' commits `NOTIFY` (delivered only when their transaction commits). Missing a
//! wake-up only delays a subscriber until its next poll: every subscriber still polls.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::watch;

/// What a wake-up is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Topic {
    /// New chat events were committed (event streams, the outbox).
    Events,
    /// The cache epoch may have moved: a revocation, a decline, an admin removal, a hidden
    /// chat, a user's changed right or mode. Proxies re-read the epoch and re-check what is
    /// open.
    Epoch,
}

impl Topic {
    const ALL: [Self; 2] = [Self::Events, Self::Epoch];

    /// The PostgreSQL channel that carries the topic across processes.
    pub(crate) fn channel(self) -> &'static str {
        match self {
            Self::Events => "egressgate_events",
            Self::Epoch => "egressgate_epoch",
        }
    }
}

/// The `application_name` of each process's listening connection, so an operator (and the
/// tests that cut it) can tell it from the pool's connections in `pg_stat_activity`.
const LISTENER_NAME: &str = "egressgate-listen";

/// Wakes subscribers per topic; shared by every clone of a `Store`.
#[derive(Debug)]
pub(crate) struct Signals {
    events: watch::Sender<u64>,
    epoch: watch::Sender<u64>,
    listening: AtomicBool,
    /// The database to `LISTEN` on: PostgreSQL only (SQLite has one process).
    url: Option<String>,
}

impl Signals {
    /// The signals of one pool; `url` names the PostgreSQL server to listen to, if any.
    pub(crate) fn new(url: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            events: watch::Sender::new(0),
            epoch: watch::Sender::new(0),
            listening: AtomicBool::new(false),
            url,
        })
    }

    fn sender(&self, topic: Topic) -> &watch::Sender<u64> {
        match topic {
            Topic::Events => &self.events,
            Topic::Epoch => &self.epoch,
        }
    }

    /// Tells this process's subscribers of `topic` that something may have been committed.
    pub(crate) fn bump(&self, topic: Topic) {
        self.sender(topic).send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes whenever something of `topic` may have been committed; the
    /// first subscriber on PostgreSQL starts the one listener this process needs (for every
    /// topic).
    pub(crate) fn subscribe(self: &Arc<Self>, topic: Topic) -> watch::Receiver<u64> {
        if let Some(url) = &self.url
            && !self.listening.swap(true, Ordering::SeqCst)
        {
            tokio::spawn(listen(url.clone(), self.clone()));
        }
        self.sender(topic).subscribe()
    }

    /// Wakes every topic: after the listener (re)connected, whatever was committed while it
    /// was away is found by the subscribers' next read.
    fn bump_all(&self) {
        for topic in Topic::ALL {
            self.bump(topic);
        }
    }
}

/// Queues a notification of `topic` for the other processes on `conn`, a PostgreSQL
/// connection: inside a transaction, PostgreSQL delivers it only if and when that commits.
pub(crate) async fn notify(
    conn: &mut sqlx::AnyConnection,
    topic: Topic,
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1 FROM (SELECT pg_notify($1, '')) AS n")
        .bind(topic.channel())
        .execute(conn)
        .await?;
    Ok(())
}

/// The first wait before listening again after the connection failed; doubled up to
/// [`RETRY_MAX`] while it keeps failing.
const RETRY_MIN: Duration = Duration::from_millis(100);
/// The longest wait between attempts to listen again.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Forwards PostgreSQL notifications to the in-process signals, for as long as the process
/// runs. A lost connection is reconnected (at once, then backing off while the server does
/// not answer), and every topic is woken each time listening starts again, after the
/// `LISTEN`: a notification sent while nobody listened is found by the subscribers' next
/// read, and one sent after it is delivered.
async fn listen(url: String, signals: Arc<Signals>) {
    let mut retry = RETRY_MIN;
    loop {
        match listening(&url).await {
            Ok(mut l) => {
                retry = RETRY_MIN;
                signals.bump_all();
                loop {
                    match l.try_recv().await {
                        Ok(Some(n)) => {
                            if let Some(t) = Topic::ALL.iter().find(|t| t.channel() == n.channel())
                            {
                                signals.bump(*t);
                            }
                        }
                        // The connection was lost and made again, `LISTEN` included.
                        Ok(None) => {
                            tracing::info!("database listener reconnected");
                            signals.bump_all();
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "database listener lost; reconnecting");
                            // Subscribers read now: if the database itself is gone, that read
                            // fails and they stop trusting what they cached.
                            signals.bump_all();
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "database listener cannot connect; polling meanwhile")
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(RETRY_MAX);
    }
}

/// A listener on every topic's channel, on a connection of its own named [`LISTENER_NAME`].
async fn listening(url: &str) -> Result<PgListener, sqlx::Error> {
    let options = url
        .parse::<PgConnectOptions>()?
        .application_name(LISTENER_NAME);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(options)
        .await?;
    let mut l = PgListener::connect_with(&pool).await?;
    l.ignore_pool_close_event(true);
    l.listen_all(Topic::ALL.iter().map(|t| t.channel())).await?;
    Ok(l)
}
