//! Reaching the person outside the API: the outbox worker that turns the event log into
//! deliveries and sends them ([`outbox`]), its first consumer, signed webhooks
//! ([`webhooks`]), and the channels that reach one person directly ([`channel`]: team chat,
//! and e-mail through an SMTP relay, [`email`]), which read the same outbox.

pub mod channel;
pub mod email;
pub mod http;
pub mod outbox;
pub mod slack;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use egressgate_store::Host;
use egressgate_store::ca::SealKey;
use futures_util::future::BoxFuture;

/// A byte stream to a receiver (TLS already set up for `https`).
pub trait Conn: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Conn for T {}

/// The way out for webhook deliveries, vetted like any egress of the sandbox: the binary
/// gives the proxy's own resolver and address rules (no internal address unless
/// `--allow-cidr` allows it, never the gate's own listeners), so the control plane cannot be
/// used to reach what the proxy would refuse.
pub trait Egress: Send + Sync {
    /// Resolves `host` and checks every answer; the error says why not, for the caller.
    fn vet<'a>(&'a self, host: &'a Host, port: u16) -> BoxFuture<'a, Result<(), String>>;
    /// Connects to a vetted address of `host` (with TLS, verifying its certificate, when
    /// `tls`).
    fn connect<'a>(
        &'a self,
        host: &'a Host,
        port: u16,
        tls: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Conn>, String>>;
}

/// How the outbox delivers: webhooks, and the channels' messages with the same limits.
#[derive(Clone)]
pub struct WebhookSettings {
    /// One attempt's limit: connect, send, and the answer's head (`--webhook-timeout`).
    pub timeout: Duration,
    /// The wait before the second attempt; doubled for each further one, at most an hour,
    /// less a random part of up to a half (`--webhook-backoff`).
    pub backoff: Duration,
    /// Attempts before a delivery is `failed` (`--webhook-max-attempts`).
    pub max_attempts: u32,
    /// Where people reach the control plane, when set (`--control-public-url`): payloads
    /// then carry `card_url`.
    pub public_url: Option<String>,
    /// Seals the signing secrets (and kept resume links) in the database.
    pub seal: Option<SealKey>,
    /// The way out; `None` (tests of the API alone): nothing is resolved or sent.
    pub egress: Option<Arc<dyn Egress>>,
    /// The configured channels (Slack, e-mail); their messages share the limits above.
    pub channels: Vec<Arc<dyn channel::Channel>>,
}

impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("timeout", &self.timeout)
            .field("backoff", &self.backoff)
            .field("max_attempts", &self.max_attempts)
            .field("public_url", &self.public_url)
            .field(
                "channels",
                &self.channels.iter().map(|c| c.kind()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            backoff: Duration::from_secs(10),
            max_attempts: 10,
            public_url: None,
            seal: None,
            egress: None,
            channels: Vec::new(),
        }
    }
}

/// A configured secret (a signing secret, a bot token, a webhook URL that embeds one): shown
/// as `..` by `Debug`, so printing the settings never prints it.
#[derive(Clone)]
pub struct Confidential(String);

impl Confidential {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Confidential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Confidential(..)")
    }
}

/// The sealing context of an endpoint's signing secret (it opens only for that endpoint).
pub(crate) fn secret_context(id: &str) -> String {
    format!("egressgate webhook {id}")
}

/// The sealing context of a card's kept resume secret.
pub(crate) fn link_context(interrupt_id: &str) -> String {
    format!("egressgate resume-link {interrupt_id}")
}

/// Keeps a new card's resume secret, sealed, for endpoints created with `include_link` (only
/// while one exists), before the card is registered: by the time its event is fanned out the
/// link is there. Best effort: a card is never refused for it; the webhook then carries the
/// plain `card_url`.
pub(crate) async fn keep_link(
    store: &egressgate_store::Store,
    settings: &WebhookSettings,
    id: &egressgate_store::InterruptId,
    secret: &egressgate_store::Secret,
    purge_at: egressgate_store::Timestamp,
) {
    let Some(seal) = &settings.seal else {
        return;
    };
    match store.any_webhook_with_link().await {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            tracing::warn!(error = %e, "could not check for webhooks wanting links");
            return;
        }
    }
    let kept = match seal.seal_for(&link_context(id.as_str()), secret.expose()) {
        Ok(sealed) => store.put_resume_link(id.as_str(), &sealed, purge_at).await,
        Err(e) => {
            tracing::warn!(error = %e, "could not seal a resume link");
            return;
        }
    };
    if let Err(e) = kept {
        tracing::warn!(error = %e, "could not keep a resume link for webhooks");
    }
}
