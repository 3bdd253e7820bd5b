//! E-mail of pending cards through the operator's SMTP relay: the relay as configured
//! (`--smtp-url`, `--smtp-from`, credentials only from the environment), one message sent
//! per delivery over lettre (tokio, rustls), and the outbox channel that does both
//! ([`EmailChannel`]). The Message-ID is derived from the delivery's
//! id, so every retry of a delivery is the same message to a relay or mailbox that
//! de-duplicates.

mod channel;
pub mod message;

use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor};

pub use channel::EmailChannel;
pub use message::Mail;

/// What is wrong with the e-mail settings (the binary refuses to start with it, naming the
/// setting as the operator wrote it).
#[derive(Debug, thiserror::Error)]
pub enum EmailConfigError {
    /// The relay URL does not parse or says something not supported.
    #[error("{0}")]
    Url(String),
    /// The sender is not a mailbox.
    #[error("{0}")]
    From(String),
    /// The password would travel unencrypted.
    #[error("{0}")]
    Credentials(String),
    /// A CA certificate for the relay does not parse.
    #[error("{0}")]
    Ca(String),
}

/// How the connection to the relay is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpTls {
    /// TLS from the first byte (`smtps://`, port 465 by default).
    Implicit,
    /// Plain SMTP upgraded with STARTTLS, which the relay must offer: nothing is sent
    /// before the upgrade (`smtp://`, the default, port 587 by default).
    StartTls,
    /// No encryption at all (`smtp://…?tls=none`, port 25 by default): for a relay on the same
    /// host or network only; credentials are refused with it.
    None,
}

/// The relay: host, port, and how the connection is protected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmtpRelay {
    /// Host name (checked against the relay's certificate) or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Protection of the connection.
    pub tls: SmtpTls,
}

impl SmtpRelay {
    /// Parses `smtp://HOST[:PORT][?tls=starttls|none]` or `smtps://HOST[:PORT]`. Credentials in
    /// the URL are refused (they come from the environment), and so is opportunistic STARTTLS
    /// (an attacker on the path could strip it).
    pub fn parse(text: &str) -> Result<Self, EmailConfigError> {
        let bad = |m: &str| EmailConfigError::Url(m.to_owned());
        let url = url::Url::parse(text).map_err(|e| bad(&format!("not a URL ({e})")))?;
        if !matches!(url.scheme(), "smtp" | "smtps") {
            return Err(bad(&format!(
                "the scheme must be smtp or smtps, not {}",
                url.scheme()
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "credentials are not accepted in the URL; set EGRESSGATE_SMTP_USERNAME and \
                 EGRESSGATE_SMTP_PASSWORD in the environment",
            ));
        }
        if !matches!(url.path(), "" | "/") || url.fragment().is_some() {
            return Err(bad("only scheme, host, port and ?tls= are read"));
        }
        let mut tls_param = None;
        for (k, v) in url.query_pairs() {
            match (k.as_ref(), tls_param) {
                ("tls", None) => tls_param = Some(v.into_owned()),
                _ => return Err(bad(&format!("unknown or repeated parameter {k}"))),
            }
        }
        let tls = match (url.scheme(), tls_param.as_deref()) {
            ("smtps", None | Some("implicit")) => SmtpTls::Implicit,
            ("smtp", None | Some("starttls" | "required")) => SmtpTls::StartTls,
            ("smtp", Some("none")) => SmtpTls::None,
            ("smtp", Some("opportunistic")) => {
                return Err(bad(
                    "opportunistic STARTTLS can be stripped on the path; use tls=starttls, or \
                     tls=none for a relay on this host",
                ));
            }
            ("smtp" | "smtps", Some(other)) => {
                return Err(bad(&format!(
                    "tls={other} is not one of starttls, none (smtp://) or implicit (smtps://)"
                )));
            }
            (s, _) => return Err(bad(&format!("the scheme must be smtp or smtps, not {s}"))),
        };
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_owned(),
            Some(url::Host::Ipv4(a)) => a.to_string(),
            Some(url::Host::Ipv6(a)) => a.to_string(),
            None => return Err(bad("no host")),
        };
        let port = url.port().unwrap_or(match tls {
            SmtpTls::Implicit => 465,
            SmtpTls::StartTls => 587,
            SmtpTls::None => 25,
        });
        Ok(Self { host, port, tls })
    }
}

/// The relay's login, from the environment only. `Debug` never shows the password.
#[derive(Clone)]
pub struct SmtpCredentials {
    username: String,
    password: String,
}

impl SmtpCredentials {
    /// A login; both parts are needed.
    pub fn new(username: String, password: String) -> Self {
        Self { username, password }
    }
}

