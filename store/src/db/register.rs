//! Registering a card: the draft is consumed and the chat's pointer written by one
//! conditional upsert (or, for a chained card, replaced under the caller's live claim), so
//! "one open request per chat" holds across processes without locks.

use std::time::Duration;

use sqlx::Row as _;

use super::audit::{AuditEntry, AuditKind};
use super::drafts::Draft;
use super::pointer::{InterruptState, Pointer, StoredAnswer};
use super::slots::{self, SlotMove};
use super::{Store, StoreError};
use crate::blob::BlobRef;
use crate::ids::{InterruptId, SecretHash};
use crate::time::Timestamp;

/// A card to write as the chat's pointer (everything but the draft's own fields).
#[derive(Debug)]
pub struct NewPointer<'a> {
    /// The draft being registered, as read by the caller (it is marked used, conditionally,
    /// in the same transaction).
    pub draft: &'a Draft,
    /// Fresh interrupt id.
    pub id: InterruptId,
    /// Hash of the fresh resume secret.
    pub secret_hash: SecretHash,
    /// The confirmed snapshot, if the runtime sent one.
    pub snapshot: Option<BlobRef>,
    /// The first answer, in the pointer when it fits, else its blob.
    pub first_answer: StoredAnswer,
    /// Logical lifetime (already clamped below snapshot retention).
    pub ttl: Duration,
    /// Kept this long past the logical expiry before the janitor purges the row.
    pub retention: Duration,
    /// For a chained card: the hash of the caller's live claim on the chat's request.
    pub chain_claim: Option<SecretHash>,
}

/// Why registration wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// Unknown or expired draft.
    #[error("draft not found")]
    DraftNotFound,
    /// The draft was already registered.
    #[error("draft already used")]
    DraftUsed,
    /// The chat has an open request.
    #[error("an approval request is already open in this chat")]
    Pending,
    /// A chained card's claim is no longer held.
    #[error("claim lost")]
    ClaimLost,
    /// The database or the audit write failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Insert-or-replace of the pointer; `$cond` says when an existing row may be replaced.
macro_rules! upsert_pointer {
    ($cond:literal) => {
        concat!(
            "INSERT INTO interrupts (user_id, chat_id, interrupt_id, secret_hash, turn_id, \
             turn_seq, card, tool_call_id, state, snapshot_key, snapshot_sha256, first_answer, \
             first_answer_key, created_at, expires_at, purge_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11, $12, $13, $14, $15) \
             ON CONFLICT (user_id, chat_id) DO UPDATE SET interrupt_id = excluded.interrupt_id, \
             secret_hash = excluded.secret_hash, turn_id = excluded.turn_id, \
             turn_seq = excluded.turn_seq, card = excluded.card, \
             tool_call_id = excluded.tool_call_id, state = 'pending', \
             snapshot_key = excluded.snapshot_key, snapshot_sha256 = excluded.snapshot_sha256, \
             first_answer = excluded.first_answer, first_answer_key = excluded.first_answer_key, \
             created_at = excluded.created_at, expires_at = excluded.expires_at, \
             purge_at = excluded.purge_at, claim_count = 0, claim_hash = NULL, worker = NULL, \
             lease_expires_at = NULL, deadline = NULL, decision = NULL, answer = NULL, \
             answer_key = NULL, rejected_count = 0 WHERE ",
            $cond
        )
    };
}

/// A new card may replace a request that is not open (done, expired, past expiry, or a
/// claim whose lease lapsed). `$13` is now.
const REGISTER: &str = upsert_pointer!(
    "NOT (interrupts.state = 'pending' AND interrupts.expires_at > $13) \
     AND NOT (interrupts.state = 'claimed' AND interrupts.lease_expires_at > $13)"
);

/// A chained card replaces the request only while the caller's claim (`$16`) is live.
const CHAIN: &str = upsert_pointer!(
    "interrupts.claim_hash = $16 AND interrupts.state = 'claimed' \
     AND interrupts.lease_expires_at > $13"
);

