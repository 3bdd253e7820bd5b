//! The Block Kit messages: a pending card (the question, the agent's reason, sites, packages,
//! the proxy's evidence, Approve / Deny and the narrowing choices the card page offers) and
//! the message that replaces it once answered. The buttons carry only the card's id, never
//! its resume secret; a click is judged on the server like the card page's.

use egressgate_store::card::Card;
use egressgate_store::db::interrupts::{Decision, Outcome};
use serde_json::{Value, json};

/// Evidence lines shown (the card page has the rest).
const EVIDENCE_SHOWN: usize = 5;

/// One button of the card: how the person answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Approve as the card asks (this chat).
    Approve,
    /// Approve for this message (turn) only.
    ThisMessage,
    /// Approve one connection per site.
    Once,
    /// Approve for all the user's chats (only where `--allow-user-scope`).
    AllChats,
    /// Approve downloads only (only where every site is inspected).
    DownloadsOnly,
    /// Deny.
    Deny,
}

impl Choice {
    const ALL: [Self; 6] = [
        Self::Approve,
        Self::ThisMessage,
        Self::Once,
        Self::AllChats,
        Self::DownloadsOnly,
        Self::Deny,
    ];

    /// The button's `action_id`.
    pub fn action_id(self) -> &'static str {
        match self {
            Self::Approve => "egressgate.approve",
            Self::ThisMessage => "egressgate.approve_turn",
            Self::Once => "egressgate.approve_once",
            Self::AllChats => "egressgate.approve_user",
            Self::DownloadsOnly => "egressgate.approve_read",
            Self::Deny => "egressgate.deny",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Approve => "Approve",
            Self::ThisMessage => "Approve for this message",
            Self::Once => "Approve once",
            Self::AllChats => "Approve for all my chats",
            Self::DownloadsOnly => "Approve downloads only",
            Self::Deny => "Deny",
        }
    }

    /// The choice a clicked `action_id` names.
    pub fn parse(action_id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.action_id() == action_id)
    }

    /// The resume entry's payload for this choice (status is always `resolved`): the server
    /// still judges it (`decide`), so a forged button widens nothing.
    pub fn payload(self) -> Value {
        match self {
            Self::Approve => json!({"approved": true}),
            Self::ThisMessage => json!({"approved": true, "scope": "turn"}),
            Self::Once => json!({"approved": true, "max_uses": 1}),
            Self::AllChats => json!({"approved": true, "scope": "user"}),
            Self::DownloadsOnly => json!({"approved": true, "access": "read"}),
            Self::Deny => json!({"approved": false}),
        }
    }
}

/// Which narrowing (or widening) buttons this deployment can keep for a card.
#[derive(Clone, Copy, Debug, Default)]
pub struct Choices {
    /// `--allow-user-scope`.
    pub user_scope: bool,
    /// Every site of the card is inspected, so `read` would be kept.
    pub read: bool,
}

/// A pending card as the outbox stored it (the webhook body of `approval.requested`).
#[derive(Debug)]
pub struct CardMessage {
    /// The card's id, which every button carries.
    pub interrupt_id: String,
    /// The card.
    pub card: Card,
    /// When it stops being answerable (RFC 3339).
    pub expires_at: String,
    /// The card page without its secret, when `--control-public-url` is set.
    pub card_url: Option<String>,
}

impl CardMessage {
    /// Reads the stored body; the error names what is missing.
    pub fn from_event(event: &Value) -> Result<Self, String> {
        let data = &event["data"];
        let interrupt_id = data["interrupt_id"]
            .as_str()
            .ok_or("message without interrupt_id")?
            .to_owned();
        let card = serde_json::from_value(data["card"].clone())
            .map_err(|_| "message without a readable card")?;
        Ok(Self {
            interrupt_id,
            card,
            expires_at: data["expires_at"].as_str().unwrap_or_default().to_owned(),
            card_url: data["card_url"].as_str().map(str::to_owned),
        })
    }

    /// The message: `text` (notifications, screen readers) and `blocks`.
    pub fn render(&self, choices: Choices) -> Value {
        let c = &self.card;
        let question = c.message();
        let mut blocks = vec![
            json!({"type": "header", "text": {"type": "plain_text", "text": "Approval needed"}}),
            section(&escape(&question)),
        ];
        if !c.reason.is_empty() {
            blocks.push(section(&format!(
                "*Why the agent asks:* {}",
                escape(&c.reason)
            )));
        }
        let mut fields = Vec::new();
        if !c.sites.is_empty() {
            fields.push(mrkdwn(&format!("*Sites*\n{}", code_list(&c.sites, "\n"))));
        }
        if !c.packages.is_empty() {
            fields.push(mrkdwn(&format!(
                "*Packages*\n{}",
                code_list(&c.packages, "\n")
            )));
        }
        if !fields.is_empty() {
            blocks.push(json!({"type": "section", "fields": fields}));
        }
        let evidence = evidence_lines(c);
        if !evidence.is_empty() {
            blocks.push(section(&format!(
                "*What the sandbox tried* (the proxy's record)\n{evidence}"
            )));
        }
        blocks.push(json!({
            "type": "actions",
            "block_id": format!("egressgate:{}", self.interrupt_id),
            "elements": self.buttons(choices),
        }));
        let mut context = format!("Expires {}", escape(&self.expires_at));
        if let Some(url) = &self.card_url {
            context.push_str(&format!(" · <{url}|Open the card>"));
        }
        blocks.push(json!({"type": "context", "elements": [mrkdwn(&context)]}));
        json!({"text": format!("Approval needed: {question}"), "blocks": blocks})
    }

