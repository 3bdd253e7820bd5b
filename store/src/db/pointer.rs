//! The pointer record's shape: one row per chat naming its open approval request (card,
//! hashed resume secret, snapshot location, state, the two expiries, the claim), the decision
//! a claim fixes, and how a stored row parses back. Every room that reads, writes, claims or
//! audits a card imports these words from here, so none of them has to import another.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::{StoreError, json_column};
use crate::access::Access;
use crate::blob::BlobRef;
use crate::card::Card;
use crate::grant::Scope;
use crate::ids::{ChatId, InterruptId, SecretHash, TurnId, UserId};
use crate::path_prefix::PathPrefix;
use crate::spelling::spelling;
use crate::time::Timestamp;

/// Where a request is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptState {
    /// Waiting for the person.
    Pending,
    /// A resume holds (or held, if its lease lapsed) the claim.
    Claimed,
    /// The resumed run finished; later resumes replay.
    Done,
    /// No longer answerable.
    Expired,
}

spelling!(InterruptState {
    Pending => "pending",
    Claimed => "claimed",
    Done => "done",
    Expired => "expired",
});

/// How the person answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `resolved` with `approved: true`.
    Approved,
    /// Anything else that was `resolved` (fail closed).
    Declined,
    /// `cancelled`: the person never answered.
    Cancelled,
}

/// The decision fixed by the first claim. `sites` and `packages` list what was approved:
/// empty unless approved.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// Approved, declined or cancelled.
    pub outcome: Outcome,
    /// Hosts approved.
    pub sites: Vec<String>,
    /// Packages approved (the card's, possibly narrowed).
    pub packages: Vec<String>,
    /// The access level the site approvals get: `full` (the card's) unless the person
    /// narrowed it to `read` (only then present in JSON, so a full decision reads as before).
    #[serde(default, skip_serializing_if = "Access::is_full")]
    pub access: Access,
    /// How far the approval rows reach: `chat` (the card's) unless the person chose `turn`
    /// or (where allowed) `user` (only then present in JSON).
    #[serde(default, skip_serializing_if = "Scope::is_chat")]
    pub scope: Scope,
    /// How many connections each site row admits (`None`: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<i64>,
    /// The path prefixes the site rows are narrowed to (`None`: the whole host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<PathPrefix>>,
}

impl Decision {
    /// The decision written when a card is denied without a person (claim cap).
    pub fn declined() -> Self {
        Self {
            outcome: Outcome::Declined,
            sites: Vec::new(),
            packages: Vec::new(),
            access: Access::Full,
            scope: Scope::Chat,
            max_uses: None,
            paths: None,
        }
    }
}

/// One pointer row as stored.
#[derive(Clone, Debug)]
pub struct Pointer {
    /// The person.
    pub user: UserId,
    /// Their chat.
    pub chat: ChatId,
    /// The AG-UI interrupt id (the card id).
    pub id: InterruptId,
    /// SHA-256 of the resume secret.
    pub secret_hash: SecretHash,
    /// The turn whose approval tool asked.
    pub turn_id: TurnId,
    /// That turn's place in the chat: a newer turn makes the card stale.
    pub turn_seq: i64,
    /// What the person is shown.
    pub card: Card,
    /// The agent's tool call, when it named one.
    pub tool_call_id: Option<String>,
    /// Stored state (see [`Pointer::effective_state`] for what callers should report).
    pub state: InterruptState,
    /// The paused run's snapshot.
    pub snapshot: Option<BlobRef>,
    /// The runtime's first answer, in the pointer or in a blob.
    pub first_answer: StoredAnswer,
    /// When the card was registered.
    pub created_at: Timestamp,
    /// Logical expiry: answering stops here.
    pub expires_at: Timestamp,
    /// Physical expiry: the janitor deletes the row, and reads ignore it, from here.
    pub purge_at: Timestamp,
    /// Claims so far.
    pub claim_count: i64,
    /// The current (or, once done or expired, the last) claim; `None` before the first.
    pub claim: Option<Claim>,
    /// Fixed by the first claim.
    pub decision: Option<Decision>,
    /// The resumed run's final answer (JSON), in the pointer or in a blob.
    pub answer: StoredAnswer,
    /// Rejected decisions for this card so far.
    pub rejected_count: i64,
}

