//! The refusal record and the allowed-traffic summary: what the proxy writes on every
//! decision, in batches, and what the agent reads right after a failed script.

use sqlx::Row as _;

use super::policy::{package_allowed_on, site_allowed_on};
use super::{Store, StoreError};
use crate::grant::Grant;
use crate::host::Host;
use crate::ids::{ChatId, TurnId, UserId};
use crate::package::Package;
use crate::reason::RefusalReason;
use crate::time::Timestamp;

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

/// One allowed connection's traffic, summarised per (turn, host).
#[derive(Debug, Clone)]
pub struct EgressEvent {
    /// The turn.
    pub turn: TurnId,
    /// The host reached.
    pub host: Host,
    /// New connections (tunnels or forwarded requests) to count.
    pub connections: i64,
    /// Bytes from the client to the origin.
    pub bytes_up: i64,
    /// Bytes from the origin to the client.
    pub bytes_down: i64,
    /// When.
    pub at: Timestamp,
}

/// A turn's allowed traffic to one host.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EgressRow {
    /// Host reached.
    pub host: String,
    /// Connections or forwarded requests.
    pub connections: i64,
    /// Bytes sent upstream.
    pub bytes_up: i64,
    /// Bytes received.
    pub bytes_down: i64,
    /// First time.
    pub first_seen: Timestamp,
    /// Latest time.
    pub last_seen: Timestamp,
}