    fn buttons(&self, choices: Choices) -> Vec<Value> {
        let has_sites = !self.card.sites.is_empty();
        Choice::ALL
            .into_iter()
            .filter(|c| match c {
                Choice::Once => has_sites,
                Choice::AllChats => choices.user_scope,
                Choice::DownloadsOnly => choices.read,
                _ => true,
            })
            .map(|c| {
                let mut b = json!({
                    "type": "button",
                    "action_id": c.action_id(),
                    "text": {"type": "plain_text", "text": c.label()},
                    "value": self.interrupt_id,
                });
                match c {
                    Choice::Approve => b["style"] = "primary".into(),
                    Choice::Deny => b["style"] = "danger".into(),
                    _ => {}
                }
                b
            })
            .collect()
    }
}

/// The message that replaces an answered card: what was decided, by whom, and what it opens.
pub fn answered(card: &Card, decision: &Decision, slack_user: &str, note: &str) -> Value {
    let what = match decision.outcome {
        Outcome::Approved => {
            let mut parts = Vec::new();
            if !decision.sites.is_empty() {
                parts.push(code_list(&decision.sites, ", "));
            }
            if !decision.packages.is_empty() {
                parts.push(code_list(&decision.packages, ", "));
            }
            let mut limits = vec![format!("for {}", scope_words(decision))];
            if let Some(n) = decision.max_uses {
                limits.push(format!("{n} connection(s) per site"));
            }
            if decision.access == egressgate_store::Access::Read {
                limits.push("downloads only".into());
            }
            format!(
                ":white_check_mark: *Approved* {} ({})",
                parts.join(" and "),
                limits.join(", ")
            )
        }
        Outcome::Declined | Outcome::Cancelled => ":no_entry: *Denied*".to_owned(),
    };
    let text = format!("{what} by <@{slack_user}>. {note}");
    json!({
        "replace_original": true,
        "text": text,
        "blocks": [
            section(&escape(&card.message())),
            section(&text),
        ],
    })
}

fn scope_words(d: &Decision) -> &'static str {
    match d.scope {
        egressgate_store::Scope::Turn => "this message",
        egressgate_store::Scope::Chat => "this chat",
        egressgate_store::Scope::User => "all their chats",
    }
}

fn evidence_lines(c: &Card) -> String {
    let tried: Vec<_> = c.evidence.iter().filter(|e| e.tried).collect();
    let mut lines: Vec<String> = tried
        .iter()
        .take(EVIDENCE_SHOWN)
        .map(|e| {
            let method = e.method.as_deref().unwrap_or("CONNECT");
            let port = e.port.to_string();
            let where_ = e
                .url
                .clone()
                .unwrap_or_else(|| format!("{}:{port}", e.host));
            let mut line = format!("• {method} `{}` ×{}", escape(&where_), e.count);
            if e.upload {
                line.push_str(" (sends data)");
            }
            if let Some(cmd) = &e.command {
                line.push_str(&format!(
                    " — command reported by the sandbox: `{}`",
                    escape(cmd)
                ));
            }
            line
        })
        .collect();
    if tried.len() > EVIDENCE_SHOWN {
        lines.push(format!(
            "…and {} more on the card",
            tried.len() - EVIDENCE_SHOWN
        ));
    }
    lines.join("\n")
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": mrkdwn(text)})
}

fn mrkdwn(text: &str) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

/// Each item escaped as code, joined by `sep`: one line each in a card's fields (`"\n"`),
/// a run in a sentence (`", "`).
fn code_list(items: &[String], sep: &str) -> String {
    items
        .iter()
        .map(|i| format!("`{}`", escape(i)))
        .collect::<Vec<_>>()
        .join(sep)
}

/// Slack's mrkdwn escaping: `&`, `<`, `>` (so a host, URL or reason cannot make a link or a
/// mention), and backticks (so it cannot close our code span).
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card_event() -> Value {
        json!({"type": "approval.requested", "data": {
            "interrupt_id": "int_1", "expires_at": "2030-01-01T00:00:00Z",
            "card": {"sites": ["files.example.com"], "urls": [], "packages": [],
                     "reason": "fetch <@here> data", "evidence": []}}})
    }

    #[test]
    fn buttons_carry_the_id_and_only_the_choices_kept() {
        let m = CardMessage::from_event(&card_event()).unwrap_or_else(|e| unreachable!("{e}"));
        let plain = m.render(Choices::default()).to_string();
        assert!(plain.contains("egressgate.approve_once") && plain.contains("egressgate.deny"));
        assert!(!plain.contains("approve_user") && !plain.contains("approve_read"));
        assert!(plain.contains("fetch &lt;@here&gt; data"), "{plain}");
        let all = m.render(Choices {
            user_scope: true,
            read: true,
        });
        let actions = all["blocks"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["type"] == "actions"))
            .cloned()
            .unwrap_or_default();
        let ids: Vec<&str> = actions["elements"]
            .as_array()
            .map(|e| e.iter().filter_map(|b| b["action_id"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(ids.len(), 6);
        assert!(
            actions["elements"]
                .as_array()
                .is_some_and(|e| e.iter().all(|b| b["value"] == "int_1"))
        );
        for id in ids {
            assert!(Choice::parse(id).is_some());
        }
    }
}
