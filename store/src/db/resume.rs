//! Resuming exactly once: the claim (one conditional write that only one of many concurrent
//! clicks can win), the claim cap, heartbeats bounded by a deadline, completion, and the
//! per-card count of rejected decisions. The per-user resume slots they hold are `slots`.

use sqlx::{Any, Row as _, Transaction};

use super::audit::{self, AuditEntry, AuditKind};
/// The answer kept by `complete_claim` (the pointer's type for its answers).
pub use super::pointer::StoredAnswer;
use super::pointer::{Decision, Outcome, Pointer};
use super::slots::{self, SlotMove};
use super::{Store, StoreError, approvals};
use crate::ids::{ChatId, InterruptId, SecretHash, UserId};
use crate::time::Timestamp;

/// A claim to attempt on a pointer that was read at `read` time.
#[derive(Debug)]
pub struct ClaimAttempt<'a> {
    /// The pointer as read (its id, secret hash and claim count guard the write).
    pub read: &'a Pointer,
    /// Hash of the fresh claim id.
    pub claim_hash: SecretHash,
    /// Label of this claim (not a secret).
    pub worker: String,
    /// The lease's end.
    pub lease_expires_at: Timestamp,
    /// The claim's hard stop; the turn's credential is extended to it.
    pub deadline: Timestamp,
    /// The decision to apply.
    pub decision: &'a Decision,
    /// When approval rows written now stop counting.
    pub approval_expires_at: Timestamp,
    /// Who answered, for the audit row.
    pub decider: Decider<'a>,
}

/// Who answered a card, as far as the gate can tell: the person the runtime named (with its
/// token and `X-Egressgate-User`) when it relayed the click, or nobody in particular when only
/// the resume secret was presented (whoever was shown the card may answer it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decider<'a> {
    /// The runtime named this person.
    Person(&'a UserId),
    /// Only the resume secret was presented.
    SecretOnly,
}

impl Decider<'_> {
    /// The audit row's `actor`: `user:<id>` or `resume-secret`.
    pub fn actor(self) -> String {
        match self {
            Self::Person(u) => format!("user:{u}"),
            Self::SecretOnly => "resume-secret".to_owned(),
        }
    }

    /// Fields for the audit row's detail: `decided_by` (the person, or null) and `proof`
    /// (`runtime_user` or `resume_secret`).
    fn detail(self, detail: &mut serde_json::Value) {
        let (by, proof) = match self {
            Self::Person(u) => (serde_json::Value::from(u.as_str()), "runtime_user"),
            Self::SecretOnly => (serde_json::Value::Null, "resume_secret"),
        };
        detail["decided_by"] = by;
        detail["proof"] = proof.into();
    }
}

