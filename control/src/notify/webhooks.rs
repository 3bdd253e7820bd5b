//! Signed webhooks per the Standard Webhooks specification: the target URL checked, the body
//! built from an event (never a resume secret unless the endpoint asked for the link), the
//! `webhook-id` / `webhook-timestamp` / `webhook-signature` headers, and one POST with a
//! timeout over the vetted way out ([`super::http`]).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use egressgate_store::db::outbox::OutboxEvent;
use hmac::{KeyInit as _, Mac as _};
use serde_json::{Value, json};

use super::Egress;
use super::channel::Sent;
use super::http::{self, Post, Target};
use crate::links;

type HmacSha256 = hmac::Hmac<sha2_hmac::Sha256>;

/// The event types an endpoint may ask for.
pub const EVENT_TYPES: [&str; 4] = [
    "approval.requested",
    "approval.resolved",
    "approval.expired",
    "approval.revoked",
];

/// What starts a signing secret's text (then base64 of its random bytes).
pub const SECRET_PREFIX: &str = "whsec_";

/// A fresh signing secret: `whsec_` + base64 of 32 random bytes.
pub fn new_secret() -> String {
    let mut key = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed with the base64-decoded part
/// of `secret` after `whsec_`; `None` for a secret that is not so.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    let mut mac = HmacSha256::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The body of an event's webhook (`{"type", "timestamp", "data"}`), or `None` for events
/// that are not webhooks (`refusal.recorded`). `data` names the user and chat and, for a
/// request, the card, its expiry and `card_url` (without the secret) when `public_url` is set.
pub fn payload(event: &OutboxEvent, public_url: Option<&str>) -> Option<Value> {
    if !EVENT_TYPES.contains(&event.kind.as_str()) {
        return None;
    }
    let mut data = event.data.clone();
    let obj = data.as_object_mut()?;
    obj.remove("audit_kind");
    obj.remove("draft_id");
    obj.insert("user_id".into(), event.user.clone().into());
    obj.insert("chat_id".into(), event.chat.clone().into());
    if event.kind == "approval.requested" {
        if let Some(card) = &event.card {
            obj.insert("card".into(), card.clone());
        }
        if let (Some(base), Some(id)) =
            (public_url, obj.get("interrupt_id").and_then(Value::as_str))
        {
            obj.insert("card_url".into(), links::card_page(base, id).into());
        }
    }
    Some(json!({"type": event.kind, "timestamp": event.at, "data": data}))
}

/// The body with the card's resume secret in `card_url`'s fragment (the card page reads it
/// there; a fragment is never sent to a server), for endpoints created with `include_link`.
pub fn with_link(payload: &str, secret: &str) -> Option<String> {
    let mut v: Value = serde_json::from_str(payload).ok()?;
    let url = v["data"]["card_url"].as_str()?.to_owned();
    v["data"]["card_url"] = links::with_secret(&url, secret).into();
    Some(v.to_string())
}

/// POSTs `body` to `target`, signed, within `timeout`.
pub async fn post(
    egress: &dyn Egress,
    target: &Target,
    signing_secret: &str,
    id: &str,
    body: String,
    timeout: Duration,
) -> Sent {
    let timestamp = egressgate_store::Timestamp::now().millis() / 1000;
    let Some(sig) = signature(signing_secret, id, timestamp, body.as_bytes()) else {
        return Sent::error("the stored signing secret is malformed");
    };
    let post = Post {
        target,
        content_type: "application/json",
        headers: vec![
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", sig),
        ],
        body,
    };
    match http::post(egress, post, timeout).await {
        Err(e) => Sent::error(e),
        Ok(a) if (200..300).contains(&a.status) => Sent::Accepted {
            status: a.status,
            reference: None,
        },
        Ok(a) => Sent::Refused {
            status: Some(a.status),
            error: format!("HTTP {}", a.status),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_specs_own_example() {
        // The Standard Webhooks specification's test vector.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        assert!(signature("MfKQ9r8", "m", 1, body).is_none());
    }

    #[test]
    fn a_link_goes_only_into_the_fragment() {
        let body =
            r#"{"type":"approval.requested","data":{"card_url":"https://g/ui/cards/int_1"}}"#;
        let linked = with_link(body, "s3cret").unwrap_or_default();
        assert!(linked.contains(r#""card_url":"https://g/ui/cards/int_1#secret=s3cret""#));
        assert!(with_link(r#"{"data":{}}"#, "s3cret").is_none());
    }
}
