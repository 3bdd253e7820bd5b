//! A way to reach one person directly (Slack, e-mail): what an event becomes on it, decided at
//! fan-out, and one attempt to send a message. The outbox worker owns everything else — the
//! cursor, the rows, leases, retries with backoff, metrics — the same for every channel and
//! for webhooks, so a channel is only these two functions.

use std::time::Duration;

use egressgate_store::db::outbox::{Channel as Kind, ChannelDue, ChannelMessage, OutboxEvent};
use futures_util::future::BoxFuture;

/// How one attempt to send ended, for any receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The receiver took it.
    Accepted {
        /// The HTTP status (200 where the channel is not HTTP).
        status: u16,
        /// What the receiver said about the message, kept with it (a Slack message's ts, a
        /// Message-ID).
        reference: Option<String>,
    },
    /// Not taken: a refusal (with its status, if any) or no answer (timeout, refused
    /// address, connection error). Retried with backoff up to the bound.
    Refused {
        /// The HTTP status, when an answer came.
        status: Option<u16>,
        /// Why, for the delivery's `last_error` (never a secret).
        error: String,
    },
}

impl Sent {
    /// Not taken, with no answer.
    pub fn error(error: impl Into<String>) -> Self {
        Self::Refused {
            status: None,
            error: error.into(),
        }
    }
}

/// One channel. Implementations live beside this module (`slack`, `email`); the binary puts
/// the configured ones in [`super::WebhookSettings::channels`].
pub trait Channel: Send + Sync {
    /// Which channel: the `channel` of its rows and the prefix of its metrics.
    fn kind(&self) -> Kind;

    /// The messages `event` becomes on this channel (none for most events). Called inside the
    /// fan-out's transaction, so it only reads the event (its card and the user's contacts
    /// are filled in) and never waits on anything.
    fn messages(&self, event: &OutboxEvent) -> Vec<ChannelMessage>;

    /// One attempt to send `message`, within `timeout`.
    fn send<'a>(&'a self, message: &'a ChannelDue, timeout: Duration) -> BoxFuture<'a, Sent>;
}
