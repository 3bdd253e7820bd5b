//! What keeps unauthenticated resume attempts cheap and few: failed attempts (unknown id,
//! wrong secret, another user) are limited per client address and per card, and decided
//! before any database work; their count is written per card in batches (see [`tally`]).
//!
//! The per-card limit only counts failures, and it cannot lock the real holder out: the card's
//! secret hash is kept beside its bucket, so while the bucket is empty an attempt with the
//! right secret (compared in constant time, in memory) still goes through. Only the per-client
//! limit refuses everything from an address that keeps failing.

mod tally;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use egressgate_store::{InterruptId, Secret, SecretHash, Store};

use crate::buckets::Buckets;
use crate::error::ApiError;
use crate::settings::Settings;
use tally::Tally;

/// The limits and the tally, shared by every request of one process.
#[derive(Debug)]
pub(crate) struct ResumeGuard {
    per_client: Buckets<ClientKey, ()>,
    per_card: Buckets<InterruptId, SecretHash>,
    tally: Arc<Tally>,
}

/// Whom a client address is counted as: the address itself for IPv4, its /64 for IPv6 (one
/// host usually holds a whole /64), one shared key when the address is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientKey {
    /// An IPv4 address.
    V4(std::net::Ipv4Addr),
    /// An IPv6 /64 prefix.
    V6(u64),
    /// No address was recorded for the connection.
    Unknown,
}

impl ClientKey {
    /// The key of `addr` (IPv4-mapped IPv6 counts as the IPv4 address).
    pub(crate) fn of(addr: Option<IpAddr>) -> Self {
        match addr.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(a)) => Self::V4(a),
            Some(IpAddr::V6(a)) => Self::V6((a.to_bits() >> 64) as u64),
            None => Self::Unknown,
        }
    }
}

/// Why an attempt failed, for the card's audit row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failure<'a> {
    /// No such card (or a malformed id): only the client is charged.
    Unknown,
    /// The card exists but the secret or the user did not match.
    Card {
        /// The card.
        id: &'a InterruptId,
        /// Its secret hash, kept so its holder is never locked out.
        secret_hash: &'a SecretHash,
        /// `wrong secret` or `another user`.
        reason: &'static str,
    },
}

/// `429 TOO_MANY_ATTEMPTS` saying what was failed too often, with `Retry-After` (whole
/// seconds, rounded up).
pub(crate) fn too_many(wait: Duration, what: &str) -> ApiError {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "TOO_MANY_ATTEMPTS",
        format!("too many {what}; try again later"),
    )
    .retry_after(secs.max(1))
}

/// What the resume limits refuse.
const RESUME_FAILURES: &str = "failed resume attempts";

impl ResumeGuard {
    pub(crate) fn new(s: &Settings) -> Self {
        Self {
            per_client: Buckets::new(s.resume_failures_per_client),
            per_card: Buckets::new(s.resume_failures_per_card),
            tally: Arc::new(Tally::new(s.rejection_flush_after, s.rejection_flush_at)),
        }
    }

    /// Before any database work: `429 TOO_MANY_ATTEMPTS` (with `Retry-After`) when the client
    /// has used up its failures, or the card has and `secret` is not the card's.
    pub(crate) fn admit(
        &self,
        client: ClientKey,
        card: Option<&InterruptId>,
        secret: &Secret,
    ) -> Result<(), ApiError> {
        let now = Instant::now();
        if let Some((wait, ())) = self.per_client.empty(&client, now) {
            return Err(too_many(wait, RESUME_FAILURES));
        }
        if let Some((wait, hash)) = card.and_then(|id| self.per_card.empty(id, now))
            && !hash.matches(secret)
        {
            return Err(too_many(wait, RESUME_FAILURES));
        }
        Ok(())
    }

    /// Charges a failed attempt to the client and, when the card exists, to the card, and
    /// counts it on the card (written later, in a batch).
    pub(crate) fn failed(&self, store: &Store, client: ClientKey, failure: Failure<'_>) {
        let now = Instant::now();
        self.per_client.take(client, (), now);
        if let Failure::Card {
            id,
            secret_hash,
            reason,
        } = failure
        {
            self.per_card.take(id.clone(), secret_hash.clone(), now);
            self.tally.note(store, id, reason);
        }
    }

    /// Counts an authenticated but rejected answer (an invalid or conflicting decision) on
    /// its card, written in a batch like the failures.
    pub(crate) fn tally(&self, store: &Store, id: &InterruptId, reason: &'static str) {
        self.tally.note(store, id, reason);
    }

    /// The card's secret changed (reissue): its kept hash is stale.
    pub(crate) fn forget_card(&self, id: &InterruptId) {
        self.per_card.forget(id);
    }
}