/// An answer the pointer keeps: inline text when it fits the pointer's size limit, else the
/// locator of the blob holding it whole; both `None` when there is none. The runtime's first
/// answer and the resumed run's final answer are kept alike.
#[derive(Debug, Clone, Default)]
pub struct StoredAnswer {
    /// The text, when it fits the pointer.
    pub inline: Option<String>,
    /// Blob locator, when it did not.
    pub key: Option<String>,
}

/// A claim on a card: its hash, label and hard stop are written together by a claim (a
/// takeover replaces hash and label) and cleared together when a new card replaces the row,
/// so a pointer holds all of them or none.
#[derive(Clone, Debug)]
pub struct Claim {
    /// SHA-256 of the claim id.
    pub hash: SecretHash,
    /// Label of the claim (never a secret).
    pub worker: String,
    /// When the claim lapses unless renewed; `None` once the resumed run completed.
    pub lease_expires_at: Option<Timestamp>,
    /// Hard stop of the claim.
    pub deadline: Timestamp,
}

impl Pointer {
    /// Whether a claim's lease is still running.
    pub fn lease_live(&self, now: Timestamp) -> bool {
        self.state == InterruptState::Claimed
            && self
                .claim
                .as_ref()
                .and_then(|c| c.lease_expires_at)
                .is_some_and(|l| !l.has_passed(now))
    }

    /// What to report: a pending card past its logical expiry is expired even if no write
    /// said so yet.
    pub fn effective_state(&self, now: Timestamp) -> InterruptState {
        match self.state {
            InterruptState::Pending if self.expires_at.has_passed(now) => InterruptState::Expired,
            s => s,
        }
    }

    /// Open = pending and unexpired, or claimed with a live lease: blocks a new card.
    pub fn is_open(&self, now: Timestamp) -> bool {
        (self.state == InterruptState::Pending && !self.expires_at.has_passed(now))
            || self.lease_live(now)
    }
}

/// The pointer's column list, shared by every statement that reads a whole row.
macro_rules! pointer_columns {
    () => {
        "user_id, chat_id, interrupt_id, secret_hash, turn_id, turn_seq, card, tool_call_id, \
         state, snapshot_key, snapshot_sha256, first_answer, first_answer_key, created_at, \
         expires_at, purge_at, claim_count, claim_hash, worker, lease_expires_at, deadline, \
         decision, answer, answer_key, rejected_count"
    };
}
pub(crate) use pointer_columns;

/// `SELECT` of whole pointer rows matching `$cond` (a literal, or a macro that expands to one).
macro_rules! select_pointer {
    ($cond:expr) => {
        concat!(
            "SELECT ",
            $crate::db::pointer::pointer_columns!(),
            " FROM interrupts WHERE ",
            $cond
        )
    };
}
pub(crate) use select_pointer;