impl Store {
    /// The claim: one conditional write that succeeds only if id and secret hash match, the
    /// request is pending (or claimed with a lapsed lease), unexpired, and its claim count is
    /// still the one read. The winner's decision is applied (approval rows written or this
    /// card's rows deleted), the turn's credential is extended to the claim's deadline, its
    /// slot is held for the lease, and `approval_resolved` is audited — one transaction.
    /// `false` means another click won.
    pub async fn claim_interrupt(
        &self,
        attempt: &ClaimAttempt<'_>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let p = attempt.read;
        let decision_json =
            serde_json::to_string(attempt.decision).map_err(|_| StoreError::Corrupt("decision"))?;
        let write = sqlx::query(
            "UPDATE interrupts SET state = 'claimed', claim_hash = $1, worker = $2, \
             lease_expires_at = $3, deadline = $4, claim_count = claim_count + 1, decision = $5 \
             WHERE interrupt_id = $6 AND secret_hash = $7 \
             AND (state = 'pending' OR (state = 'claimed' AND lease_expires_at <= $8)) \
             AND expires_at > $8 AND claim_count = $9 AND purge_at > $8",
        )
        .bind(attempt.claim_hash.as_str())
        .bind(&attempt.worker)
        .bind(attempt.lease_expires_at.millis())
        .bind(attempt.deadline.millis())
        .bind(decision_json)
        .bind(p.id.as_str())
        .bind(p.secret_hash.as_str())
        .bind(now.millis())
        .bind(p.claim_count);
        let Some(mut tx) = self.begin_guarded(write).await? else {
            return Ok(false);
        };
        match attempt.decision.outcome {
            Outcome::Approved => {
                approvals::upsert_card_approvals(
                    &mut tx,
                    p,
                    attempt.decision,
                    attempt.approval_expires_at,
                    now,
                )
                .await?;
            }
            Outcome::Declined | Outcome::Cancelled => {
                approvals::delete_card_approvals(&mut tx, p).await?;
            }
        }
        sqlx::query("UPDATE turns SET expires_at = $1 WHERE turn_id = $2 AND expires_at < $1")
            .bind(attempt.deadline.millis())
            .bind(p.turn_id.as_str())
            .execute(&mut *tx)
            .await?;
        slots::apply(
            &mut tx,
            &p.user,
            &p.id,
            SlotMove::Hold(attempt.lease_expires_at),
        )
        .await?;
        let detail = serde_json::json!({
            "decision": attempt.decision,
            "claim": p.claim_count + 1,
            "rejected_decisions": p.rejected_count,
            "deadline": attempt.deadline,
        });
        self.commit_decided(
            tx,
            AuditKind::ApprovalResolved,
            attempt.decider,
            p,
            detail,
            now,
        )
        .await?;
        Ok(true)
    }

    /// Past the claim cap: denies and expires the request (same guard as a claim), deletes
    /// the approval rows stamped with its id, frees its slots, audits `claim_cap_expired`.
    /// `false` means another click changed it first.
    pub async fn expire_at_claim_cap(
        &self,
        read: &Pointer,
        decider: Decider<'_>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let declined = serde_json::to_string(&Decision::declined())
            .map_err(|_| StoreError::Corrupt("decision"))?;
        let write = sqlx::query(
            "UPDATE interrupts SET state = 'expired', decision = $1 WHERE interrupt_id = $2 \
             AND secret_hash = $3 AND (state = 'pending' OR (state = 'claimed' AND \
             lease_expires_at <= $4)) AND claim_count = $5",
        )
        .bind(declined)
        .bind(read.id.as_str())
        .bind(read.secret_hash.as_str())
        .bind(now.millis())
        .bind(read.claim_count);
        let Some(mut tx) = self.begin_guarded(write).await? else {
            return Ok(false);
        };
        let removed = approvals::delete_card_approvals(&mut tx, read).await?;
        slots::Held::OnCard(&read.id).free(&mut tx).await?;
        let detail = serde_json::json!({"claims": read.claim_count, "approvals_deleted": removed});
        self.commit_decided(tx, AuditKind::ClaimCapExpired, decider, read, detail, now)
            .await?;
        Ok(true)
    }

    /// Renews a live claim's lease (the caller caps it at the deadline) and its slot;
    /// `false` when the claim is no longer held.
    pub async fn heartbeat_claim(
        &self,
        read: &Pointer,
        claim_hash: &SecretHash,
        lease_expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let write = sqlx::query(
            "UPDATE interrupts SET lease_expires_at = $1 WHERE interrupt_id = $2 \
             AND claim_hash = $3 AND state = 'claimed' AND deadline > $4",
        )
        .bind(lease_expires_at.millis())
        .bind(read.id.as_str())
        .bind(claim_hash.as_str())
        .bind(now.millis());
        self.claim_step(read, write, SlotMove::Renew(lease_expires_at))
            .await
    }

