//! Re-checking open connections after a revocation: one read of everything that could still
//! allow the hosts of the open connections (the administrators' list, the chats', turns' and
//! users' unexpired site approvals, the turns' current expiry), so a proxy judges every open
//! tunnel and keep-alive connection in memory instead of asking once per connection.

use std::collections::{HashMap, HashSet};

use sqlx::Row as _;

use super::{Store, StoreError, placeholders};
use crate::grant::{Grant, GrantKind};
use crate::host::Host;
use crate::ids::{ChatId, TurnId, UserId};
use crate::pattern::SitePattern;
use crate::time::Timestamp;

/// Ids per `IN (...)` list, well under every backend's bind limit.
const CHUNK: usize = 400;

/// What still allows traffic, for the turns and chats of the open connections.
#[derive(Debug, Default)]
pub struct StillAllowed {
    admin: Vec<SitePattern>,
    /// Site approvals per (user, chat column: `''` for user-scope rows), each with its turn
    /// column (`''` unless turn-scope). A spent counted row still keeps what it admitted.
    approvals: HashMap<(UserId, String), Vec<(SitePattern, String)>>,
    turns: HashMap<TurnId, Timestamp>,
}

/// One open connection as the revalidation sees it.
#[derive(Debug, Clone, Copy)]
pub struct OpenGrant<'a> {
    /// The turn whose credential opened it.
    pub turn: &'a TurnId,
    /// The turn's user.
    pub user: &'a UserId,
    /// The turn's chat.
    pub chat: &'a ChatId,
    /// The host it reaches.
    pub host: &'a Host,
    /// The grant that let it through.
    pub grant: &'a Grant,
}

impl StillAllowed {
    /// Whether `open` may stay open at `now`: its turn is still live (hiding a chat ends its
    /// turns) and, unless a launch-time site or shadow mode let it through (those end with
    /// the turn), the
    /// administrators' list or one of the chat's approvals still matches its host. Another
    /// grant taking over from a revoked one keeps the connection: it is still allowed.
    pub fn keeps(&self, open: OpenGrant<'_>, now: Timestamp) -> bool {
        let turn_live = self
            .turns
            .get(open.turn)
            .is_some_and(|e| !e.has_passed(now));
        if !turn_live {
            return false;
        }
        if matches!(
            open.grant.kind,
            GrantKind::Launch | GrantKind::Shadow { .. } | GrantKind::Registry
        ) {
            return true;
        }
        let applies = |chat: &str| {
            self.approvals
                .get(&(open.user.clone(), chat.to_owned()))
                .is_some_and(|ps| {
                    ps.iter().any(|(p, turn)| {
                        (turn.is_empty() || turn == open.turn.as_str()) && p.matches(open.host)
                    })
                })
        };
        self.admin.iter().any(|p| p.matches(open.host))
            || applies(open.chat.as_str())
            || applies("")
    }
}

