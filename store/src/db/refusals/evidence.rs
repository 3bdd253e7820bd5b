//! The refusal record's evidence: per turn and (host, port, reason, package, method, URL
//! without query), what the sandbox really tried, how often, when, and whether it carried a
//! body. Written inside the recording transaction as one statement per batch (never one per
//! request), read back for the card, so a card shows the proxy's own facts beside the
//! agent's story.

use std::collections::HashMap;

use sqlx::{Any, Row as _, Transaction};

use super::RefusalEvent;
use crate::db::{Store, StoreError, flag};
use crate::ids::TurnId;
use crate::package::Package;
use crate::reason::RefusalReason;
use crate::time::Timestamp;

/// At most this many distinct (method, URL) rows per refusal-record row (turn, host, port,
/// reason, package): a turn keeps at most `PER_ROW × max-refusals-per-turn` evidence rows. A
/// script probing a thousand paths of one host grows that host's refusal count, not the
/// evidence, and cannot push another host's evidence out.
pub const PER_ROW: i64 = 16;

/// Rows per statement: 13 bound values each stays far below both databases' limits.
const ROWS_PER_STATEMENT: usize = 256;

/// One line of evidence: requests of one kind the proxy refused in a turn.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EvidenceRow {
    /// Refused host.
    pub host: String,
    /// Refused port.
    pub port: u16,
    /// Why.
    pub reason: RefusalReason,
    /// The package, for `package_not_approved` (canonical spelling).
    pub package: Option<String>,
    /// The request method, when the proxy saw the request (not inside a tunnel it does not
    /// inspect).
    pub method: Option<String>,
    /// The URL without query or fragment, when the proxy saw it.
    pub url: Option<String>,
    /// Some such request carried a body (POST, PUT, PATCH, or a body on any method).
    pub upload: bool,
    /// How many such requests.
    pub count: i64,
    /// First time.
    pub first_seen: Timestamp,
    /// Latest time.
    pub last_seen: Timestamp,
    /// The command the sandbox reported for such a request (the first one reported is
    /// kept): its claim, not the proxy's fact.
    pub command: Option<String>,
}

/// The evidence key of a refusal: its record row's key plus method and URL (`''` unknown).
type Key<'a> = (
    &'a TurnId,
    &'a str,
    u16,
    RefusalReason,
    &'a str,
    &'a str,
    &'a str,
);

/// A batch's requests of one kind, folded.
struct Folded<'a> {
    event: &'a RefusalEvent,
    count: i64,
    first: Timestamp,
    last: Timestamp,
    upload: bool,
    /// The first command reported for the kind in the batch.
    command: Option<&'a str>,
    /// How many other kinds of the same record row came before it in the batch: the bound
    /// check counts them as if already written, so one batch cannot overshoot [`PER_ROW`].
    rank: i64,
}

fn key(e: &RefusalEvent) -> Key<'_> {
    (
        &e.turn,
        e.host.as_str(),
        e.port,
        e.reason,
        e.package.as_ref().map_or("", Package::as_str),
        e.method.as_deref().unwrap_or(""),
        e.url.as_deref().unwrap_or(""),
    )
}

/// Folds events into one entry per evidence key, in first-seen order.
fn fold<'a>(events: &[&'a RefusalEvent]) -> Vec<Folded<'a>> {
    let mut out: Vec<Folded<'a>> = Vec::new();
    let mut index: HashMap<Key<'a>, usize> = HashMap::new();
    let mut kinds: HashMap<(&TurnId, &str, u16, RefusalReason, &str), i64> = HashMap::new();
    for &e in events {
        let k = key(e);
        if let Some(&i) = index.get(&k) {
            let f = &mut out[i];
            f.count += 1;
            f.first = f.first.min(e.at);
            f.last = f.last.max(e.at);
            f.upload |= e.upload;
            f.command = f.command.or(e.command.as_deref());
            continue;
        }
        let rank = kinds.entry((k.0, k.1, k.2, k.3, k.4)).or_insert(0);
        index.insert(k, out.len());
        out.push(Folded {
            event: e,
            count: 1,
            first: e.at,
            last: e.at,
            upload: e.upload,
            command: e.command.as_deref(),
            rank: *rank,
        });
        *rank += 1;
    }
    out
}