    /// Hands a claim made by a bare secret holder (the card page) over to the runtime: one
    /// conditional write that succeeds only while the claim read is still the current one —
    /// same claim hash, same worker label, still claimed, before its deadline — so of many
    /// runtime workers exactly one takes it over. The new holder gets a fresh lease and the
    /// user's slot follows it. `false` when the claim changed first.
    pub async fn take_over_claim(
        &self,
        read: &Pointer,
        claim_hash: &SecretHash,
        worker: &str,
        lease_expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let Some(old) = &read.claim else {
            return Ok(false);
        };
        let write = sqlx::query(
            "UPDATE interrupts SET claim_hash = $1, worker = $2, lease_expires_at = $3 \
             WHERE interrupt_id = $4 AND claim_hash = $5 AND worker = $6 AND state = 'claimed' \
             AND deadline > $7 AND claim_count = $8",
        )
        .bind(claim_hash.as_str())
        .bind(worker)
        .bind(lease_expires_at.millis())
        .bind(read.id.as_str())
        .bind(old.hash.as_str())
        .bind(&old.worker)
        .bind(now.millis())
        .bind(read.claim_count);
        self.claim_step(read, write, SlotMove::Hold(lease_expires_at))
            .await
    }

    /// Marks a claimed request done with its answer and releases the resume slot; `false`
    /// when the claim is no longer held.
    pub async fn complete_claim(
        &self,
        read: &Pointer,
        claim_hash: &SecretHash,
        answer: &StoredAnswer,
    ) -> Result<bool, StoreError> {
        let write = sqlx::query(
            "UPDATE interrupts SET state = 'done', answer = $1, answer_key = $2, \
             lease_expires_at = NULL WHERE interrupt_id = $3 AND claim_hash = $4 \
             AND state = 'claimed'",
        )
        .bind(answer.inline.clone())
        .bind(answer.key.clone())
        .bind(read.id.as_str())
        .bind(claim_hash.as_str());
        self.claim_step(read, write, SlotMove::Free).await
    }

    /// One guarded write on a held claim and the move of its user's slot that goes with it,
    /// in one transaction; `false` when the guard no longer held (the claim changed first).
    async fn claim_step(
        &self,
        read: &Pointer,
        write: sqlx::query::Query<'_, Any, sqlx::any::AnyArguments>,
        slot: SlotMove,
    ) -> Result<bool, StoreError> {
        let Some(mut tx) = self.begin_guarded(write).await? else {
            return Ok(false);
        };
        slots::apply(&mut tx, &read.user, &read.id, slot).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Ends a change a person's answer (or the claim cap) made to `card`: audits `kind` with
    /// who decided and by what proof added to `detail`, and commits.
    async fn commit_decided(
        &self,
        tx: Transaction<'static, Any>,
        kind: AuditKind,
        decider: Decider<'_>,
        card: &Pointer,
        mut detail: serde_json::Value,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        decider.detail(&mut detail);
        let actor = decider.actor();
        let entry = AuditEntry::card(kind, &actor, card, detail);
        self.commit_audited(tx, entry, now).await
    }

    /// Counts `count` rejected decisions against their card in one write (the control plane
    /// tallies them in memory first). Audit rows are append-only, so the aggregate is kept in
    /// the pointer (`rejected_count`) and only the write that starts the card's count adds a
    /// `decision_rejected` row; the final count is recorded with the card's
    /// `approval_resolved` row.
    pub async fn record_rejected_decisions(
        &self,
        id: &InterruptId,
        reason: &str,
        count: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "UPDATE interrupts SET rejected_count = rejected_count + $2 WHERE interrupt_id = $1 \
             RETURNING rejected_count, user_id, chat_id",
        )
        .bind(id.as_str())
        .bind(count)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(r) = row else { return Ok(()) };
        let total: i64 = r.try_get(0)?;
        if total == count {
            let user = UserId::from_db(r.try_get(1)?);
            let chat = ChatId::from_db(r.try_get(2)?);
            let detail =
                serde_json::json!({"first_reason": reason, "aggregated": "count kept on the card"});
            let entry = AuditEntry::chat(
                AuditKind::DecisionRejected,
                "resume-secret",
                &user,
                &chat,
                detail,
            )
            .on_card(id);
            audit::write(&mut tx, entry, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
