//! A person's inbox links: a row per link holding only the SHA-256 of its secret, the user it
//! opens the inbox of, and its expiry. The row is found by the link's id (the public half of
//! what the person holds), so the secret itself is compared in constant time, never looked up.

use sqlx::Row as _;

use super::{Store, StoreError};
use crate::ids::{InboxLinkId, SecretHash, UserId};
use crate::time::Timestamp;

/// A stored link.
#[derive(Clone, Debug)]
pub struct InboxLink {
    /// Whose inbox it opens.
    pub user: UserId,
    /// The hash its secret must match.
    pub secret_hash: SecretHash,
    /// When it stops opening anything.
    pub expires_at: Timestamp,
}

impl Store {
    /// Stores a new link (its secret already hashed); kept until `purge_at`.
    pub async fn create_inbox_link(
        &self,
        id: &InboxLinkId,
        link: &InboxLink,
        purge_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO inbox_links (link_id, user_id, secret_hash, created_at, expires_at, \
             purge_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id.as_str())
        .bind(link.user.as_str())
        .bind(link.secret_hash.as_str())
        .bind(now.millis())
        .bind(link.expires_at.millis())
        .bind(purge_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The link of that id, expired or not (the caller compares the secret first, then says
    /// "expired"); `None` when unknown or purged.
    pub async fn inbox_link(&self, id: &InboxLinkId) -> Result<Option<InboxLink>, StoreError> {
        let row = sqlx::query(
            "SELECT user_id, secret_hash, expires_at FROM inbox_links WHERE link_id = $1",
        )
        .bind(id.as_str())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(InboxLink {
                user: UserId::from_db(r.try_get(0)?),
                secret_hash: SecretHash::from_db(r.try_get(1)?),
                expires_at: Timestamp::from_millis(r.try_get(2)?),
            })
        })
        .transpose()
    }

    /// Whether the product knows `user`: a turn was opened for them (their chats are kept)
    /// or the administrator set their permissions.
    pub async fn user_known(&self, user: &UserId) -> Result<bool, StoreError> {
        for sql in [
            "SELECT 1 FROM chats WHERE user_id = $1 LIMIT 1",
            "SELECT 1 FROM users WHERE user_id = $1",
        ] {
            let found = sqlx::query(sql)
                .bind(user.as_str())
                .fetch_optional(self.pool())
                .await?;
            if found.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::fresh;
    use crate::ids::Secret;

    #[tokio::test]
    async fn a_link_is_kept_as_a_hash_and_found_by_id() {
        let db = fresh().await;
        let s = &db.store;
        let now = Timestamp::now();
        let (id, secret) = (InboxLinkId::generate(), Secret::generate());
        let alice = UserId::from_db("alice".into());
        let link = InboxLink {
            user: alice.clone(),
            secret_hash: secret.hash(),
            expires_at: now.plus(std::time::Duration::from_secs(60)),
        };
        s.create_inbox_link(&id, &link, link.expires_at, now)
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        let found = s.inbox_link(&id).await.ok().flatten();
        let found = found.unwrap_or_else(|| unreachable!("the link is stored"));
        assert_eq!(found.user, alice);
        assert!(found.secret_hash.matches(&secret));
        assert!(!found.secret_hash.matches(&Secret::generate()));
        let other = InboxLinkId::generate();
        assert!(s.inbox_link(&other).await.ok().flatten().is_none());
        // The janitor removes it once its purge time passed.
        let later = link.expires_at.plus(std::time::Duration::from_secs(1));
        let counts = s.janitor_sweep(later).await.unwrap_or_default();
        assert_eq!(counts.inbox_links, 1);
        assert!(s.inbox_link(&id).await.ok().flatten().is_none());
    }

    #[tokio::test]
    async fn a_user_is_known_once_the_administrator_set_them() {
        let db = fresh().await;
        let s = &db.store;
        let nobody = UserId::from_db("nobody".into());
        assert_eq!(s.user_known(&nobody).await.ok(), Some(false));
        let change = crate::db::admin::UserChange {
            can_approve: Some(true),
            mode: None,
            ..Default::default()
        };
        s.set_user(&nobody, change, "test", Timestamp::now())
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(s.user_known(&nobody).await.ok(), Some(true));
    }
}
