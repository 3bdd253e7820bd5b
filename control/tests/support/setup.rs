//! Setup a row needs before its request: turns opened through the API, refusals recorded as
//! the proxy would record them, the administrator's lists, and raw SQL for states the API has
//! no endpoint for (an expired turn, a hidden chat, an approval row).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use egressgate_store::db::refusals::RefusalEvent;
use egressgate_store::db::turns::Turn;
use egressgate_store::{RefusalReason, Timestamp, TurnId};
use serde_json::{Value, json};

use super::{Answer, OpenedTurn, TestApp};

impl TestApp {
    /// Opens a turn through the API (`201` asserted) with optional extra body fields
    /// (`sites`, `packages`, `ttl_seconds`) merged in.
    pub async fn open_turn_with(
        &self,
        user: &str,
        chat: &str,
        can_ask_human: bool,
        extra: Value,
    ) -> OpenedTurn {
        let mut body = json!({"user_id": user, "chat_id": chat, "can_ask_human": can_ask_human});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        let (status, resp) = self
            .post_json("/v1/turns", self.runtime(), None, body)
            .await;
        assert_eq!(status, StatusCode::CREATED, "open turn: {resp}");
        OpenedTurn {
            turn_id: resp["turn_id"].as_str().expect("turn_id").to_owned(),
            proxy_url: resp["proxy_url"].as_str().expect("proxy_url").to_owned(),
            body: resp,
        }
    }

    /// Opens a turn of (user, chat) that may ask a human, with no launch lists: its id.
    pub async fn turn(&self, user: &str, chat: &str) -> String {
        self.open_turn(user, chat, true).await.turn_id
    }

    /// Opens a turn of (user, chat) that may ask a human, launched with the site patterns
    /// `sites` and no packages: the turn a row about launch grants starts from.
    pub async fn turn_with_sites(&self, user: &str, chat: &str, sites: &[&str]) -> String {
        let launch = json!({"sites": sites});
        self.open_turn_with(user, chat, true, launch).await.turn_id
    }

    /// Opens a turn with no launch lists.
    pub async fn open_turn(&self, user: &str, chat: &str, can_ask_human: bool) -> OpenedTurn {
        self.open_turn_with(user, chat, can_ask_human, json!({}))
            .await
    }

    /// The turn `turn_id` as the store holds it (it must exist): what the proxy reads, for
    /// rows that check what the API wrote.
    pub async fn stored_turn(&self, turn_id: &str) -> Turn {
        let id = TurnId::parse(turn_id).expect("turn id");
        let turn = self.store.turn(&id).await.expect("read turn");
        turn.unwrap_or_else(|| panic!("turn {turn_id} is stored"))
    }

    /// Records a refusal for a turn as the proxy would (through the store).
    pub async fn refuse(
        &self,
        turn_id: &str,
        host: &str,
        port: u16,
        reason: RefusalReason,
        url: Option<&str>,
    ) {
        let mut event = refusal(turn_id, host, reason);
        event.port = port;
        event.url = url.map(str::to_owned);
        self.record(event).await;
    }

    /// Records a `package_not_approved` refusal of `package` (canonical) on registry host
    /// `host`, as the proxy would.
    pub async fn refuse_package(&self, turn_id: &str, host: &str, package: &str) {
        let mut event = refusal(turn_id, host, RefusalReason::PackageNotApproved);
        event.package = Some(egressgate_store::Package::parse(package).expect("package"));
        self.record(event).await;
    }

    /// Writes one refusal through the store's batch path.
    async fn record(&self, event: RefusalEvent) {
        self.store
            .record_refusals(&[event], 256)
            .await
            .expect("record refusal");
    }

    /// Records a refusal of `host:443` for `reason`, as the proxy would.
    pub async fn refuse_for(&self, turn_id: &str, host: &str, reason: RefusalReason) {
        self.record(refusal(turn_id, host, reason)).await;
    }

    /// `PUT /v1/admin/users/{user}` with `can_approve`: the answer's status.
    pub async fn set_can_approve(&self, user: &str, can: bool) -> StatusCode {
        let path = format!("/v1/admin/users/{user}");
        self.as_admin()
            .put(&path, json!({"can_approve": can}))
            .await
            .0
    }

    /// Records a `not_approved` refusal of `host:443` for a turn, as the proxy would.
    pub async fn refuse_unapproved(&self, turn_id: &str, host: &str) {
        self.refuse(turn_id, host, 443, RefusalReason::NotApproved, None)
            .await;
    }

    /// `POST /v1/admin/sites` with the admin token.
    pub async fn admin_site(&self, pattern: &str) -> Answer {
        let site = json!({"pattern": pattern});
        self.as_admin().post("/v1/admin/sites", site).await
    }

    /// `POST /v1/admin/packages` with the admin token.
    pub async fn admin_package(&self, name: &str) -> Answer {
        let package = json!({"name": name});
        self.as_admin().post("/v1/admin/packages", package).await
    }

