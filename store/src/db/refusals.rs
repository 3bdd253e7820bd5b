//! The refusal record: what the proxy refused for each turn (one row per host, port, reason
//! and package, with a count), and what the agent and the admin dry run read back. Writing
//! it is `record`; what each row's requests were (method, URL, upload) is `evidence`; the
//! allowed-traffic summary beside it is `egress`.

mod evidence;
mod record;

use sqlx::Row as _;

use super::{Store, StoreError};
use crate::host::Host;
use crate::ids::{ChatId, TurnId, UserId};
use crate::package::Package;
use crate::reason::RefusalReason;
use crate::time::Timestamp;

/// The card's evidence, read per turn.
pub use evidence::{EvidenceRow, PER_ROW as EVIDENCE_PER_ROW};

/// The allowed-traffic words, at the path callers have always named them by.
pub use super::egress::{EgressEvent, EgressRow};

/// One refusal to record.
#[derive(Debug, Clone)]
pub struct RefusalEvent {
    /// The turn whose credential made the request.
    pub turn: TurnId,
    /// The normalised target host (or the raw authority text for unparseable ones).
    pub host: String,
    /// Target port.
    pub port: u16,
    /// Why.
    pub reason: RefusalReason,
    /// Sanitised sample URL (plain HTTP only).
    pub url: Option<String>,
    /// The package a `package_not_approved` refusal is about (canonical spelling); the
    /// record keeps one row per package.
    pub package: Option<Package>,
    /// When.
    pub at: Timestamp,
    /// Shadow mode: recorded, but the request was allowed.
    pub shadow: bool,
    /// The request method, when the proxy saw the request (plain HTTP or an inspected host).
    pub method: Option<String>,
    /// The request carried a body (POST, PUT, PATCH, or a body on any method): the card
    /// flags it as an upload. `false` when the proxy could not see the request.
    pub upload: bool,
    /// The command the sandbox reported as having opened a captured connection (program and
    /// first arguments, bounded, printable ASCII): the sandbox's claim, shown as such, never
    /// the proxy's fact. `None` when nothing was reported.
    pub command: Option<String>,
}

/// What a refusal candidate is about: the database may still allow it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A host, allowed by an admin site or a site approval of the chat.
    Site(Host),
    /// A package (and the version a request names, if any), allowed by an admin package or
    /// a package approval of the chat whose pin admits the version.
    Package {
        /// The canonical package.
        package: Package,
        /// The version the request names (`None`: metadata about the package).
        version: Option<String>,
    },
}

/// A refusal the proxy is about to make because nothing it holds in memory allows the host
/// or package; [`Store::refuse_unless_allowed`] asks the database before recording it.
#[derive(Debug, Clone)]
pub struct RefusalCandidate {
    /// The refusal (reason `not_approved` or `package_not_approved`) to record if the
    /// subject is still not allowed.
    pub event: RefusalEvent,
    /// The turn's user, whose chat approvals count.
    pub user: UserId,
    /// The turn's chat.
    pub chat: ChatId,
    /// What to check.
    pub subject: Subject,
}

/// One row of a turn's refusal record.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RefusalRow {
    /// Refused host.
    pub host: String,
    /// Refused port.
    pub port: u16,
    /// Why.
    pub reason: RefusalReason,
    /// Whether a person could approve it.
    pub approvable: bool,
    /// Latest sanitised sample URL, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Latest request method, when the proxy saw the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The package refused (`package_not_approved` only; canonical spelling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// How many times.
    pub count: i64,
    /// First time.
    pub first_seen: Timestamp,
    /// Latest time.
    pub last_seen: Timestamp,
    /// Shadow mode: the proxy would have refused this but let it through (only present
    /// when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

/// A refusal row with the chat it belongs to: what an admin dry run matches a pattern against.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecentRefusal {
    /// The turn refused.
    pub turn_id: String,
    /// Its user.
    pub user_id: String,
    /// Its chat.
    pub chat_id: String,
    /// The refusal itself.
    #[serde(flatten)]
    pub row: RefusalRow,
}

impl Store {
    /// Refusals last seen at or after `since`, newest first, at most `limit`: the admin dry
    /// run matches a candidate pattern against them in Rust, with the same pattern code the
    /// proxy uses (never a SQL `LIKE`).
    pub async fn recent_refusals(
        &self,
        since: Timestamp,
        limit: i64,
    ) -> Result<Vec<RecentRefusal>, StoreError> {
        let rows = sqlx::query(
            "SELECT r.host, r.port, r.reason, r.url, r.count, r.first_seen, r.last_seen, \
             r.shadow, r.method, r.package, r.turn_id, t.user_id, t.chat_id \
             FROM refusals r JOIN turns t ON t.turn_id = r.turn_id \
             WHERE r.last_seen >= $1 ORDER BY r.last_seen DESC LIMIT $2",
        )
        .bind(since.millis())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(RecentRefusal {
                    row: refusal_from_row(r, &self.whole_host_ok)?,
                    turn_id: r.try_get(10)?,
                    user_id: r.try_get(11)?,
                    chat_id: r.try_get(12)?,
                })
            })
            .collect()
    }

    /// A turn's refusal record, most recent first, plus the overflow counter.
    pub async fn list_refusals(&self, turn: &TurnId) -> Result<(Vec<RefusalRow>, i64), StoreError> {
        let rows = sqlx::query(
            "SELECT host, port, reason, url, count, first_seen, last_seen, shadow, method, package \
             FROM refusals WHERE turn_id = $1 ORDER BY last_seen DESC, host, port, reason, package",
        )
        .bind(turn.as_str())
        .fetch_all(self.pool())
        .await?;
        let refusals = rows
            .iter()
            .map(|r| refusal_from_row(r, &self.whole_host_ok))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let overflow: Option<i64> =
            sqlx::query("SELECT refusal_overflow FROM turns WHERE turn_id = $1")
                .bind(turn.as_str())
                .fetch_optional(self.pool())
                .await?
                .map(|r| r.try_get(0))
                .transpose()?;
        Ok((refusals, overflow.unwrap_or(0)))
    }
}

/// Parses the first ten columns `host, port, reason, url, count, first_seen, last_seen,
/// shadow, method, package`. A package refusal that names no package (a registry request the
/// proxy could not map) is not approvable: no approval could name what it was about.
fn refusal_from_row(
    r: &sqlx::any::AnyRow,
    whole_host_ok: &[Host],
) -> Result<RefusalRow, StoreError> {
    let reason = crate::db::word_column(r, 2, RefusalReason::parse, "refusals.reason")?;
    let package = Some(r.try_get::<String, _>(9)?).filter(|p| !p.is_empty());
    let host: String = r.try_get(0)?;
    let approvable = crate::refusal_approvable(reason, package.is_some(), &host, whole_host_ok);
    Ok(RefusalRow {
        package,
        host,
        port: u16::try_from(r.try_get::<i64, _>(1)?)
            .map_err(|_| StoreError::Corrupt("refusals.port"))?,
        reason,
        approvable,
        url: r.try_get(3)?,
        count: r.try_get(4)?,
        first_seen: Timestamp::from_millis(r.try_get(5)?),
        last_seen: Timestamp::from_millis(r.try_get(6)?),
        shadow: r.try_get::<i64, _>(7)? != 0,
        method: r.try_get(8)?,
    })
}