/// The upsert for `rows` rows of thirteen values (`$1`–`$13` for the first): a kind already
/// kept grows; a new kind is kept while its record row holds fewer than [`PER_ROW`]. The
/// first command reported for a kind stays (a later one never replaces it).
fn upsert_sql(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|r| {
            let n: Vec<String> = (1..=13).map(|c| format!("${}", r * 13 + c)).collect();
            format!("({})", n.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO refusal_evidence (turn_id, host, port, reason, package, method, url, \
         upload, count, first_seen, last_seen, command) \
         SELECT v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, \
         v.column8, v.column9, v.column10, v.column11, v.column13 FROM (VALUES {}) AS v \
         WHERE EXISTS (SELECT 1 FROM refusal_evidence e WHERE e.turn_id = v.column1 \
             AND e.host = v.column2 AND e.port = v.column3 AND e.reason = v.column4 \
             AND e.package = v.column5 AND e.method = v.column6 AND e.url = v.column7) \
            OR (SELECT COUNT(*) FROM refusal_evidence e WHERE e.turn_id = v.column1 \
             AND e.host = v.column2 AND e.port = v.column3 AND e.reason = v.column4 \
             AND e.package = v.column5) + v.column12 < {PER_ROW} \
         ON CONFLICT (turn_id, host, port, reason, package, method, url) DO UPDATE SET \
           count = refusal_evidence.count + excluded.count, \
           first_seen = CASE WHEN excluded.first_seen < refusal_evidence.first_seen \
             THEN excluded.first_seen ELSE refusal_evidence.first_seen END, \
           last_seen = CASE WHEN excluded.last_seen > refusal_evidence.last_seen \
             THEN excluded.last_seen ELSE refusal_evidence.last_seen END, \
           upload = CASE WHEN excluded.upload > refusal_evidence.upload \
             THEN excluded.upload ELSE refusal_evidence.upload END, \
           command = COALESCE(refusal_evidence.command, excluded.command)",
        values.join(", ")
    )
}

/// Writes the evidence of `events` (refusals the record kept; shadow-mode ones went through
/// and are left out) inside `tx`: one statement for a whole batch.
pub(super) async fn insert_evidence(
    tx: &mut Transaction<'static, Any>,
    events: &[&RefusalEvent],
) -> Result<(), StoreError> {
    let real: Vec<&RefusalEvent> = events.iter().copied().filter(|e| !e.shadow).collect();
    let mut folded = fold(&real);
    // In key order: two proxies sharing PostgreSQL then take the rows' locks in one order.
    folded.sort_by(|a, b| key(a.event).cmp(&key(b.event)));
    for chunk in folded.chunks(ROWS_PER_STATEMENT) {
        let sql = upsert_sql(chunk.len());
        let mut q = sqlx::query::<Any>(sqlx::AssertSqlSafe(sql));
        for f in chunk {
            let (turn, host, port, reason, package, method, url) = key(f.event);
            q = q
                .bind(turn.as_str())
                .bind(host)
                .bind(i64::from(port))
                .bind(reason.as_str())
                .bind(package)
                .bind(method)
                .bind(url)
                .bind(flag(f.upload))
                .bind(f.count)
                .bind(f.first.millis())
                .bind(f.last.millis())
                .bind(f.rank)
                .bind(f.command);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// A turn's evidence, most recently seen first (then in key order, so the same record
    /// always reads the same).
    pub async fn list_evidence(&self, turn: &TurnId) -> Result<Vec<EvidenceRow>, StoreError> {
        let query = sqlx::query(
            "SELECT host, port, reason, package, method, url, upload, count, first_seen, \
             last_seen, command FROM refusal_evidence WHERE turn_id = $1 \
             ORDER BY last_seen DESC, host, port, reason, package, method, url",
        )
        .bind(turn.as_str());
        crate::db::fetch_all(self.pool(), query).await
    }
}

impl crate::db::FromRow for EvidenceRow {
    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        let known = |s: String| Some(s).filter(|s| !s.is_empty());
        Ok(Self {
            host: r.try_get(0)?,
            port: u16::try_from(r.try_get::<i64, _>(1)?)
                .map_err(|_| StoreError::Corrupt("refusal_evidence.port"))?,
            reason: crate::db::word_column(r, 2, RefusalReason::parse, "refusal_evidence.reason")?,
            package: known(r.try_get(3)?),
            method: known(r.try_get(4)?),
            url: known(r.try_get(5)?),
            upload: r.try_get::<i64, _>(6)? != 0,
            count: r.try_get(7)?,
            first_seen: Timestamp::from_millis(r.try_get(8)?),
            last_seen: Timestamp::from_millis(r.try_get(9)?),
            command: r.try_get(10)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing;

    fn event(turn: &TurnId, host: &str, method: &str, url: &str, at: i64) -> RefusalEvent {
        RefusalEvent {
            turn: turn.clone(),
            host: host.into(),
            port: 80,
            reason: RefusalReason::NotApproved,
            url: Some(url.into()).filter(|u: &String| !u.is_empty()),
            package: None,
            at: Timestamp::from_millis(at),
            shadow: false,
            method: Some(method.into()).filter(|m: &String| !m.is_empty()),
            upload: method == "POST",
            command: None,
        }
    }

    #[tokio::test]
    async fn each_kind_of_request_is_counted_with_its_times_and_upload_flag()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let s = &db.store;
        let turn = testing::open_turn(s, "u1", "c1").await?.id;
        let up = "http://up.example.net/upload";
        let get = "http://get.example.org/data.csv";
        s.record_refusals(
            &[
                event(&turn, "up.example.net", "POST", up, 10),
                event(&turn, "get.example.org", "GET", get, 11),
                event(&turn, "up.example.net", "POST", up, 12),
            ],
            256,
        )
        .await?;
        // A second batch grows the kinds already kept, and a body on a GET is an upload too.
        let with_body = RefusalEvent {
            upload: true,
            ..event(&turn, "get.example.org", "GET", get, 5)
        };
        let shadowed = RefusalEvent {
            shadow: true,
            ..event(&turn, "get.example.org", "HEAD", get, 20)
        };
        s.record_refusals(&[with_body, shadowed], 256).await?;
        let rows = s.list_evidence(&turn).await?;
        type Seen<'a> = (&'a str, Option<&'a str>, i64, i64, i64, bool);
        let seen: Vec<Seen<'_>> = rows
            .iter()
            .map(|r| {
                (
                    r.host.as_str(),
                    r.method.as_deref(),
                    r.count,
                    r.first_seen.millis(),
                    r.last_seen.millis(),
                    r.upload,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("up.example.net", Some("POST"), 2, 10, 12, true),
                ("get.example.org", Some("GET"), 2, 5, 11, true),
            ],
            "most recent first; a shadow-mode request went through and is no evidence"
        );
        assert_eq!(rows[0].url.as_deref(), Some(up));
        assert_eq!(rows[0].reason, RefusalReason::NotApproved);
        assert_eq!((rows[0].port, rows[0].package.as_deref()), (80, None));
        Ok(())
    }

    #[tokio::test]
    async fn the_first_command_reported_for_a_kind_is_kept_and_none_stays_absent()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let s = &db.store;
        let turn = testing::open_turn(s, "u1", "c1").await?.id;
        let said = |host: &str, command: Option<&str>, at: i64| RefusalEvent {
            command: command.map(Into::into),
            ..event(&turn, host, "", "", at)
        };
        // Unreported first, then two claims in one batch and a third in the next.
        s.record_refusals(&[said("a.example.com", None, 1)], 256)
            .await?;
        s.record_refusals(
            &[
                said("a.example.com", Some("curl -s"), 2),
                said("a.example.com", Some("wget -q"), 3),
                said("b.example.com", None, 4),
            ],
            256,
        )
        .await?;
        s.record_refusals(&[said("a.example.com", Some("python3 x"), 5)], 256)
            .await?;
        let rows = s.list_evidence(&turn).await?;
        let seen: Vec<(&str, Option<&str>, i64)> = rows
            .iter()
            .map(|r| (r.host.as_str(), r.command.as_deref(), r.count))
            .collect();
        assert_eq!(
            seen,
            [
                ("a.example.com", Some("curl -s"), 4),
                ("b.example.com", None, 1)
            ]
        );
        Ok(())
    }

    #[tokio::test]
    async fn the_evidence_is_bounded_per_record_row_and_follows_the_host_cap()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let s = &db.store;
        let turn = testing::open_turn(s, "u1", "c1").await?.id;
        let probe = |i: i64| {
            let url = format!("http://a.example.com/p{i}");
            event(&turn, "a.example.com", "GET", &url, i)
        };
        // Ten kinds in one batch, then twenty more over two batches: sixteen are kept.
        let first: Vec<RefusalEvent> = (0..10).map(probe).collect();
        s.record_refusals(&first, 1).await?;
        for range in [10..20, 20..30] {
            let batch: Vec<RefusalEvent> = range.map(probe).collect();
            s.record_refusals(&batch, 1).await?;
        }
        // A kind already kept still grows; a tunnel (no method, no URL) past the bound does not.
        s.record_refusals(&[probe(3), event(&turn, "a.example.com", "", "", 40)], 1)
            .await?;
        // A host past max-refusals-per-turn is counted as overflow only: no evidence.
        s.record_refusals(&[event(&turn, "b.example.com", "GET", "", 50)], 1)
            .await?;
        let rows = s.list_evidence(&turn).await?;
        assert_eq!(rows.len(), usize::try_from(PER_ROW)?);
        assert!(rows.iter().all(|r| r.host == "a.example.com"));
        let p3 = rows
            .iter()
            .find(|r| r.url.as_deref() == Some("http://a.example.com/p3"))
            .ok_or("p3 kept")?;
        assert_eq!(p3.count, 2);
        let (record, overflow) = s.list_refusals(&turn).await?;
        assert_eq!(record.len(), 1);
        assert_eq!(record[0].count, 32, "the record still counts every request");
        assert_eq!(overflow, 1);
        Ok(())
    }
}