    /// `GET /v1/turns/{turn_id}/{what}` with the runtime token.
    pub async fn turn_get(&self, turn_id: &str, what: &str) -> Answer {
        self.get(&format!("/v1/turns/{turn_id}/{what}"), self.runtime(), None)
            .await
    }

    /// A one-connection pool on this test's database, for raw SQL in setups.
    async fn raw_pool(&self) -> sqlx::AnyPool {
        sqlx::any::install_default_drivers();
        sqlx::any::AnyPoolOptions::new()
            .max_connections(1)
            .connect(&self.db_url)
            .await
            .expect("connect raw")
    }

    /// Runs one raw SQL statement on this test's database (setup only: the product never
    /// does this). Returns rows affected.
    pub async fn exec_sql(&self, sql: &str) -> u64 {
        let pool = self.raw_pool().await;
        let n = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&pool)
            .await
            .expect("raw sql")
            .rows_affected();
        pool.close().await;
        n
    }

    /// Runs one raw `SELECT COUNT(*) …` and returns the count.
    pub async fn count(&self, sql: &str) -> i64 {
        use sqlx::Row as _;
        let pool = self.raw_pool().await;
        let row = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&pool)
            .await
            .expect("raw count");
        let n: i64 = row.try_get(0).expect("count column");
        pool.close().await;
        n
    }

    /// Polls the count `sql` until `done` holds for it, failing after a generous deadline:
    /// for what the control plane writes in the background (batched rejection counts).
    pub async fn wait_for_count(&self, sql: &str, done: impl Fn(i64) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.count(sql).await;
            if done(got) {
                return;
            }
            assert!(Instant::now() < deadline, "{sql}: still {got}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many audit rows of `kind` were written.
    pub async fn audit_rows(&self, kind: &str) -> i64 {
        self.count(&format!("SELECT COUNT(*) FROM audit WHERE kind = '{kind}'"))
            .await
    }

    /// Asserts each `(count query, rows)` pair, naming the query that disagreed: what a row
    /// expects the tables to hold after its step, read as one table instead of one
    /// `assert_eq!` a query.
    pub async fn assert_counts(&self, want: &[(&str, i64)]) {
        for (sql, rows) in want {
            assert_eq!(self.count(sql).await, *rows, "{sql}");
        }
    }

    /// Makes a turn expired now (its expiry set to the epoch).
    pub async fn expire_turn(&self, turn_id: &str) {
        let n = self
            .exec_sql(&format!(
                "UPDATE turns SET expires_at = 0 WHERE turn_id = '{turn_id}'"
            ))
            .await;
        assert_eq!(n, 1, "turn {turn_id} exists");
    }

    /// Marks a chat hidden directly in the database.
    pub async fn hide_chat(&self, user: &str, chat: &str) {
        let n = self
            .exec_sql(&format!(
                "UPDATE chats SET hidden_at = 1 WHERE user_id = '{user}' AND chat_id = '{chat}'"
            ))
            .await;
        assert_eq!(n, 1, "chat ({user}, {chat}) exists");
    }

    /// Inserts approval rows directly: (user, chat, kind `site` or `package`, value, time to
    /// live) each.
    pub async fn insert_approvals(&self, rows: &[(&str, &str, &str, &str, Duration)]) {
        for (user, chat, kind, value, ttl) in rows {
            self.insert_approval(user, chat, kind, value, *ttl).await;
        }
    }

    /// Inserts an approval row directly (kind `site` or `package`), expiring `ttl` from now.
    pub async fn insert_approval(
        &self,
        user: &str,
        chat: &str,
        kind: &str,
        value: &str,
        ttl: Duration,
    ) {
        let now = Timestamp::now();
        let exp = now.plus(ttl).millis();
        self.exec_sql(&format!(
            "INSERT INTO approvals (user_id, chat_id, kind, value, card_id, created_at, expires_at) \
             VALUES ('{user}', '{chat}', '{kind}', '{value}', 'int_test', {}, {exp})",
            now.millis()
        ))
        .await;
    }

    /// Asserts that nothing was written to any of `tables`.
    pub async fn assert_empty(&self, tables: &[&str]) {
        for t in tables {
            let n = self.count(&format!("SELECT COUNT(*) FROM {t}")).await;
            assert_eq!(n, 0, "rows in {t}");
        }
    }
}

/// A refusal of `host:443` for a turn, now, with nothing else known (as the proxy hands the
/// store one).
pub fn refusal(turn_id: &str, host: &str, reason: RefusalReason) -> RefusalEvent {
    RefusalEvent {
        turn: TurnId::parse(turn_id).expect("turn id"),
        host: host.to_owned(),
        port: 443,
        reason,
        url: None,
        package: None,
        at: Timestamp::now(),
        shadow: false,
        method: None,
        upload: false,
        command: None,
    }
}
