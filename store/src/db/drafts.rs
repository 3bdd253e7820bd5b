//! Drafts: the card the approval tool computed, kept server-side until the runtime registers
//! it as an interrupt. The runtime only ever holds the draft id, so it cannot alter a card;
//! a draft is bound to its turn and expires with it. Consuming one (single use) belongs to
//! the interrupt registration, which marks `used_at`.

use sqlx::Row as _;

use super::{Store, StoreError, json_column};
use crate::card::Card;
use crate::db::turns::Turn;
use crate::ids::{ChatId, DraftId, TurnId, UserId};
use crate::time::Timestamp;

/// A stored draft card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// Its id, handed to the runtime in the tool's `ask` answer.
    pub id: DraftId,
    /// The turn whose approval tool computed it.
    pub turn: TurnId,
    /// The turn's person (copied so registration needs no second read).
    pub user: UserId,
    /// The turn's chat.
    pub chat: ChatId,
    /// The card exactly as computed by the server.
    pub card: Card,
    /// The agent's tool call id, if the runtime passed one (becomes the AG-UI `toolCallId`).
    pub tool_call_id: Option<String>,
    /// When it was computed.
    pub created_at: Timestamp,
    /// When it stops being registrable (the turn's expiry at creation).
    pub expires_at: Timestamp,
    /// When it was registered as an interrupt; `Some` means used.
    pub used_at: Option<Timestamp>,
}

impl Store {
    /// Stores a freshly computed card as a draft of `turn`, expiring with the turn, and returns
    /// its id. One statement: a draft is never half-written.
    pub async fn create_draft(
        &self,
        turn: &Turn,
        card: &Card,
        tool_call_id: Option<&str>,
        now: Timestamp,
    ) -> Result<DraftId, StoreError> {
        let id = DraftId::generate();
        let card_json =
            serde_json::to_string(card).map_err(|_| StoreError::Corrupt("drafts.card"))?;
        sqlx::query(
            "INSERT INTO drafts (draft_id, turn_id, user_id, chat_id, card, tool_call_id, \
             created_at, expires_at, used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)",
        )
        .bind(id.as_str())
        .bind(turn.id.as_str())
        .bind(turn.user.as_str())
        .bind(turn.chat.as_str())
        .bind(&card_json)
        .bind(tool_call_id)
        .bind(now.millis())
        .bind(turn.expires_at.millis())
        .execute(self.pool())
        .await?;
        Ok(id)
    }

    /// Reads a draft by id, used or expired alike (the caller tells `DRAFT_USED` from
    /// `DRAFT_NOT_FOUND`).
    pub async fn draft(&self, id: &DraftId) -> Result<Option<Draft>, StoreError> {
        let row = sqlx::query(
            "SELECT draft_id, turn_id, user_id, chat_id, card, tool_call_id, created_at, \
             expires_at, used_at FROM drafts WHERE draft_id = $1",
        )
        .bind(id.as_str())
        .fetch_optional(self.pool())
        .await?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(Draft {
            id: DraftId::from_db(r.try_get(0)?),
            turn: TurnId::from_db(r.try_get(1)?),
            user: UserId::from_db(r.try_get(2)?),
            chat: ChatId::from_db(r.try_get(3)?),
            card: json_column(&r.try_get::<String, _>(4)?, "drafts.card")?,
            tool_call_id: r.try_get(5)?,
            created_at: Timestamp::from_millis(r.try_get(6)?),
            expires_at: Timestamp::from_millis(r.try_get(7)?),
            used_at: r.try_get::<Option<i64>, _>(8)?.map(Timestamp::from_millis),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing;
    use crate::host::Host;

    #[tokio::test]
    async fn draft_round_trips_bound_to_its_turn() -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let now = Timestamp::now();
        let turn = testing::open_turn_at(&db.store, "u1", "c1", now).await?;
        let card = Card::new(
            vec![Host::parse("files.example.com")?],
            vec![],
            vec![],
            "why".into(),
        );
        let id = db
            .store
            .create_draft(&turn, &card, Some("call_1"), now)
            .await?;
        let d = db.store.draft(&id).await?.ok_or("draft missing")?;
        assert_eq!(d.turn, turn.id);
        assert_eq!(d.user, turn.user);
        assert_eq!(d.card, card);
        assert_eq!(d.tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(d.expires_at, turn.expires_at);
        assert_eq!(d.used_at, None);
        assert!(db.store.draft(&DraftId::generate()).await?.is_none());
        Ok(())
    }
}
