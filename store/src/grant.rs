//! What let a host through: the grant behind an allow decision and the expiry it carries, so
//! a decision remembered in memory ends when the grant behind it ends (and so a later record
//! can say which grant let a connection through).

use std::sync::Arc;

use crate::access::Access;
use crate::path_prefix::PathPrefix;
use crate::reason::RefusalReason;
use crate::spelling::spelling;
use crate::time::Timestamp;

/// How far a person's approval reaches: this turn (and its resumed continuation, which runs
/// on the same turn), the rest of the chat (the default), or every chat of the user (only
/// where the administrator allows it).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The card's turn only.
    Turn,
    /// Every turn of the chat.
    #[default]
    Chat,
    /// Every chat of the user.
    User,
}

spelling!(Scope {
    Turn => "turn",
    Chat => "chat",
    User => "user",
});

impl Scope {
    /// Whether this is [`Scope::Chat`] (for `skip_serializing_if`).
    pub fn is_chat(&self) -> bool {
        *self == Self::Chat
    }
}

/// The approval row a counted grant spends its uses from (its primary key), and how many
/// uses it had when it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountedRow {
    /// The row's user.
    pub user_id: String,
    /// Its chat (`''` for a user-scope row).
    pub chat_id: String,
    /// Its turn (`''` unless turn-scope).
    pub turn_id: String,
    /// The stored site pattern.
    pub value: String,
    /// Uses left when it was read.
    pub uses_left: i64,
}

/// Where an allow came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantKind {
    /// The administrators' pre-approved sites (no expiry; removals bump the cache epoch).
    Admin,
    /// The turn's launch-time sites (they end with the turn).
    Launch,
    /// An approval row of the chat, written when a person approved card `card_id`.
    Approval {
        /// The card (interrupt id) that created the row.
        card_id: String,
    },
    /// Nothing allows it, but shadow mode let it through: the would-be refusal for `reason`
    /// was recorded with `shadow: true` (it ends with the turn; nothing to revoke).
    Shadow {
        /// What it would have been refused for.
        reason: RefusalReason,
    },
    /// A host of an enabled package registry: no site grant lets it through; each request
    /// on it is judged by the package it names (it ends with the turn).
    Registry,
}

/// One grant that allows a host, with the moment it stops counting (`None`: never by itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Where it came from.
    pub kind: GrantKind,
    /// When it stops counting; "expired" means `now >= expires_at`.
    pub expires_at: Option<Timestamp>,
    /// How much of the host it opens.
    pub access: Access,
    /// Whether an administrators' site entry marks the host inspected (`--inspect` patterns
    /// are the proxy's own and are not carried here).
    pub inspect: bool,
    /// The path prefixes it is narrowed to (`None`: the whole host).
    pub paths: Option<Arc<[PathPrefix]>>,
    /// The row whose uses it spends, one per admitted connection (`None`: unlimited). A
    /// counted grant is never remembered: each connection asks the database.
    pub counted: Option<Arc<CountedRow>>,
}

impl Grant {
    /// A grant of `kind` until `expires_at`, opening the whole host and not inspected: what
    /// every source grants until an access level or an inspection mark narrows it.
    fn of(kind: GrantKind, expires_at: Option<Timestamp>) -> Self {
        Self {
            kind,
            expires_at,
            access: Access::Full,
            inspect: false,
            paths: None,
            counted: None,
        }
    }

    /// An administrators' site.
    pub fn admin() -> Self {
        Self::of(GrantKind::Admin, None)
    }

    /// A launch-time site of a turn expiring at `turn_expires_at`.
    pub fn launch(turn_expires_at: Timestamp) -> Self {
        Self::of(GrantKind::Launch, Some(turn_expires_at))
    }

    /// An approval row of card `card_id`, expiring at `expires_at`.
    pub fn approval(card_id: String, expires_at: Timestamp) -> Self {
        Self::of(GrantKind::Approval { card_id }, Some(expires_at))
    }

    /// A shadow-mode pass of a would-be refusal for `reason`.
    pub fn shadow(reason: RefusalReason) -> Self {
        Self::of(GrantKind::Shadow { reason }, None)
    }

    /// A host of an enabled package registry (each request is judged by its package).
    pub fn registry() -> Self {
        Self::of(GrantKind::Registry, None)
    }

    /// Whether the grant still counts at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|e| !e.has_passed(now))
    }

    /// The same grant at access level `access`.
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// How much of the host it opens, widest last: the access level, then the whole host
    /// over path prefixes, then unlimited over counted uses.
    fn breadth(&self) -> (Access, bool, bool) {
        (self.access, self.paths.is_none(), self.counted.is_none())
    }

    /// The grant of two that both allow a host which opens more of it (`full` over `read`,
    /// the whole host over path prefixes, unlimited over counted), else the one that lasts
    /// longer (the host stays allowed as long as either does); on a tie the first. The host
    /// counts as inspected when either says so.
    pub fn outlasting(self, other: Self) -> Self {
        let inspect = self.inspect || other.inspect;
        let mut best = if self.breadth() != other.breadth() {
            if self.breadth() > other.breadth() {
                self
            } else {
                other
            }
        } else {
            match (self.expires_at, other.expires_at) {
                (None, _) => self,
                (Some(_), None) => other,
                (Some(a), Some(b)) if b > a => other,
                _ => self,
            }
        };
        best.inspect = inspect;
        best
    }

    /// The short name of the kind, for logs.
    pub fn kind_str(&self) -> &'static str {
        match self.kind {
            GrantKind::Admin => "admin",
            GrantKind::Launch => "launch",
            GrantKind::Approval { .. } => "approval",
            GrantKind::Shadow { .. } => "shadow",
            GrantKind::Registry => "registry",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_and_precedence() {
        let t = Timestamp::from_millis(1_000);
        let later = Timestamp::from_millis(2_000);
        let a = Grant::approval("int_a".into(), t);
        assert!(a.is_live(Timestamp::from_millis(999)));
        assert!(!a.is_live(t), "expired means now >= expires_at");
        assert!(Grant::admin().is_live(Timestamp::from_millis(i64::MAX)));
        let b = Grant::approval("int_b".into(), later);
        assert_eq!(a.clone().outlasting(b.clone()), b);
        assert_eq!(b.clone().outlasting(a.clone()), b);
        assert_eq!(a.clone().outlasting(Grant::admin()), Grant::admin());
        assert_eq!(Grant::admin().outlasting(a), Grant::admin());
        assert_eq!(Grant::launch(t).expires_at, Some(t));
    }

    #[test]
    fn full_access_wins_over_a_longer_read_grant_and_inspection_sticks() {
        let t = Timestamp::from_millis(1_000);
        let read = Grant {
            inspect: true,
            ..Grant::admin().with_access(Access::Read)
        };
        let full = Grant::approval("int_a".into(), t);
        let best = read.clone().outlasting(full.clone());
        assert_eq!(best.access, Access::Full);
        assert_eq!(best.kind, full.kind);
        assert!(best.inspect, "the admin entry's inspection still applies");
        assert_eq!(full.outlasting(read).access, Access::Full);
    }
}
