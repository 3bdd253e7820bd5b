//! A pending card as an e-mail: a subject naming its sites and packages, and the same text as
//! plain text and as HTML (minijinja templates compiled into the binary; everything the HTML
//! one prints is escaped, so a card's words can never become markup). The card's link has no secret:
//! the message can show the card and say where to answer it, never answer it.

use std::sync::LazyLock;

use egressgate_store::Card;
use egressgate_store::card::Evidence;
use egressgate_store::db::outbox::OutboxEvent;
use minijinja::{AutoEscape, Environment, Value, context};
use serde::{Deserialize, Serialize};

use crate::links;

/// Names listed in a subject before "and N more".
const SUBJECT_NAMES: usize = 3;

/// One message's parts, as stored with its delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mail {
    /// The `Subject:` (one line).
    pub subject: String,
    /// The `text/plain` part.
    pub text: String,
    /// The `text/html` part.
    pub html: String,
}

static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_formatter(|out, state, value| match value.as_str() {
        Some(text) if matches!(state.auto_escape(), AutoEscape::Html) && !value.is_safe() => {
            Ok(out.write_str(&escape_html(text))?)
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    for (name, text) in [
        ("card.txt", include_str!("templates/card.txt")),
        ("card.html", include_str!("templates/card.html")),
    ] {
        if let Err(e) = env.add_template(name, text) {
            tracing::error!(error = %e, template = name, "mail template does not compile");
        }
    }
    env
});

/// The message of an `approval.requested` event whose card is still stored, or `None` for any
/// other event. `public_url` (`--control-public-url`) gives the card's link (without its
/// secret); without it the message says where to open the card instead.
pub fn compose(event: &OutboxEvent, public_url: Option<&str>) -> Option<Mail> {
    if event.kind != "approval.requested" {
        return None;
    }
    let card: Card = serde_json::from_value(event.card.clone()?).ok()?;
    let interrupt_id = event.data["interrupt_id"].as_str()?;
    let subject = subject(&card);
    let ctx = context! {
        subject => subject.clone(),
        chat => one_line(&event.chat),
        question => card.message(),
        reason => one_line(&card.reason),
        sites => card.sites.clone(),
        urls => card.urls.clone(),
        packages => card.packages.clone(),
        evidence => card.evidence.iter().map(evidence).collect::<Vec<_>>(),
        card_url => public_url.map(|base| links::card_page(base, interrupt_id)),
        expires_at => event.data["expires_at"].as_str().unwrap_or("its deadline").to_owned(),
    };
    let render = |name: &str| {
        TEMPLATES
            .get_template(name)
            .and_then(|t| t.render(&ctx))
            .map_err(|e| tracing::error!(error = %e, template = name, "mail not rendered"))
            .ok()
    };
    Some(Mail {
        subject,
        text: render("card.txt")?,
        html: render("card.html")?,
    })
}

/// `Approval needed: a, b and c` (at most [`SUBJECT_NAMES`] names, then how many more).
fn subject(card: &Card) -> String {
    let names: Vec<&String> = card.sites.iter().chain(&card.packages).collect();
    let mut shown: Vec<String> = names
        .iter()
        .take(SUBJECT_NAMES)
        .map(|n| one_line(n))
        .collect();
    if names.len() > SUBJECT_NAMES {
        shown.push(format!("{} more", names.len() - SUBJECT_NAMES));
    }
    format!(
        "Approval needed: {}",
        egressgate_store::card::join_words(&shown)
    )
}

/// One evidence line: what was tried, and what became of it.
fn evidence(e: &Evidence) -> Value {
    let place = e
        .url
        .clone()
        .unwrap_or_else(|| format!("{}:{}", e.host, e.port));
    let mut what = match &e.method {
        Some(m) => format!("{m} {place}"),
        None => place,
    };
    if let Some(p) = &e.package {
        what.push_str(&format!(" (package {p})"));
    }
    let outcome = if !e.tried {
        "named by the agent, never tried".to_owned()
    } else {
        let n = if e.count == 1 {
            "once".to_owned()
        } else {
            format!("{} times", e.count)
        };
        match &e.reason {
            Some(r) => format!("refused {n} ({r})"),
            None => format!("refused {n}"),
        }
    };
    context! {
        what => one_line(&what),
        outcome => outcome,
        upload => e.upload,
        command => e.command.as_deref().map(one_line),
    }
}

/// `text` safe anywhere in HTML text or a quoted attribute: `& < > " '` as entities (and
/// nothing else, so a link reads as a link in the source of the message too).
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` with every control character (a line break in a header would start a new one)
/// replaced by a space.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests;
