//! Every change that moves the cache epoch announces itself to this process's subscribers
//! once it committed (both stores), and opening a turn, which moves nothing, does not: what
//! lets a proxy close a revoked connection without waiting for its poll. Across processes
//! the same announcement is PostgreSQL's `NOTIFY` (tests/revocation_push.rs).

use super::*;
use crate::db::admin::{AdminList, SiteRules, UserChange};
use crate::db::policy::ApprovalKind;
use crate::db::signal::Signals;
use crate::db::testing::{TestDb, fresh, open_turn};
use crate::ids::{ChatId, UserId};
use crate::mode::Mode;
use crate::time::Timestamp;

/// The test's store with no cross-process listener: only this process's own announcements
/// wake its subscribers, so a late `NOTIFY` of an earlier step cannot pass for one.
fn in_process_only(db: &TestDb) -> Store {
    Store {
        signal: Signals::new(None),
        ..db.store.clone()
    }
}

fn ids(user: &str, chat: &str) -> (UserId, ChatId) {
    match (UserId::parse(user), ChatId::parse(chat)) {
        (Some(u), Some(c)) => (u, c),
        _ => unreachable!("test ids {user} {chat}"),
    }
}

/// An approval row of `value` for (user, chat) (`''`: user scope), expiring at `expires_at`.
async fn approval(store: &Store, user: &str, chat: &str, value: &str, expires_at: i64) {
    let scope = if chat.is_empty() { "user" } else { "chat" };
    sqlx::query(
        "INSERT INTO approvals (user_id, chat_id, kind, value, card_id, created_at, expires_at, \
         scope) VALUES ($1, $2, 'site', $3, 'int_test', 0, $4, $5)",
    )
    .bind(user)
    .bind(chat)
    .bind(value)
    .bind(expires_at)
    .bind(scope)
    .execute(store.pool())
    .await
    .unwrap_or_else(|e| unreachable!("insert approval: {e}"));
}

/// Runs `change` and returns (whether it was announced, whether the epoch moved).
async fn watch<T>(store: &Store, change: impl Future<Output = T>) -> (bool, bool) {
    let mut rx = store.subscribe_epoch();
    rx.borrow_and_update();
    let before = store.cache_epoch().await.ok();
    change.await;
    let after = store.cache_epoch().await.ok();
    (rx.has_changed().unwrap_or(false), after > before)
}

/// `change` moved the epoch and was announced.
async fn assert_announced<T>(store: &Store, what: &str, change: impl Future<Output = T>) {
    let (announced, moved) = watch(store, change).await;
    assert!(moved, "{what}: the epoch did not move (the premise)");
    assert!(announced, "{what}: moved the epoch without announcing it");
}

#[tokio::test]
async fn every_change_that_moves_the_epoch_announces_it() {
    let db = fresh().await;
    let s = &in_process_only(&db);
    let now = Timestamp::now();
    let later = now.millis() + 3_600_000;
    let admin = AdminList::Sites;
    let rules = SiteRules::default();
    let _ = s
        .admin_add(admin, "files.example.com", None, rules, "admin", now)
        .await;
    let removed = s.admin_remove(admin, "files.example.com", "admin", now);
    assert_announced(s, "an admin site removed", removed).await;
    let packages = AdminList::Packages;
    let _ = s
        .admin_add(packages, "requests", None, rules, "admin", now)
        .await;
    let removed = s.admin_remove(packages, "requests", "admin", now);
    assert_announced(s, "an admin package removed", removed).await;

    let (alice, c1) = ids("alice", "c1");
    approval(s, "alice", "c1", "a.example.com", later).await;
    let revoked = s.revoke_approval(&alice, &c1, ApprovalKind::Site, "a.example.com", now);
    assert_announced(s, "a chat's approval revoked", revoked).await;
    approval(s, "alice", "", "u.example.com", later).await;
    let revoked = s.revoke_user_approval(&alice, ApprovalKind::Site, "u.example.com", now);
    assert_announced(s, "a user-scope approval revoked", revoked).await;

    let turn = open_turn(s, "alice", "c2").await;
    assert!(turn.is_ok(), "open turn");
    let (_, c2) = ids("alice", "c2");
    assert_announced(s, "a chat hidden", s.hide_chat(&alice, &c2, now)).await;

    approval(s, "bob", "c1", "b.example.com", later).await;
    let (bob, _) = ids("bob", "c1");
    let lost = UserChange {
        can_approve: Some(false),
        ..UserChange::default()
    };
    let change = s.set_user(&bob, lost, "admin", now);
    assert_announced(s, "a user losing can_approve", change).await;
    let shadow = UserChange {
        mode: Some(Mode::Shadow),
        ..UserChange::default()
    };
    let change = s.set_user(&bob, shadow, "admin", now);
    assert_announced(s, "a user's mode set", change).await;

    approval(s, "carol", "c1", "gone.example.com", now.millis() - 1).await;
    let swept = s.janitor_sweep(now);
    assert_announced(s, "the janitor removing an expired approval", swept).await;
}

#[tokio::test]
async fn opening_a_turn_announces_nothing() {
    let db = fresh().await;
    let s = &in_process_only(&db);
    let (announced, moved) = watch(s, open_turn(s, "alice", "c1")).await;
    assert!(!moved, "opening a turn moves no epoch");
    assert!(
        !announced,
        "a turn opened must not wake every proxy (one per agent turn)"
    );
}
