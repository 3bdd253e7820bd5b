//! E-mail of pending cards: `--smtp-url` and `--smtp-from` (both or neither), `--smtp-ca`,
//! and the relay's login from the environment only
//! (`EGRESSGATE_SMTP_USERNAME`, `EGRESSGATE_SMTP_PASSWORD`): never a flag, never the file,
//! never printed.

use anyhow::{Context as _, Result, anyhow, bail};
use std::sync::Arc;

use egressgate_control::notify::channel::Channel;
use egressgate_control::notify::email::{
    EmailChannel, EmailConfigError, EmailSettings, SmtpCredentials, SmtpRelay,
};

use super::raw::RawConfig;

/// The relay's login name.
pub const USERNAME_ENV: &str = "EGRESSGATE_SMTP_USERNAME";
/// The relay's password.
pub const PASSWORD_ENV: &str = "EGRESSGATE_SMTP_PASSWORD";

/// The e-mail channel, with card links under `public_url`, or `None` when `--smtp-url` is not
/// set (no message is sent).
pub(super) fn channel(
    raw: &RawConfig,
    public_url: Option<String>,
) -> Result<Option<Arc<dyn Channel>>> {
    Ok(settings(raw)?.map(|s| Arc::new(EmailChannel::new(s, public_url)) as Arc<dyn Channel>))
}

/// The e-mail settings, or `None` when `--smtp-url` is not set.
fn settings(raw: &RawConfig) -> Result<Option<EmailSettings>> {
    let l = |key: &str| raw.sources.label(key);
    let credentials = credentials()?;
    let (url, from) = match (&raw.smtp_url, &raw.smtp_from) {
        (None, None) => {
            if credentials.is_some() {
                bail!("{USERNAME_ENV} is set but {} is not", l("smtp-url"));
            }
            return Ok(None);
        }
        (Some(u), Some(f)) => (u, f),
        (Some(_), None) => bail!("{} needs {} (the sender)", l("smtp-url"), l("smtp-from")),
        (None, Some(_)) => bail!("{} needs {} (the relay)", l("smtp-from"), l("smtp-url")),
    };
    let relay = SmtpRelay::parse(url).map_err(|e| anyhow!("{}: {e}", l("smtp-url")))?;
    let ca = raw
        .smtp_ca
        .as_ref()
        .map(|p| std::fs::read(p).with_context(|| format!("{} {}", l("smtp-ca"), p.display())))
        .transpose()?;
    EmailSettings::new(relay, from, credentials, ca.as_deref())
        .map(Some)
        .map_err(|e| match e {
            EmailConfigError::Url(m) | EmailConfigError::Credentials(m) => {
                anyhow!("{}: {m}", l("smtp-url"))
            }
            EmailConfigError::From(m) => anyhow!("{} {from:?}: {m}", l("smtp-from")),
            EmailConfigError::Ca(m) => anyhow!("{}: {m}", l("smtp-ca")),
        })
}

/// The login from the environment: both variables or neither.
fn credentials() -> Result<Option<SmtpCredentials>> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var(USERNAME_ENV), var(PASSWORD_ENV)) {
        (None, None) => Ok(None),
        (Some(u), Some(p)) => Ok(Some(SmtpCredentials::new(u, p))),
        (Some(_), None) => bail!("{USERNAME_ENV} is set without {PASSWORD_ENV}"),
        (None, Some(_)) => bail!("{PASSWORD_ENV} is set without {USERNAME_ENV}"),
    }
}
