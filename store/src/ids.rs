//! Identifiers and secrets: newtypes so a turn id can never be passed where a chat id belongs,
//! and a secret can never be printed by accident.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Longest caller-supplied id (user or chat) we accept: ids are keys, not documents.
pub const MAX_EXTERNAL_ID_LEN: usize = 200;

/// 128 random bits, base64url without padding: unguessable and safe inside URL userinfo.
fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

/// What every id newtype has: the struct (a `String` underneath, serialised as one), its
/// borrowed form, rebuilding from our own rows, and `Display`.
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Borrowed form for SQL binds and JSON.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Rebuilds an id read back from our own database row.
            pub fn from_db(s: String) -> Self {
                Self(s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// Server-minted ids are a prefix plus 128 random bits, so ids of different kinds never collide
/// and a leaked log line says what kind of thing it names.
macro_rules! minted_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        string_id!($(#[$doc])* $name);

        impl $name {
            /// A fresh random id.
            pub fn generate() -> Self {
                Self(format!(concat!($prefix, "{}"), random_token(16)))
            }

            /// Accepts an id read from outside; only the shape is checked (existence is the
            /// store's business), so a malformed id is simply "not found".
            pub fn parse(s: &str) -> Option<Self> {
                let rest = s.strip_prefix($prefix)?;
                (rest.len() == 22 && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
                    .then(|| Self(s.to_owned()))
            }
        }
    };
}

minted_id!(
    /// One agent run for one user message; owns the proxy credential.
    TurnId, "t_");
minted_id!(
    /// One pending approval request: the AG-UI interrupt id.
    InterruptId, "int_");
minted_id!(
    /// A server-computed card not yet registered as an interrupt; single use.
    DraftId, "dr_");
minted_id!(
    /// A person's inbox link (`POST /v1/users/{user_id}/inbox-link`): the public half of its
    /// secret, so the row is found by id and the secret compared in constant time.
    InboxLinkId, "inb_");
minted_id!(
    /// A webhook endpoint the administrator added.
    WebhookId, "wh_");
minted_id!(
    /// One webhook message (the Standard Webhooks `webhook-id`): the same on every attempt,
    /// so a receiver can de-duplicate.
    MessageId, "msg_");

/// Caller-named ids (users and chats) are opaque strings the runtime owns; we only bound them.
macro_rules! external_id {
    ($(#[$doc:meta])* $name:ident) => {
        string_id!($(#[$doc])* $name);

        impl $name {
            /// Accepts a non-empty id of at most [`MAX_EXTERNAL_ID_LEN`] bytes without control
            /// characters, so ids are safe in logs and headers.
            pub fn parse(s: &str) -> Option<Self> {
                (!s.is_empty() && s.len() <= MAX_EXTERNAL_ID_LEN && !s.chars().any(char::is_control))
                    .then(|| Self(s.to_owned()))
            }
        }
    };
}

external_id!(
    /// The person, as authenticated by the agent runtime.
    UserId);
external_id!(
    /// A conversation; only unique together with its [`UserId`].
    ChatId);

/// A bearer value handed out exactly once (turn credential, resume secret, claim id, API
/// token). It has no `Debug` or `Display`, so it cannot reach a log line by formatting.
pub struct Secret(String);

impl Secret {
    /// 256 random bits.
    pub fn generate() -> Self {
        Self(random_token(32))
    }

    /// Wraps a value presented by a client, for hashing and comparison only.
    pub fn from_presented(s: &str) -> Self {
        Self(s.to_owned())
    }

    /// The clear value, for the single response that issues it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What the database keeps instead of the secret.
    pub fn hash(&self) -> SecretHash {
        SecretHash::of(self.0.as_bytes())
    }
}

/// SHA-256 of a secret, hex-encoded. Comparison is constant-time.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretHash(String);

impl SecretHash {
    /// Hashes arbitrary bytes (the clear secret).
    pub fn of(bytes: &[u8]) -> Self {
        Self(hex::encode(Sha256::digest(bytes)))
    }

    /// Rebuilds a hash read from the database.
    pub fn from_db(s: String) -> Self {
        Self(s)
    }

    /// Hex form for SQL binds.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Constant-time equality, so response timing says nothing about how much matched.
    pub fn matches(&self, presented: &Secret) -> bool {
        self.matches_hash(&presented.hash())
    }

    /// Constant-time equality with another hash (one already computed from a presented
    /// secret).
    pub fn matches_hash(&self, other: &SecretHash) -> bool {
        bool::from(self.0.as_bytes().ct_eq(other.0.as_bytes()))
    }
}

impl std::fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_round_trip_and_reject_other_kinds() {
        let t = TurnId::generate();
        assert_eq!(TurnId::parse(t.as_str()), Some(t.clone()));
        assert!(InterruptId::parse(t.as_str()).is_none());
        assert!(TurnId::parse("t_short").is_none());
        assert!(TurnId::parse("t_aaaaaaaaaaaaaaaaaaaaa!").is_none());
    }

    #[test]
    fn external_ids_are_bounded() {
        assert!(UserId::parse("").is_none());
        assert!(UserId::parse("a\nb").is_none());
        assert!(UserId::parse(&"x".repeat(201)).is_none());
        assert!(ChatId::parse("chat-1").is_some());
    }

    #[test]
    fn secret_hash_matches_only_the_same_secret() {
        let s = Secret::generate();
        assert!(s.expose().len() >= 43, "256 bits base64url");
        let h = s.hash();
        assert!(h.matches(&Secret::from_presented(s.expose())));
        assert!(!h.matches(&Secret::from_presented("nope")));
        assert_eq!(format!("{h:?}"), "SecretHash(..)");
    }
}
