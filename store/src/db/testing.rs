//! A fresh database per test: SQLite in a temp dir, or PostgreSQL when
//! `EGRESSGATE_TEST_POSTGRES_URL` names a server (CI starts one), in a fresh schema.

use super::*;

/// A migrated store plus whatever keeps it alive.
pub struct TestDb {
    /// The store under test.
    pub store: Store,
    _dir: tempfile::TempDir,
}

/// Opens a fresh, migrated store for one test.
pub async fn fresh() -> TestDb {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => unreachable!("tempdir: {e}"),
    };
    let store = match std::env::var("EGRESSGATE_TEST_POSTGRES_URL") {
        Ok(base) => fresh_postgres(&base).await,
        Err(_) => Store::open_sqlite(dir.path(), &PoolOptions::default()).await,
    };
    let store = match store {
        Ok(s) => s,
        Err(e) => unreachable!("open test store: {e}"),
    };
    if let Err(e) = store.migrate().await {
        unreachable!("migrate: {e}");
    }
    TestDb { store, _dir: dir }
}

/// Opens a turn of `user`'s `chat` now (see [`open_turn_at`]).
pub async fn open_turn(
    store: &Store,
    user: &str,
    chat: &str,
) -> Result<crate::db::turns::Turn, crate::db::turns::OpenTurnError> {
    open_turn_at(store, user, chat, crate::Timestamp::now()).await
}

/// Opens a turn of `user`'s `chat` at `at`: a minute long, a person can answer, no launch
/// lists.
pub async fn open_turn_at(
    store: &Store,
    user: &str,
    chat: &str,
    at: crate::Timestamp,
) -> Result<crate::db::turns::Turn, crate::db::turns::OpenTurnError> {
    let (Some(user), Some(chat)) = (
        crate::ids::UserId::parse(user),
        crate::ids::ChatId::parse(chat),
    ) else {
        unreachable!("test ids {user} {chat}");
    };
    let new = crate::db::turns::NewTurn {
        user,
        chat,
        launch: crate::db::turns::Launch {
            can_ask_human: true,
            sites: vec![],
            read_sites: vec![],
            packages: vec![],
        },
        ttl: std::time::Duration::from_secs(60),
    };
    let secret = crate::ids::Secret::generate().hash();
    store.open_turn(&new, &secret, at).await
}

/// Appends one event of `kind` with `data` for `user`'s `chat` at `at`, committed (and
/// subscribers woken) as a real change would.
pub async fn append_event(
    store: &Store,
    (user, chat): (&str, &str),
    kind: crate::db::events::EventKind,
    data: &serde_json::Value,
    at: crate::Timestamp,
) {
    let mut tx = store.begin().await.unwrap_or_else(|e| unreachable!("{e}"));
    crate::db::events::append(
        &mut tx,
        crate::db::events::Owner::Chat(user, chat),
        kind,
        data,
        at,
    )
    .await
    .unwrap_or_else(|e| unreachable!("{e}"));
    store
        .commit_events(tx, true)
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
}

async fn fresh_postgres(base: &str) -> Result<Store, StoreError> {
    let admin = Store::open_url(base, &PoolOptions::default()).await?;
    let name = format!(
        "eg_test_{}",
        crate::ids::TurnId::generate().as_str()[2..]
            .to_lowercase()
            .replace('-', "_")
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(admin.pool())
        .await?;
    admin.close().await;
    let (prefix, _) = base.rsplit_once('/').unwrap_or((base, ""));
    Store::open_url(&format!("{prefix}/{name}"), &PoolOptions::default()).await
}