impl std::fmt::Debug for SmtpCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpCredentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Everything sending a card's message needs, checked once at start. `Debug` shows the
/// relay, the sender and the login name, never the password.
#[derive(Clone)]
pub struct EmailSettings {
    /// Where messages go first.
    pub relay: SmtpRelay,
    /// The `From:` mailbox (`--smtp-from`); its domain also names the Message-IDs.
    pub from: Mailbox,
    credentials: Option<SmtpCredentials>,
    tls: Tls,
}

impl std::fmt::Debug for EmailSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSettings")
            .field("relay", &self.relay)
            .field("from", &self.from.to_string())
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl EmailSettings {
    /// Checks the settings together: `from` parses as a mailbox, credentials only with TLS,
    /// and the relay's certificate verified against the system roots plus `extra_ca_pem`
    /// (PEM text of further CA certificates, e.g. a private relay's).
    pub fn new(
        relay: SmtpRelay,
        from: &str,
        credentials: Option<SmtpCredentials>,
        extra_ca_pem: Option<&[u8]>,
    ) -> Result<Self, EmailConfigError> {
        let from: Mailbox = from
            .parse()
            .map_err(|e| EmailConfigError::From(format!("not a mailbox ({e})")))?;
        let tls = match relay.tls {
            SmtpTls::None if credentials.is_some() => {
                return Err(EmailConfigError::Credentials(
                    "the SMTP password would travel unencrypted with tls=none: use smtps:// \
                     or STARTTLS, or unset EGRESSGATE_SMTP_USERNAME and \
                     EGRESSGATE_SMTP_PASSWORD"
                        .into(),
                ));
            }
            SmtpTls::None => Tls::None,
            SmtpTls::Implicit => Tls::Wrapper(tls_parameters(&relay.host, extra_ca_pem)?),
            SmtpTls::StartTls => Tls::Required(tls_parameters(&relay.host, extra_ca_pem)?),
        };
        Ok(Self {
            relay,
            from,
            credentials,
            tls,
        })
    }

    /// The Message-ID of delivery `id`: the same on every attempt.
    pub fn message_id(&self, id: &str) -> String {
        format!("<{id}@{}>", self.from.email.domain())
    }

    fn transport(&self, timeout: Duration) -> AsyncSmtpTransport<Tokio1Executor> {
        let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&self.relay.host)
            .port(self.relay.port)
            .tls(self.tls.clone())
            .timeout(Some(timeout));
        if let Some(c) = &self.credentials {
            b = b.credentials(Credentials::new(c.username.clone(), c.password.clone()));
        }
        b.build()
    }
}

/// The relay's certificate is checked against the system roots and every certificate of
/// `extra` (PEM).
fn tls_parameters(host: &str, extra: Option<&[u8]>) -> Result<TlsParameters, EmailConfigError> {
    let mut b =
        TlsParameters::builder(host.to_owned()).certificate_store(CertificateStore::Default);
    if let Some(mut pem) = extra {
        let certs = rustls_pemfile::certs(&mut pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EmailConfigError::Ca(e.to_string()))?;
        if certs.is_empty() {
            return Err(EmailConfigError::Ca("no PEM certificate in it".into()));
        }
        for der in certs {
            let cert = Certificate::from_der(der.to_vec())
                .map_err(|e| EmailConfigError::Ca(e.to_string()))?;
            b = b.add_root_certificate(cert);
        }
    }
    b.build_rustls()
        .map_err(|e| EmailConfigError::Ca(format!("TLS set-up: {e}")))
}

/// Sends `mail` to `to` as delivery `id`, all of it (connect, TLS, login, the transaction)
/// within `timeout`: the outbox's lease on the delivery is that long, so no other process
/// takes it meanwhile. The error says why not (with the relay's answer, when one came); every
/// failure is retried by the outbox, a 5xx refusal too (a mailbox that was full or unknown
/// may be fixed before the bound).
pub async fn send(
    settings: &EmailSettings,
    to: &str,
    id: &str,
    mail: &Mail,
    timeout: Duration,
) -> Result<(), String> {
    let message = build(settings, to, id, mail)?;
    let transport = settings.transport(timeout);
    match tokio::time::timeout(timeout, transport.send(message)).await {
        Err(_) => Err(format!("timed out after {timeout:?}")),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(describe(&e)),
    }
}

/// The message with its headers: From, To, Subject, the stable Message-ID, and text and
/// HTML alternatives.
pub fn build(settings: &EmailSettings, to: &str, id: &str, mail: &Mail) -> Result<Message, String> {
    let to: Mailbox = to
        .parse()
        .map_err(|e| format!("the recipient is not an address ({e})"))?;
    Message::builder()
        .from(settings.from.clone())
        .to(to)
        .subject(mail.subject.clone())
        .message_id(Some(settings.message_id(id)))
        .multipart(MultiPart::alternative_plain_html(
            mail.text.clone(),
            mail.html.clone(),
        ))
        .map_err(|e| format!("the message could not be built ({e})"))
}

/// The error's text with its sources (lettre's own text is terse: "Connection error").
fn describe(e: &lettre::transport::smtp::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests;
