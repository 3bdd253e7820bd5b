//! The cache epoch, read and pushed. Triggers grow it whenever something that was allowed may
//! no longer be (migrations 2, 5, 6 and 16): an approval row deleted, shortened or taken over,
//! an admin site or package removed, a turn shortened (a hidden chat), a user's mode set.
//! Proxies drop cached allows and re-check their open connections when it moves.
//!
//! They learn that it moved the moment the change commits, not at their next poll: every
//! change that can move it announces itself — inside its transaction on PostgreSQL (`NOTIFY`,
//! delivered to every process's listener only when the transaction commits) and, after the
//! commit, to this process's subscribers (an in-process signal, which is all SQLite's one
//! process needs). A woken proxy reads the epoch (one row) and acts only if it moved, so an
//! announcement that moved nothing costs one read per proxy. Proxies still poll, slowly, for
//! an announcement lost while a listener reconnected or made by another process on the same
//! SQLite file.
//!
//! Which changes announce: the audited kinds of [`AuditKind::may_move_epoch`] (every path that
//! fires one of the triggers is one of those) and the janitor's removal of expired approvals.

use sqlx::{Acquire as _, Any, Row as _, Transaction};
use tokio::sync::watch;

use super::audit::AuditKind;
use super::signal::{Topic, notify};
use super::{Backend, Store, StoreError};

impl AuditKind {
    /// Whether a change audited as this kind may move the cache epoch, so its commit is
    /// announced to the proxies: a person's decision (a decline deletes the card's rows, an
    /// approval may take a row over), a card past its claim cap, a revocation, a hidden chat,
    /// an administrator's change (a removed site or package, a user's right or mode; the
    /// other admin changes announce for nothing, which costs each proxy one read).
    pub(crate) fn may_move_epoch(self) -> bool {
        match self {
            Self::ApprovalResolved
            | Self::ClaimCapExpired
            | Self::ApprovalRevoked
            | Self::ChatHidden
            | Self::AdminChange => true,
            Self::TurnOpened | Self::ApprovalRequested | Self::DecisionRejected => false,
        }
    }
}

impl Store {
    /// The cache epoch: proxies drop cached allow decisions when it changes (see migration 2).
    pub async fn cache_epoch(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT epoch FROM cache_epoch WHERE id = 1")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get(0)?)
    }

    /// A receiver that changes as soon as a change that may have moved the cache epoch
    /// committed, in this process or (on PostgreSQL) in any process. The first subscriber on
    /// PostgreSQL starts this process's listener.
    pub fn subscribe_epoch(&self) -> watch::Receiver<u64> {
        self.signal.subscribe(Topic::Epoch)
    }

    /// Inside a transaction that may move the epoch: queues the other processes'
    /// notification (PostgreSQL sends it only if `tx` commits). Nothing to do on SQLite.
    pub(crate) async fn announce_epoch(
        &self,
        tx: &mut Transaction<'static, Any>,
    ) -> Result<(), StoreError> {
        if self.backend() == Backend::Postgres {
            notify(tx.acquire().await?, Topic::Epoch).await?;
        }
        Ok(())
    }

    /// After the commit of a transaction that announced itself: wakes this process's
    /// subscribers, who now read the committed epoch.
    pub(crate) fn epoch_committed(&self) {
        self.signal.bump(Topic::Epoch);
    }

    /// After a change made outside a transaction that may have moved the epoch (the
    /// janitor's): tells every process at once.
    pub(crate) async fn epoch_moved(&self) -> Result<(), StoreError> {
        if self.backend() == Backend::Postgres {
            notify(&mut *self.pool().acquire().await?, Topic::Epoch).await?;
        }
        self.epoch_committed();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
