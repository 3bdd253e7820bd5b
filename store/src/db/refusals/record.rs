//! Writing the refusal record: the proxy's batches, coalesced per (turn, host, port, reason,
//! package), capped per turn with an overflow counter, each new row announced on the chat's
//! event stream, and the check against the database's grants that a refusal candidate passes
//! first.

use serde_json::Value;
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, Transaction};

use super::evidence::insert_evidence;
use super::{RefusalCandidate, RefusalEvent, Subject};
use crate::db::events::{EventKind, Owner, append};
use crate::db::policy::{ApprovalsOf, package_allowed_on, site_allowed_on};
use crate::db::{Store, StoreError, flag};
use crate::grant::Grant;
use crate::ids::{ChatId, TurnId, UserId};
use crate::package::Package;
use crate::reason::RefusalReason;
use crate::time::Timestamp;

/// The refusal record's key of an event: (turn, host, port, reason, package).
type RowKey<'a> = (&'a TurnId, &'a str, u16, RefusalReason, &'a Option<Package>);

fn row_key(e: &RefusalEvent) -> RowKey<'_> {
    (&e.turn, e.host.as_str(), e.port, e.reason, &e.package)
}

/// Folds a batch into one event per (turn, host, port, reason, package) with its count, in
/// first-seen order, each told by its latest event that carries a sample URL (the latest of
/// all when none does): a retry storm against one host costs one statement per batch
/// instead of one per request.
fn coalesce<'a>(events: &[&'a RefusalEvent]) -> Vec<(&'a RefusalEvent, i64)> {
    let mut out: Vec<(&'a RefusalEvent, i64)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for &e in events {
        let key = row_key(e);
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

impl Store {
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
        let appended =
            insert_refusals(&mut tx, events.iter(), max_hosts, &self.whole_host_ok).await?;
        self.commit_events(tx, appended).await
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
        // Turn-scope approvals make the answer the turn's, not only the chat's.
        type Key<'k> = (&'k TurnId, &'k UserId, &'k ChatId, &'k Subject);
        let mut known: std::collections::HashMap<Key<'_>, Option<Grant>> =
            std::collections::HashMap::new();
        for c in candidates {
            let key = (&c.event.turn, &c.user, &c.chat, &c.subject);
            let at = ApprovalsOf {
                user: &c.user,
                chat: &c.chat,
                turn: &c.event.turn,
            };
            let allowed = match known.get(&key) {
                Some(a) => a.clone(),
                None => {
                    let a = match &c.subject {
                        Subject::Site(host) => site_allowed_on(&mut tx, at, host, now).await?,
                        Subject::Package { package, version } => {
                            package_allowed_on(&mut tx, at, package, version.as_deref(), now)
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
        let appended = insert_refusals(
            &mut tx,
            refusals.iter().chain(refused),
            max_hosts,
            &self.whole_host_ok,
        )
        .await?;
        self.commit_events(tx, appended).await?;
        Ok(verdicts)
    }
}

/// The `package` key column: the canonical name, or `''` for a refusal about a host.
fn package_key(e: &RefusalEvent) -> &str {
    e.package.as_ref().map_or("", Package::as_str)
}

/// Binds a coalesced refusal seen `n` times as `$1`–`$10` (turn, host, port, reason, time,
/// sample URL, count, shadow, method, package): updating its row and inserting a new one
/// name the same values by the same numbers.
fn bind_refusal<'a>(
    sql: &'static str,
    e: &'a RefusalEvent,
    n: i64,
) -> Query<'a, Any, AnyArguments> {
    sqlx::query(sql)
        .bind(e.turn.as_str())
        .bind(&e.host)
        .bind(i64::from(e.port))
        .bind(e.reason.as_str())
        .bind(e.at.millis())
        .bind(e.url.as_deref())
        .bind(n)
        .bind(flag(e.shadow))
        .bind(e.method.as_deref())
        .bind(package_key(e))
}

/// The `refusal.recorded` event of a new row. Optional fields appear only when known, and
/// `shadow` only when true: a shadow-mode refusal let the request through, and a client must
/// not show it as a block.
fn recorded_event(e: &RefusalEvent, whole_host_ok: &[crate::Host]) -> Value {
    let approvable =
        crate::refusal_approvable(e.reason, e.package.is_some(), &e.host, whole_host_ok);
    let mut data = serde_json::json!({
        "turn_id": e.turn.as_str(),
        "host": e.host,
        "port": e.port,
        "reason": e.reason,
        "approvable": approvable,
    });
    let optional = [
        ("url", e.url.clone().map(Value::from)),
        ("method", e.method.clone().map(Value::from)),
        ("package", e.package.as_ref().map(|p| p.as_str().into())),
        ("shadow", e.shadow.then_some(Value::Bool(true))),
    ];
    if let Some(obj) = data.as_object_mut() {
        for (key, value) in optional {
            if let Some(value) = value {
                obj.insert(key.into(), value);
            }
        }
    }
    data
}

/// Writes refusals (coalesced) inside `tx`, keeping at most `max_hosts` distinct hosts (a
/// refused package counts as one more: the record keeps one row per package) per turn and
/// counting the rest in the turn's overflow. Each *new* (turn, host, port, reason)
/// row also appends one `refusal.recorded` event; repeats only grow the row's count (a retry
/// storm must not flood the chat's stream — the count is in the refusal record). Returns
/// whether any event was appended.
async fn insert_refusals<'a>(
    tx: &mut Transaction<'static, Any>,
    events: impl Iterator<Item = &'a RefusalEvent>,
    max_hosts: i64,
    whole_host_ok: &[crate::Host],
) -> Result<bool, StoreError> {
    let events: Vec<&RefusalEvent> = events.collect();
    let mut fresh: Vec<&RefusalEvent> = Vec::new();
    let mut kept = std::collections::HashSet::new();
    for (e, n) in coalesce(&events) {
        let updated = bind_refusal(
            "UPDATE refusals SET count = count + $7, last_seen = $5, url = COALESCE($6, url), \
             shadow = $8, method = COALESCE($9, method) \
             WHERE turn_id = $1 AND host = $2 AND port = $3 AND reason = $4 AND package = $10",
            e,
            n,
        )
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if updated > 0 {
            kept.insert(row_key(e));
            continue;
        }
        let inserted = bind_refusal(
            "INSERT INTO refusals (turn_id, host, port, reason, url, count, first_seen, last_seen, \
             shadow, method, package) SELECT $1, $2, $3, $4, $6, $7, $5, $5, $8, $9, $10 \
             WHERE EXISTS (SELECT 1 FROM refusals WHERE turn_id = $1 AND host = $2 AND package = $10) \
                OR (SELECT COUNT(*) FROM (SELECT DISTINCT host, package FROM refusals \
                    WHERE turn_id = $1) d) < $11",
            e,
            n,
        )
        .bind(max_hosts)
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
            kept.insert(row_key(e));
            fresh.push(e);
        }
    }
    // What each kept row's requests were: one statement for the whole batch.
    let kept: Vec<&RefusalEvent> = events
        .into_iter()
        .filter(|e| kept.contains(&row_key(e)))
        .collect();
    insert_evidence(tx, &kept).await?;
    // Last in the transaction: on PostgreSQL the append holds the ordering lock to commit.
    for e in &fresh {
        let data = recorded_event(e, whole_host_ok);
        append(
            tx,
            Owner::TurnOf(e.turn.as_str()),
            EventKind::RefusalRecorded,
            &data,
            e.at,
        )
        .await?;
    }
    Ok(!fresh.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing;

    fn refusal(host: &str, at: i64, url: Option<&str>) -> RefusalEvent {
        RefusalEvent {
            turn: TurnId::from_db("t_1".into()),
            host: host.into(),
            port: 443,
            reason: RefusalReason::NotApproved,
            url: url.map(Into::into),
            package: None,
            at: Timestamp::from_millis(at),
            shadow: false,
            method: None,
            upload: false,
            command: None,
        }
    }

    #[test]
    fn a_batch_folds_to_one_counted_event_per_key_in_first_seen_order() {
        let batch = [
            refusal("b.example.com", 1, None),
            refusal("a.example.com", 2, Some("http://a.example.com/1")),
            refusal("b.example.com", 3, None),
            refusal("a.example.com", 4, None),
            refusal("a.example.com", 0, Some("http://a.example.com/old")),
        ];
        let refs: Vec<&RefusalEvent> = batch.iter().collect();
        let folded = coalesce(&refs);
        let seen: Vec<(&str, i64, i64)> = folded
            .iter()
            .map(|(e, n)| (e.host.as_str(), *n, e.at.millis()))
            .collect();
        assert_eq!(seen, [("b.example.com", 2, 3), ("a.example.com", 3, 2)]);
        assert_eq!(
            folded[1].0.url.as_deref(),
            Some("http://a.example.com/1"),
            "a later event without a sample URL does not drop the one kept"
        );
    }

    #[test]
    fn the_recorded_event_names_optional_fields_only_when_known() {
        let plain = recorded_event(&refusal("a.example.com", 1, None), &[]);
        assert_eq!(plain["host"], "a.example.com");
        assert_eq!(plain["approvable"], true);
        for absent in ["url", "method", "package", "shadow"] {
            assert!(plain.get(absent).is_none(), "{absent}");
        }
        let full = recorded_event(
            &RefusalEvent {
                method: Some("POST".into()),
                package: Package::parse("Requests").ok(),
                shadow: true,
                reason: RefusalReason::PackageNotApproved,
                ..refusal("pypi.org", 1, Some("http://pypi.org/simple/requests/"))
            },
            &[],
        );
        assert_eq!(full["url"], "http://pypi.org/simple/requests/");
        assert_eq!(full["method"], "POST");
        assert_eq!(full["package"], "requests");
        assert_eq!(full["shadow"], true);
        assert_eq!(full["approvable"], true);
        let unnamed = recorded_event(
            &RefusalEvent {
                reason: RefusalReason::PackageNotApproved,
                ..refusal("pypi.org", 1, None)
            },
            &[],
        );
        assert_eq!(
            unnamed["approvable"], false,
            "no approval could name a package the proxy could not map"
        );
    }

    #[tokio::test]
    async fn repeats_grow_one_row_and_hosts_past_the_cap_count_as_overflow()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = testing::fresh().await;
        let s = &db.store;
        let turn = testing::open_turn(s, "u1", "c1").await?;
        let now = turn.created_at;
        let at = |host: &str, ms: i64, url: Option<&str>| RefusalEvent {
            turn: turn.id.clone(),
            ..refusal(host, now.millis() + ms, url)
        };
        let first = [
            at("a.example.com", 1, Some("http://a.example.com/x")),
            at("a.example.com", 2, None),
        ];
        s.record_refusals(&first, 1).await?;
        s.record_refusals(
            &[at("a.example.com", 3, None), at("b.example.com", 4, None)],
            1,
        )
        .await?;
        let (rows, overflow) = s.list_refusals(&turn.id).await?;
        assert_eq!(rows.len(), 1, "the cap keeps one host");
        assert_eq!(rows[0].host, "a.example.com");
        assert_eq!(
            rows[0].count, 3,
            "the insert counted two, the update one more"
        );
        assert_eq!(rows[0].url.as_deref(), Some("http://a.example.com/x"));
        assert_eq!(rows[0].first_seen.millis(), now.millis() + 1);
        assert_eq!(rows[0].last_seen.millis(), now.millis() + 3);
        assert_eq!(overflow, 1, "the host past the cap is counted, not kept");
        let events = s
            .events_after(
                &crate::db::events::Follow::Chat(turn.user.clone(), turn.chat.clone()),
                0,
                10,
            )
            .await?;
        let recorded = events
            .iter()
            .filter(|e| e.kind == "refusal.recorded")
            .count();
        assert_eq!(recorded, 1, "only the new row is announced");
        Ok(())
    }
}
