//! E-mail as an outbox [`Channel`]: at fan-out, a pending card of a user with an address
//! becomes one message (composed then, stored as the delivery's payload); each attempt sends
//! it through the relay with the delivery's id as its Message-ID, which the delivery keeps as
//! its reference once the relay accepted it.

use std::time::Duration;

use egressgate_store::db::outbox::{Channel as Kind, ChannelDue, ChannelMessage, OutboxEvent};
use futures_util::future::BoxFuture;

use super::message::{Mail, compose};
use super::{EmailSettings, send};
use crate::notify::channel::{Channel, Sent};

/// The e-mail channel of a deployment with `--smtp-url`.
#[derive(Debug)]
pub struct EmailChannel {
    settings: EmailSettings,
    public_url: Option<String>,
}

impl EmailChannel {
    /// Mails through `settings`; card links under `public_url` (`--control-public-url`).
    pub fn new(settings: EmailSettings, public_url: Option<String>) -> Self {
        Self {
            settings,
            public_url,
        }
    }
}

impl Channel for EmailChannel {
    fn kind(&self) -> Kind {
        Kind::Email
    }

    fn messages(&self, event: &OutboxEvent) -> Vec<ChannelMessage> {
        let Some(to) = &event.contacts.email else {
            return Vec::new();
        };
        let Some(mail) = compose(event, self.public_url.as_deref()) else {
            return Vec::new();
        };
        match serde_json::to_value(&mail) {
            Ok(payload) => vec![ChannelMessage {
                channel: Kind::Email,
                recipient: to.clone(),
                payload,
            }],
            Err(e) => {
                tracing::error!(error = %e, "a card's e-mail could not be stored");
                Vec::new()
            }
        }
    }

    fn send<'a>(&'a self, due: &'a ChannelDue, timeout: Duration) -> BoxFuture<'a, Sent> {
        Box::pin(async move {
            let mail: Mail = match serde_json::from_str(&due.payload) {
                Ok(m) => m,
                Err(e) => return Sent::error(format!("the stored message is unreadable ({e})")),
            };
            let id = due.id.as_str();
            match send(&self.settings, &due.recipient, id, &mail, timeout).await {
                // Not HTTP: 200 as for every channel that is not.
                Ok(()) => Sent::Accepted {
                    status: 200,
                    reference: Some(self.settings.message_id(id)),
                },
                Err(e) => Sent::error(e),
            }
        })
    }
}