/// Parses a row selected with [`pointer_columns`].
pub(crate) fn pointer_from_row(r: &AnyRow) -> Result<Pointer, StoreError> {
    let ts = |i: usize| -> Result<Option<Timestamp>, StoreError> {
        Ok(r.try_get::<Option<i64>, _>(i)?.map(Timestamp::from_millis))
    };
    let snapshot = match (
        r.try_get::<Option<String>, _>(9)?,
        r.try_get::<Option<String>, _>(10)?,
    ) {
        (Some(key), Some(sha256)) => Some(BlobRef { key, sha256 }),
        (None, None) => None,
        _ => return Err(StoreError::Corrupt("interrupts.snapshot")),
    };
    let claim = match (
        r.try_get::<Option<String>, _>(17)?,
        r.try_get::<Option<String>, _>(18)?,
        ts(20)?,
    ) {
        (Some(hash), Some(worker), Some(deadline)) => Some(Claim {
            hash: SecretHash::from_db(hash),
            worker,
            lease_expires_at: ts(19)?,
            deadline,
        }),
        (None, None, None) if ts(19)?.is_none() => None,
        _ => return Err(StoreError::Corrupt("interrupts.claim")),
    };
    let decision = match r.try_get::<Option<String>, _>(21)? {
        Some(s) => Some(json_column(&s, "interrupts.decision")?),
        None => None,
    };
    Ok(Pointer {
        user: UserId::from_db(r.try_get(0)?),
        chat: ChatId::from_db(r.try_get(1)?),
        id: InterruptId::from_db(r.try_get(2)?),
        secret_hash: SecretHash::from_db(r.try_get(3)?),
        turn_id: TurnId::from_db(r.try_get(4)?),
        turn_seq: r.try_get(5)?,
        card: json_column(&r.try_get::<String, _>(6)?, "interrupts.card")?,
        tool_call_id: r.try_get(7)?,
        state: crate::db::word_column(r, 8, InterruptState::parse, "interrupts.state")?,
        snapshot,
        first_answer: StoredAnswer {
            inline: r.try_get(11)?,
            key: r.try_get(12)?,
        },
        created_at: Timestamp::from_millis(r.try_get(13)?),
        expires_at: Timestamp::from_millis(r.try_get(14)?),
        purge_at: Timestamp::from_millis(r.try_get(15)?),
        claim_count: r.try_get(16)?,
        claim,
        decision,
        answer: StoredAnswer {
            inline: r.try_get(22)?,
            key: r.try_get(23)?,
        },
        rejected_count: r.try_get(24)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing;

    /// The claim columns of a stored row: hash, worker, lease, deadline.
    type ClaimColumns = (
        Option<&'static str>,
        Option<&'static str>,
        Option<i64>,
        Option<i64>,
    );

    /// Stores the chat's only card with `claim` in its claim columns and reads it back
    /// through the one pointer reader.
    async fn read_back(
        store: &crate::db::Store,
        claim: ClaimColumns,
    ) -> Result<Pointer, StoreError> {
        sqlx::query("DELETE FROM interrupts")
            .execute(store.pool())
            .await?;
        sqlx::query(
            "INSERT INTO interrupts (user_id, chat_id, interrupt_id, secret_hash, turn_id, \
             turn_seq, card, state, created_at, expires_at, purge_at, claim_hash, worker, \
             lease_expires_at, deadline) VALUES ('u1', 'c1', 'int_1', 'h', 't_1', 1, $1, \
             'claimed', 0, 10, 20, $2, $3, $4, $5)",
        )
        .bind(r#"{"sites":[],"urls":[],"packages":[],"reason":"r"}"#)
        .bind(claim.0)
        .bind(claim.1)
        .bind(claim.2)
        .bind(claim.3)
        .execute(store.pool())
        .await?;
        let row = sqlx::query(select_pointer!("interrupt_id = 'int_1'"))
            .fetch_one(store.pool())
            .await?;
        pointer_from_row(&row)
    }

    #[tokio::test]
    async fn a_claim_reads_back_whole_or_not_at_all() -> Result<(), StoreError> {
        let db = testing::fresh().await;
        let s = &db.store;
        let held = read_back(s, (Some("ch"), Some("claim-ch"), Some(5), Some(9))).await?;
        let claim = held.claim.ok_or(StoreError::Corrupt("no claim"))?;
        assert_eq!(
            (claim.hash.as_str(), claim.worker.as_str()),
            ("ch", "claim-ch")
        );
        assert_eq!(claim.lease_expires_at, Some(Timestamp::from_millis(5)));
        assert_eq!(claim.deadline, Timestamp::from_millis(9));
        let done = read_back(s, (Some("ch"), Some("claim-ch"), None, Some(9))).await?;
        assert!(
            done.claim.is_some_and(|c| c.lease_expires_at.is_none()),
            "a completed claim keeps its hash, label and deadline without a lease"
        );
        assert!(
            read_back(s, (None, None, None, None))
                .await?
                .claim
                .is_none()
        );
        for half in [
            (Some("ch"), None, Some(5), Some(9)),
            (Some("ch"), Some("claim-ch"), Some(5), None),
            (None, None, Some(5), None),
        ] {
            assert!(
                matches!(
                    read_back(s, half).await,
                    Err(StoreError::Corrupt("interrupts.claim"))
                ),
                "{half:?}"
            );
        }
        Ok(())
    }
}
