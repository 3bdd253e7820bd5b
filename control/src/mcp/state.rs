//! The `requestState` of an `input_required` answer (MCP 2026-07-28): which card the retry
//! answers, sealed with HMAC-SHA256 (rmcp's `RequestStateCodec`) under the deployment key,
//! bound to the turn (associated data, so a state cannot be replayed in another turn) and
//! expiring with the card. The card's resume secret rides inside, encrypted with a
//! keystream derived from the same key (the codec signs but does not hide), so the client
//! cannot answer the card itself with it outside the protocol.
//!
//! Exactly-once is not this file's job: a replayed state reaches the resume endpoint, which
//! replays a done card and never claims twice.

use std::time::Duration;

use hmac::{KeyInit as _, Mac as _};
use rand::RngCore as _;
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};

type HmacSha256 = hmac::Hmac<sha2_hmac::Sha256>;

/// What a retry needs to answer the card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardState {
    /// The interrupt id.
    pub interrupt_id: String,
    /// The card's resume secret.
    pub secret: String,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    /// Format version.
    v: u8,
    iid: String,
    /// Random per state; the keystream's nonce.
    n: String,
    /// The secret XOR the keystream, hex.
    s: String,
}

/// Why a state was refused. All cases answer the client alike.
#[derive(Debug, thiserror::Error)]
#[error("invalid or expired requestState")]
pub struct BadState;

/// Seals and opens card states with one deployment key.
#[derive(Clone)]
pub struct StateKeys {
    codec: RequestStateCodec,
    key: Vec<u8>,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKeys(..)")
    }
}

fn associated(turn: &str) -> Vec<u8> {
    format!("egressgate/mcp/turn:{turn}").into_bytes()
}

impl StateKeys {
    /// Keys from `key` (at least 32 bytes).
    pub fn new(key: Vec<u8>) -> Result<Self, String> {
        let codec = RequestStateCodec::try_new(key.clone()).map_err(|e| e.to_string())?;
        Ok(Self { codec, key })
    }

    /// Fresh random keys, for a process that seals and opens its own states only.
    pub fn random() -> Self {
        let mut key = vec![0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Self {
            codec: RequestStateCodec::new_unchecked(key.clone()),
            key,
        }
    }

    /// The keystream for `nonce`, `len` bytes (HMAC-SHA256 in counter mode).
    fn keystream(&self, nonce: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 32);
        let mut counter: u32 = 0;
        while out.len() < len {
            let Ok(mut mac) = HmacSha256::new_from_slice(&self.key) else {
                break;
            };
            mac.update(b"egressgate/mcp/secret-stream");
            mac.update(nonce);
            mac.update(&counter.to_be_bytes());
            out.extend_from_slice(&mac.finalize().into_bytes());
            counter += 1;
        }
        out.truncate(len);
        out
    }

    /// The sealed state for `card` in `turn`, valid for `ttl`.
    pub fn seal(&self, turn: &str, card: &CardState, ttl: Duration) -> String {
        let mut nonce = [0u8; 16];
        rand::rng().fill_bytes(&mut nonce);
        let stream = self.keystream(&nonce, card.secret.len());
        let hidden: Vec<u8> = card
            .secret
            .bytes()
            .zip(stream)
            .map(|(a, b)| a ^ b)
            .collect();
        let body = Sealed {
            v: 1,
            iid: card.interrupt_id.clone(),
            n: hex::encode(nonce),
            s: hex::encode(hidden),
        };
        let payload = serde_json::to_vec(&body).unwrap_or_default();
        let ad = associated(turn);
        self.codec.seal_with(
            &payload,
            &SealOptions::new()
                .associated_data(&ad)
                .ttl(ttl.max(Duration::from_secs(1))),
        )
    }

    /// The card a state names, if it was sealed by this deployment for `turn` and has not
    /// expired.
    pub fn open(&self, turn: &str, sealed: &str) -> Result<CardState, BadState> {
        let payload = self
            .codec
            .open_with(sealed, &associated(turn))
            .map_err(|_| BadState)?;
        let body: Sealed = serde_json::from_slice(&payload).map_err(|_| BadState)?;
        if body.v != 1 {
            return Err(BadState);
        }
        let nonce = hex::decode(&body.n).map_err(|_| BadState)?;
        let hidden = hex::decode(&body.s).map_err(|_| BadState)?;
        let stream = self.keystream(&nonce, hidden.len());
        let secret: Vec<u8> = hidden.iter().zip(stream).map(|(a, b)| a ^ b).collect();
        Ok(CardState {
            interrupt_id: body.iid,
            secret: String::from_utf8(secret).map_err(|_| BadState)?,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn card() -> CardState {
        CardState {
            interrupt_id: "i_abc".into(),
            secret: "s3cret-value-of-the-card-0123456789abcdefgh".into(),
        }
    }

    #[test]
    fn round_trip_bound_to_the_turn() {
        let keys = StateKeys::new(vec![7; 32]).unwrap();
        let sealed = keys.seal("t_1", &card(), Duration::from_secs(60));
        assert_eq!(keys.open("t_1", &sealed).unwrap(), card());
        assert!(keys.open("t_2", &sealed).is_err(), "another turn");
        assert!(
            !sealed.contains(&card().secret),
            "the secret is not readable"
        );
        let other = StateKeys::new(vec![8; 32]).unwrap();
        assert!(other.open("t_1", &sealed).is_err(), "another deployment");
    }

    #[test]
    fn tampering_and_short_keys_are_refused() {
        let keys = StateKeys::new(vec![7; 32]).unwrap();
        let sealed = keys.seal("t_1", &card(), Duration::from_secs(60));
        let mut bytes = sealed.clone().into_bytes();
        let mid = bytes.len() / 2;
        bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
        assert!(
            keys.open("t_1", &String::from_utf8(bytes).unwrap())
                .is_err()
        );
        assert!(keys.open("t_1", "").is_err());
        assert!(keys.open("t_1", "rs2.garbage").is_err());
        assert!(StateKeys::new(vec![1; 8]).is_err());
    }

    #[test]
    fn expired_states_are_refused() {
        let keys = StateKeys::new(vec![7; 32]).unwrap();
        let sealed = keys.seal("t_1", &card(), Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(1100));
        assert!(keys.open("t_1", &sealed).is_err());
    }
}