/// Folds a batch into one event per (turn, host, port, reason) with its count, keeping the
/// latest time and sample URL, in first-seen order: a retry storm against one host costs one
/// statement per batch instead of one per request.
fn coalesce<'a>(events: &[&'a RefusalEvent]) -> Vec<(&'a RefusalEvent, i64)> {
    let mut out: Vec<(&'a RefusalEvent, i64)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for &e in events {
        let key = (&e.turn, e.host.as_str(), e.port, e.reason, &e.package);
        match index.get(&key) {
            Some(&i) => {
                let (latest, n): &mut (&'a RefusalEvent, i64) = &mut out[i];
                *n += 1;
                if e.at >= latest.at && (e.url.is_some() || latest.url.is_none()) {
                    *latest = e;
                }
            }
            None => {
                index.insert(key, out.len());
                out.push((e, 1));
            }
        }
    }
    out
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
                    row: refusal_from_row(r)?,
                    turn_id: r.try_get(10)?,
                    user_id: r.try_get(11)?,
                    chat_id: r.try_get(12)?,
                })
            })
            .collect()
    }

    /// Records refusals in one transaction (the proxy batches concurrent refusals so each
    /// commit serves many requests). Per turn at most `max_hosts` distinct hosts are kept;
    /// past that the turn's overflow counter grows. Returns only after commit, so a caller
    /// that sends its `403` afterwards never reports a refusal the record lacks.
    pub async fn record_refusals(
        &self,
        events: &[RefusalEvent],
        max_hosts: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let appended = insert_refusals(&mut tx, events.iter(), max_hosts).await?;
        tx.commit().await?;
        if appended {
            self.events_committed();
        }
        Ok(())
    }

    /// The proxy's refusal path in one transaction: each candidate (a host nothing in memory
    /// allowed) is checked against the administrators' list and the chat's approvals, and
    /// recorded only if still not allowed; `refusals` (other reasons) are recorded as they are.
    /// Returns, per candidate, the grant that allows it after all (`None`: refused and
    /// recorded), so a cached allow can end with its grant. Checking inside the
    /// recording transaction sees every committed approval, so a fresh approval still wins on
    /// the very next request, while a burst of refusals costs one transaction rather than a
    /// read per request plus a write per batch (the database hand-offs were most of a
    /// refusal's cost, measured in `bench/`).
    pub async fn refuse_unless_allowed(
        &self,
        candidates: &[RefusalCandidate],
        refusals: &[RefusalEvent],
        max_hosts: i64,
        now: Timestamp,
    ) -> Result<Vec<Option<Grant>>, StoreError> {
        let mut tx = self.begin().await?;
        let mut verdicts = Vec::with_capacity(candidates.len());
        let mut known: std::collections::HashMap<(&UserId, &ChatId, &Subject), Option<Grant>> =
            std::collections::HashMap::new();
        for c in candidates {
            let key = (&c.user, &c.chat, &c.subject);
            let allowed = match known.get(&key) {
                Some(a) => a.clone(),
                None => {
                    let a = match &c.subject {
                        Subject::Site(host) => {
                            site_allowed_on(&mut tx, &c.user, &c.chat, host, now).await?
                        }
                        Subject::Package { package, version } => {
                            package_allowed_on(
                                &mut tx,
                                &c.user,
                                &c.chat,
                                package,
                                version.as_deref(),
                                now,
                            )
                            .await?
                        }
                    };
                    known.insert(key, a.clone());
                    a
                }
            };
            verdicts.push(allowed);
        }
        let refused = candidates
            .iter()
            .zip(&verdicts)
            .filter(|(_, allowed)| allowed.is_none())
            .map(|(c, _)| &c.event);
        let appended = insert_refusals(&mut tx, refusals.iter().chain(refused), max_hosts).await?;
        tx.commit().await?;
        if appended {
            self.events_committed();
        }
        Ok(verdicts)
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
            .map(refusal_from_row)
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

    /// Adds allowed-traffic counters, batched like refusals.
    pub async fn record_egress(&self, events: &[EgressEvent]) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        for e in events {
            sqlx::query(
                "INSERT INTO egress (turn_id, host, connections, bytes_up, bytes_down, first_seen, last_seen) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6) \
                 ON CONFLICT (turn_id, host) DO UPDATE SET \
                   connections = egress.connections + excluded.connections, \
                   bytes_up = egress.bytes_up + excluded.bytes_up, \
                   bytes_down = egress.bytes_down + excluded.bytes_down, \
                   last_seen = excluded.last_seen",
            )
            .bind(e.turn.as_str())
            .bind(e.host.as_str())
            .bind(e.connections)
            .bind(e.bytes_up)
            .bind(e.bytes_down)
            .bind(e.at.millis())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A turn's allowed traffic per host.
    pub async fn list_egress(&self, turn: &TurnId) -> Result<Vec<EgressRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT host, connections, bytes_up, bytes_down, first_seen, last_seen FROM egress \
             WHERE turn_id = $1 ORDER BY host",
        )
        .bind(turn.as_str())
        .fetch_all(self.pool())
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(EgressRow {
                    host: r.try_get(0)?,
                    connections: r.try_get(1)?,
                    bytes_up: r.try_get(2)?,
                    bytes_down: r.try_get(3)?,
                    first_seen: Timestamp::from_millis(r.try_get(4)?),
                    last_seen: Timestamp::from_millis(r.try_get(5)?),
                })
            })
            .collect()
    }
}
/// Parses the first ten columns `host, port, reason, url, count, first_seen, last_seen,
/// shadow, method, package`. A package refusal that names no package (a registry request the
/// proxy could not map) is not approvable: no approval could name what it was about.
fn refusal_from_row(r: &sqlx::any::AnyRow) -> Result<RefusalRow, StoreError> {
    let reason = RefusalReason::parse(&r.try_get::<String, _>(2)?)
        .ok_or(StoreError::Corrupt("refusals.reason"))?;
    let package = Some(r.try_get::<String, _>(9)?).filter(|p| !p.is_empty());
    let approvable = reason.approvable_for(package.is_some());
    Ok(RefusalRow {
        package,
        host: r.try_get(0)?,
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

/// The `package` key column: the canonical name, or `''` for a refusal about a host.
fn package_key(e: &RefusalEvent) -> &str {
    e.package.as_ref().map_or("", Package::as_str)
}

/// Writes refusals (coalesced) inside `tx`, keeping at most `max_hosts` distinct hosts (a
/// refused package counts as one more: the record keeps one row per package) per turn and
/// counting the rest in the turn's overflow. Each *new* (turn, host, port, reason)
/// row also appends one `refusal.recorded` event; repeats only grow the row's count (a retry
/// storm must not flood the chat's stream — the count is in the refusal record). Returns
/// whether any event was appended.
async fn insert_refusals<'a>(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    events: impl Iterator<Item = &'a RefusalEvent>,
    max_hosts: i64,
) -> Result<bool, StoreError> {
    let events: Vec<&RefusalEvent> = events.collect();
    let mut fresh: Vec<&RefusalEvent> = Vec::new();
    for (e, n) in coalesce(&events) {
        let updated = sqlx::query(
            "UPDATE refusals SET count = count + $7, last_seen = $5, url = COALESCE($6, url), \
                 shadow = $8, method = COALESCE($9, method) \
                 WHERE turn_id = $1 AND host = $2 AND port = $3 AND reason = $4 AND package = $10",
        )
        .bind(e.turn.as_str())
        .bind(&e.host)
        .bind(i64::from(e.port))
        .bind(e.reason.as_str())
        .bind(e.at.millis())
        .bind(e.url.as_deref())
        .bind(n)
        .bind(super::flag(e.shadow))
        .bind(e.method.as_deref())
        .bind(package_key(e))
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if updated > 0 {
            continue;
        }
        let inserted = sqlx::query(
            "INSERT INTO refusals (turn_id, host, port, reason, url, count, first_seen, last_seen, \
                 shadow, method, package) SELECT $1, $2, $3, $4, $5, $8, $6, $6, $9, $10, $11 \
                 WHERE EXISTS (SELECT 1 FROM refusals WHERE turn_id = $1 AND host = $2 AND package = $11) \
                    OR (SELECT COUNT(*) FROM (SELECT DISTINCT host, package FROM refusals \
                        WHERE turn_id = $1) d) < $7",
        )
        .bind(e.turn.as_str())
        .bind(&e.host)
        .bind(i64::from(e.port))
        .bind(e.reason.as_str())
        .bind(e.url.as_deref())
        .bind(e.at.millis())
        .bind(max_hosts)
        .bind(n)
        .bind(super::flag(e.shadow))
        .bind(e.method.as_deref())
        .bind(package_key(e))
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            sqlx::query(
                "UPDATE turns SET refusal_overflow = refusal_overflow + $2 WHERE turn_id = $1",
            )
            .bind(e.turn.as_str())
            .bind(n)
            .execute(&mut **tx)
            .await?;
        } else {
            fresh.push(e);
        }
    }
    // Last in the transaction: on PostgreSQL the append holds the ordering lock to commit.
    for e in &fresh {
        let mut data = serde_json::json!({
            "turn_id": e.turn.as_str(),
            "host": e.host,
            "port": e.port,
            "reason": e.reason,
            "approvable": e.reason.approvable_for(e.package.is_some()),
        });
        if let (Some(obj), Some(url)) = (data.as_object_mut(), &e.url) {
            obj.insert("url".into(), url.clone().into());
        }
        if let (Some(obj), Some(method)) = (data.as_object_mut(), &e.method) {
            obj.insert("method".into(), method.clone().into());
        }
        if let (Some(obj), Some(package)) = (data.as_object_mut(), &e.package) {
            obj.insert("package".into(), package.as_str().into());
        }
        // A shadow-mode refusal let the request through: a client must not show it as a block.
        if let (Some(obj), true) = (data.as_object_mut(), e.shadow) {
            obj.insert("shadow".into(), true.into());
        }
        super::events::append_for_turn(tx, e.turn.as_str(), &data, e.at).await?;
    }
    Ok(!fresh.is_empty())
}
