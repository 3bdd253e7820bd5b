//! The Slack front end's delivery side: where a pending card goes (a DM through the bot's
//! `chat.postMessage` to the user's Slack id, and/or the incoming webhook's one channel) and
//! one attempt to post it. The message itself is [`blocks`]; a click comes back through
//! `POST /v1/slack/interactions`, checked by [`verify`]. Every URL here is egress like any
//! other: vetted by the proxy's rules before it is dialled.

pub mod blocks;
pub mod settings;
pub mod verify;

pub use settings::{DEFAULT_API_URL, SlackSettings};

use std::sync::Arc;
use std::time::Duration;

use egressgate_store::db::outbox::{Channel as Kind, ChannelDue, ChannelMessage, OutboxEvent};
use egressgate_store::{Host, SitePattern, Store};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::Egress;
use super::channel::{Channel, Sent};
use super::http::{self, Post, Target};
use super::webhooks;

/// The recipient of the incoming webhook's message (one channel, whoever is in it).
pub const WEBHOOK_RECIPIENT: &str = "webhook";

/// The Slack channel of the outbox.
pub struct SlackChannel {
    settings: SlackSettings,
    egress: Arc<dyn Egress>,
    store: Store,
    /// The deployment's `--inspect` patterns and whether `user` scope is allowed: the buttons
    /// offer only the choices a resume would keep, like the card page.
    inspect: Vec<SitePattern>,
    allow_user_scope: bool,
    internal_suffixes: Vec<Host>,
    /// `--control-public-url`: the message links to the card page (without its secret).
    public_url: Option<String>,
}

impl SlackChannel {
    /// A channel posting with `settings` over `egress`.
    pub fn new(
        settings: SlackSettings,
        egress: Arc<dyn Egress>,
        store: Store,
        control: &crate::Settings,
    ) -> Self {
        Self {
            settings,
            egress,
            store,
            inspect: control.inspect.clone(),
            allow_user_scope: control.allow_user_scope,
            internal_suffixes: control.internal_suffixes.clone(),
            public_url: control.webhooks.public_url.clone(),
        }
    }

    async fn post(&self, m: &ChannelDue, timeout: Duration) -> Result<Sent, String> {
        let event: Value =
            serde_json::from_str(&m.payload).map_err(|_| "stored message unreadable")?;
        let card = blocks::CardMessage::from_event(&event)?;
        let inspected =
            crate::grants::inspected_in(&self.store, &self.inspect, &card.card.sites).await;
        let choices = blocks::Choices {
            user_scope: self.allow_user_scope,
            read: !card.card.sites.is_empty()
                && inspected.map_err(|e| e.to_string())?.len() == card.card.sites.len(),
        };
        let mut body = card.render(choices);
        let (url, headers) = if m.recipient == WEBHOOK_RECIPIENT {
            let url = self.settings.webhook_url.as_ref().ok_or("no webhook URL")?;
            (url.expose().to_owned(), Vec::new())
        } else {
            let token = self.settings.bot_token.as_ref().ok_or("no bot token")?;
            body["channel"] = m.recipient.clone().into();
            let url = format!(
                "{}/chat.postMessage",
                self.settings.api_url.trim_end_matches('/')
            );
            let auth = format!("Bearer {}", token.expose());
            (url, vec![("authorization", auth)])
        };
        let target = Target::parse(&url, &self.internal_suffixes)?;
        let post = Post {
            target: &target,
            content_type: "application/json; charset=utf-8",
            headers,
            body: body.to_string(),
        };
        let answer = http::post(self.egress.as_ref(), post, timeout).await?;
        Ok(judge(answer.status, &answer.body))
    }
}

/// Slack's answer: the Web API says `{"ok": true, "ts"}` (or `ok: false` with an `error`
/// code, even with status 200); an incoming webhook answers `ok` with 200.
fn judge(status: u16, body: &[u8]) -> Sent {
    if !(200..300).contains(&status) {
        return Sent::Refused {
            status: Some(status),
            error: format!("HTTP {status}"),
        };
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Sent::Accepted {
            status,
            reference: None,
        };
    };
    if v["ok"] == Value::Bool(true) {
        Sent::Accepted {
            status,
            reference: v["ts"].as_str().map(str::to_owned),
        }
    } else {
        let code: String = v["error"]
            .as_str()
            .unwrap_or("not ok")
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(80)
            .collect();
        Sent::Refused {
            status: Some(status),
            error: format!("slack: {code}"),
        }
    }
}

impl Channel for SlackChannel {
    fn kind(&self) -> Kind {
        Kind::Slack
    }

    /// A pending card becomes a DM to its user (bot token and a Slack id set) and a post to
    /// the incoming webhook's channel (when one is set). The stored payload is the webhook
    /// body without any secret; the blocks are built when sending.
    fn messages(&self, event: &OutboxEvent) -> Vec<ChannelMessage> {
        if event.kind != "approval.requested" {
            return Vec::new();
        }
        let Some(payload) = webhooks::payload(event, self.public_url.as_deref()) else {
            return Vec::new();
        };
        let dm = self
            .settings
            .bot_token
            .as_ref()
            .and(event.contacts.slack_user_id.clone());
        let channel = self
            .settings
            .webhook_url
            .as_ref()
            .map(|_| WEBHOOK_RECIPIENT.to_owned());
        dm.into_iter()
            .chain(channel)
            .map(|recipient| ChannelMessage {
                channel: Kind::Slack,
                recipient,
                payload: payload.clone(),
            })
            .collect()
    }

    fn send<'a>(&'a self, m: &'a ChannelDue, timeout: Duration) -> BoxFuture<'a, Sent> {
        Box::pin(async move { self.post(m, timeout).await.unwrap_or_else(Sent::error) })
    }
}

/// Replaces (or, for a refusal, answers beside) the clicked message through the click's
/// `response_url`, vetted like any egress. Best effort: the decision is already made; a
/// failure is logged.
pub async fn respond(
    egress: &dyn Egress,
    internal_suffixes: &[Host],
    response_url: &str,
    message: Value,
    timeout: Duration,
) {
    let sent = async {
        let target = Target::parse(response_url, internal_suffixes)?;
        let post = Post {
            target: &target,
            content_type: "application/json; charset=utf-8",
            headers: Vec::new(),
            body: message.to_string(),
        };
        let answer = http::post(egress, post, timeout).await?;
        match answer.status {
            200..=299 => Ok(()),
            s => Err(format!("HTTP {s}")),
        }
    };
    if let Err(e) = sent.await {
        tracing::warn!(error = %e, "could not answer a Slack click through its response_url");
    }
}

/// The message that answers a click without replacing the card (only the clicker sees it).
pub fn ephemeral(text: &str) -> Value {
    json!({"response_type": "ephemeral", "replace_original": false, "text": text})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slacks_answers_are_judged_by_ok_not_only_the_status() {
        let ok = judge(200, br#"{"ok":true,"channel":"D1","ts":"1.2"}"#);
        assert_eq!(
            ok,
            Sent::Accepted {
                status: 200,
                reference: Some("1.2".into())
            }
        );
        assert!(matches!(judge(200, b"ok"), Sent::Accepted { .. }));
        let not = judge(200, br#"{"ok":false,"error":"channel_not_found"}"#);
        assert!(matches!(not, Sent::Refused { error, .. } if error == "slack: channel_not_found"));
        assert!(matches!(
            judge(429, b""),
            Sent::Refused {
                status: Some(429),
                ..
            }
        ));
    }
}