impl Store {
    /// Registers a draft as the chat's pointer in one transaction: the draft is marked used,
    /// the pointer is written by one conditional upsert (or, chained, replaced under the
    /// caller's live claim), and `approval_requested` is audited.
    pub async fn register_interrupt(
        &self,
        new: NewPointer<'_>,
        now: Timestamp,
    ) -> Result<Pointer, RegisterError> {
        let draft = new.draft;
        let mut tx = self.begin().await?;
        let claimed = sqlx::query(
            "UPDATE drafts SET used_at = $1 WHERE draft_id = $2 AND used_at IS NULL \
             AND expires_at > $1",
        )
        .bind(now.millis())
        .bind(draft.id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)?
        .rows_affected();
        if claimed == 0 {
            drop(tx);
            return Err(match self.draft(&draft.id).await? {
                Some(d) if d.used_at.is_some() && !d.expires_at.has_passed(now) => {
                    RegisterError::DraftUsed
                }
                _ => RegisterError::DraftNotFound,
            });
        }
        let seq: i64 = sqlx::query("SELECT seq FROM turns WHERE turn_id = $1")
            .bind(draft.turn.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::from)?
            .ok_or(RegisterError::DraftNotFound)?
            .try_get(0)
            .map_err(StoreError::from)?;
        let expires_at = now.plus(new.ttl);
        let pointer = Pointer {
            user: draft.user.clone(),
            chat: draft.chat.clone(),
            id: new.id,
            secret_hash: new.secret_hash,
            turn_id: draft.turn.clone(),
            turn_seq: seq,
            card: draft.card.clone(),
            tool_call_id: draft.tool_call_id.clone(),
            state: InterruptState::Pending,
            snapshot: new.snapshot,
            first_answer: new.first_answer,
            created_at: now,
            expires_at,
            purge_at: expires_at.plus(new.retention),
            claim_count: 0,
            claim: None,
            decision: None,
            answer: StoredAnswer::default(),
            rejected_count: 0,
        };
        let card_json =
            serde_json::to_string(&pointer.card).map_err(|_| StoreError::Corrupt("card"))?;
        let mut q = sqlx::query(if new.chain_claim.is_some() {
            CHAIN
        } else {
            REGISTER
        })
        .bind(pointer.user.as_str())
        .bind(pointer.chat.as_str())
        .bind(pointer.id.as_str())
        .bind(pointer.secret_hash.as_str())
        .bind(pointer.turn_id.as_str())
        .bind(seq)
        .bind(card_json)
        .bind(pointer.tool_call_id.clone())
        .bind(pointer.snapshot.as_ref().map(|b| b.key.clone()))
        .bind(pointer.snapshot.as_ref().map(|b| b.sha256.clone()))
        .bind(pointer.first_answer.inline.clone())
        .bind(pointer.first_answer.key.clone())
        .bind(now.millis())
        .bind(expires_at.millis())
        .bind(pointer.purge_at.millis());
        let chained_from = match &new.chain_claim {
            Some(claim) => {
                let old = sqlx::query(
                    "SELECT interrupt_id FROM interrupts WHERE user_id = $1 AND chat_id = $2 \
                     AND claim_hash = $3 AND state = 'claimed' AND lease_expires_at > $4",
                )
                .bind(pointer.user.as_str())
                .bind(pointer.chat.as_str())
                .bind(claim.as_str())
                .bind(now.millis())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from)?
                .ok_or(RegisterError::ClaimLost)?;
                q = q.bind(claim.as_str());
                Some(old.try_get::<String, _>(0).map_err(StoreError::from)?)
            }
            None => None,
        };
        let written = q
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from)?
            .rows_affected();
        if written == 0 {
            return Err(if chained_from.is_some() {
                RegisterError::ClaimLost
            } else {
                RegisterError::Pending
            });
        }
        if let Some(old) = &chained_from {
            let old = InterruptId::from_db(old.clone());
            slots::apply(&mut tx, &pointer.user, &old, SlotMove::Free).await?;
        }
        let detail = serde_json::json!({
            "draft_id": draft.id.as_str(),
            "turn_id": pointer.turn_id.as_str(),
            "sites": pointer.card.sites,
            "packages": pointer.card.packages,
            "expires_at": pointer.expires_at,
            "chained_from": chained_from,
        });
        let entry = AuditEntry::card(AuditKind::ApprovalRequested, "runtime", &pointer, detail);
        self.commit_audited(tx, entry, now).await?;
        Ok(pointer)
    }
}
