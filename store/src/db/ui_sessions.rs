//! Admin console sessions: a row per signed-in browser holding only the SHA-256 of the session
//! cookie, of its CSRF token and of the admin token it was signed in with (so removing that
//! token ends the session), with an expiry. Signing out deletes the row.

use sqlx::Row as _;

use super::{Store, StoreError};
use crate::ids::SecretHash;
use crate::time::Timestamp;

impl Store {
    /// Stores a new session (every value already hashed).
    pub async fn create_ui_session(
        &self,
        session: &SecretHash,
        csrf: &SecretHash,
        token: &SecretHash,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ui_sessions (session_hash, csrf_hash, token_hash, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(session.as_str())
        .bind(csrf.as_str())
        .bind(token.as_str())
        .bind(now.millis())
        .bind(expires_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The CSRF hash and the signing-in token's hash of a live session; `None` when unknown
    /// or expired.
    pub async fn ui_session(
        &self,
        session: &SecretHash,
        now: Timestamp,
    ) -> Result<Option<(SecretHash, SecretHash)>, StoreError> {
        let row = sqlx::query(
            "SELECT csrf_hash, token_hash FROM ui_sessions WHERE session_hash = $1 \
             AND expires_at > $2",
        )
        .bind(session.as_str())
        .bind(now.millis())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok((
                SecretHash::from_db(r.try_get(0)?),
                SecretHash::from_db(r.try_get(1)?),
            ))
        })
        .transpose()
    }

    /// Ends a session (sign out); `false` when there was none.
    pub async fn delete_ui_session(&self, session: &SecretHash) -> Result<bool, StoreError> {
        self.changed_a_row(
            sqlx::query("DELETE FROM ui_sessions WHERE session_hash = $1").bind(session.as_str()),
        )
        .await
    }
}