impl Store {
    /// Reads what still allows the open connections of `turns` (with their chats) at `now`:
    /// the administrators' site list, the chats' unexpired site approvals and the turns'
    /// current expiry, a few statements on one connection whatever the number of
    /// connections.
    pub async fn still_allowed(
        &self,
        turns: &[(TurnId, UserId, ChatId)],
        now: Timestamp,
    ) -> Result<StillAllowed, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let mut out = StillAllowed::default();
        for r in sqlx::query("SELECT pattern FROM admin_sites")
            .fetch_all(&mut *conn)
            .await?
        {
            let p: String = r.try_get(0)?;
            out.admin
                .push(SitePattern::from_db(&p).ok_or(StoreError::Corrupt("admin_sites.pattern"))?);
        }
        let wanted: HashSet<(UserId, String)> = turns
            .iter()
            .flat_map(|(_, u, c)| {
                [
                    (u.clone(), c.as_str().to_owned()),
                    (u.clone(), String::new()),
                ]
            })
            .collect();
        let distinct = |of: fn(&(TurnId, UserId, ChatId)) -> &str| -> Vec<&str> {
            let set: HashSet<&str> = turns.iter().map(of).collect();
            set.into_iter().collect()
        };
        // The chats' own and turn rows, then the users' user-scope rows (chat `''`).
        let lookups = [
            ("chat_id IN", distinct(|(_, _, c)| c.as_str())),
            (
                "chat_id = '' AND user_id IN",
                distinct(|(_, u, _)| u.as_str()),
            ),
        ];
        for (column, values) in &lookups {
            for chunk in values.chunks(CHUNK) {
                let sql = format!(
                    "SELECT user_id, chat_id, value, turn_id FROM approvals WHERE kind = 'site' \
                     AND expires_at > $1 AND {column} ({})",
                    placeholders(2, chunk.len())
                );
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now.millis());
                for c in chunk {
                    q = q.bind(*c);
                }
                for r in q.fetch_all(&mut *conn).await? {
                    let key = (UserId::from_db(r.try_get(0)?), r.try_get::<String, _>(1)?);
                    if !wanted.contains(&key) {
                        continue;
                    }
                    let v: String = r.try_get(2)?;
                    let p =
                        SitePattern::from_db(&v).ok_or(StoreError::Corrupt("approvals.value"))?;
                    out.approvals
                        .entry(key)
                        .or_default()
                        .push((p, r.try_get(3)?));
                }
            }
        }
        let ids: Vec<&str> = turns
            .iter()
            .map(|(t, _, _)| t.as_str())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        for chunk in ids.chunks(CHUNK) {
            let sql = format!(
                "SELECT turn_id, expires_at FROM turns WHERE turn_id IN ({})",
                placeholders(1, chunk.len())
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for t in chunk {
                q = q.bind(*t);
            }
            for r in q.fetch_all(&mut *conn).await? {
                out.turns.insert(
                    TurnId::from_db(r.try_get(0)?),
                    Timestamp::from_millis(r.try_get(1)?),
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::RefusalReason;

    /// What both tests start from: the time, two turns, alice, her two chats, one host, the
    /// site pattern that covers it, and an approval grant.
    fn scene() -> (
        Timestamp,
        [TurnId; 2],
        UserId,
        [ChatId; 2],
        Host,
        SitePattern,
        Grant,
    ) {
        (
            Timestamp::from_millis(10_000),
            [
                TurnId::from_db("t_one".into()),
                TurnId::from_db("t_two".into()),
            ],
            UserId::from_db("alice".into()),
            [ChatId::from_db("c1".into()), ChatId::from_db("c2".into())],
            Host::parse("files.example.com").unwrap_or_else(|e| unreachable!("{e}")),
            SitePattern::from_db("files.example.com").unwrap_or_else(|| unreachable!()),
            Grant::approval("int_x".into(), Timestamp::from_millis(99_000)),
        )
    }

    #[test]
    fn what_keeps_a_connection_open() {
        let (now, [t1, t2], user, [c1, c2], host, pattern, approval) = scene();
        let mut s = StillAllowed::default();
        s.turns.insert(t1.clone(), Timestamp::from_millis(20_000));
        s.turns.insert(t2.clone(), Timestamp::from_millis(10_000));
        s.approvals.insert(
            (user.clone(), c2.as_str().to_owned()),
            vec![(pattern.clone(), String::new())],
        );
        let open = |turn, chat, grant| OpenGrant {
            turn,
            user: &user,
            chat,
            host: &host,
            grant,
        };
        // c1's approval row is gone; c2's is still there.
        assert!(!s.keeps(open(&t1, &c1, &approval), now));
        assert!(s.keeps(open(&t1, &c2, &approval), now));
        // Launch-time sites and shadow passes end with the turn only.
        let launch = Grant::launch(Timestamp::from_millis(20_000));
        let shadow = Grant::shadow(RefusalReason::NotApproved);
        assert!(s.keeps(open(&t1, &c1, &launch), now));
        assert!(s.keeps(open(&t1, &c1, &shadow), now));
        // A turn that ended (a hidden chat) or is unknown keeps nothing.
        assert!(!s.keeps(open(&t2, &c2, &approval), now));
        assert!(!s.keeps(open(&t2, &c1, &launch), now));
        let unknown = TurnId::from_db("t_gone".into());
        assert!(!s.keeps(open(&unknown, &c2, &launch), now));
        // An admin grant taken over by an approval stays; by nothing, it closes.
        let admin = Grant::admin();
        assert!(s.keeps(open(&t1, &c2, &admin), now));
        assert!(!s.keeps(open(&t1, &c1, &admin), now));
        s.admin.push(pattern);
        assert!(s.keeps(open(&t1, &c1, &admin), now));
    }

    #[test]
    fn a_user_row_keeps_every_chat_and_a_turn_row_only_its_turn() {
        let (now, [t1, t2], alice, [c1, c2], host, pattern, approval) = scene();
        let bob = UserId::from_db("bob".into());
        let mut s = StillAllowed::default();
        for t in [&t1, &t2] {
            s.turns.insert(t.clone(), Timestamp::from_millis(20_000));
        }
        let open = |turn, user, chat| OpenGrant {
            turn,
            user,
            chat,
            host: &host,
            grant: &approval,
        };
        s.approvals.insert(
            (alice.clone(), c1.as_str().to_owned()),
            vec![(pattern.clone(), t1.as_str().to_owned())],
        );
        assert!(s.keeps(open(&t1, &alice, &c1), now));
        assert!(
            !s.keeps(open(&t2, &alice, &c1), now),
            "another turn of the chat"
        );
        s.approvals.insert(
            (alice.clone(), String::new()),
            vec![(pattern, String::new())],
        );
        assert!(
            s.keeps(open(&t2, &alice, &c2), now),
            "a user row: every chat"
        );
        assert!(!s.keeps(open(&t2, &bob, &c2), now), "not another user's");
    }
}
