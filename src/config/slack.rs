//! The Slack front end's settings: the secrets kept out of every printout, and the URLs
//! checked as egress targets are (http or https, a host name, nothing internal-looking).
//! Errors never quote the webhook URL, which embeds a secret.

use anyhow::{Result, anyhow};
use egressgate_control::notify::Confidential;
use egressgate_control::notify::http::Target;
use egressgate_control::notify::slack::{DEFAULT_API_URL, SlackSettings};
use egressgate_store::Host;

use super::raw::RawConfig;

/// `--slack-*`.
pub(super) fn settings(raw: &RawConfig, internal: &[Host]) -> Result<SlackSettings> {
    let l = |key: &str| raw.sources.label(key);
    if let Some(url) = &raw.slack_webhook_url {
        Target::parse(url, internal).map_err(|_| {
            anyhow!(
                "{}: expected an http(s) URL of a named host, such as Slack's \
                 https://hooks.slack.com/services/…",
                l("slack-webhook-url")
            )
        })?;
    }
    let api_url = raw
        .slack_api_url
        .as_deref()
        .unwrap_or(DEFAULT_API_URL)
        .trim_end_matches('/')
        .to_owned();
    Target::parse(&format!("{api_url}/chat.postMessage"), internal)
        .map_err(|e| anyhow!("{} {api_url:?}: {e}", l("slack-api-url")))?;
    let secret = |v: &Option<String>, key: &str| -> Result<Option<Confidential>> {
        match v.as_deref().map(str::trim) {
            Some("") => Err(anyhow!("{} is empty", l(key))),
            Some(s) => Ok(Some(Confidential::new(s))),
            None => Ok(None),
        }
    };
    Ok(SlackSettings {
        signing_secret: secret(&raw.slack_signing_secret, "slack-signing-secret")?,
        webhook_url: raw.slack_webhook_url.clone().map(Confidential::new),
        bot_token: secret(&raw.slack_bot_token, "slack-bot-token")?,
        api_url,
    })
}
