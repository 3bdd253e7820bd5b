//! How the deployment talks to Slack, apart from the channel that uses it, so the control's
//! settings can hold it without importing the Slack front end.

use crate::notify::Confidential;

/// Slack's own Web API base, the default of `--slack-api-url`.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

/// How the deployment talks to Slack. Secrets print as `..` in `Debug`.
#[derive(Clone, Debug)]
pub struct SlackSettings {
    /// The app's signing secret (`--slack-signing-secret`): without it, interactions are
    /// refused (`404`), since none could be verified.
    pub signing_secret: Option<Confidential>,
    /// An incoming webhook URL (`--slack-webhook-url`): each card is posted to its channel.
    pub webhook_url: Option<Confidential>,
    /// The bot token (`--slack-bot-token`): each card is sent to its user's Slack id as a DM.
    pub bot_token: Option<Confidential>,
    /// The Web API base (`--slack-api-url`).
    pub api_url: String,
}

impl Default for SlackSettings {
    fn default() -> Self {
        Self {
            signing_secret: None,
            webhook_url: None,
            bot_token: None,
            api_url: DEFAULT_API_URL.to_owned(),
        }
    }
}

impl SlackSettings {
    /// Whether cards are posted at all.
    pub fn posts(&self) -> bool {
        self.webhook_url.is_some() || self.bot_token.is_some()
    }
}
