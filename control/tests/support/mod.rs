//! The control plane's test harness: the real router (`app(state)`) on a fresh, migrated
//! database per test — SQLite in a temp dir, or a fresh PostgreSQL database when
//! `EGRESSGATE_TEST_POSTGRES_URL` names a server — driven with tower's `oneshot`, no socket.
//! Known admin and runtime tokens, JSON helpers, and a raw-SQL escape hatch for test setup
//! the API has no endpoint for (expiring a turn, hiding a chat).
//!
//! Shared by every test file in `control/tests/`; keep its API stable.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use egressgate_control::{AppState, Settings, Tokens, app};
use egressgate_store::blob::DirBlobStore;
use egressgate_store::db::refusals::RefusalEvent;
use egressgate_store::{PoolOptions, RefusalReason, Secret, Store, Timestamp, TurnId};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

/// The admin bearer token every `TestApp` accepts.
pub const ADMIN_TOKEN: &str = "test-admin-token";
/// The runtime bearer token every `TestApp` accepts.
pub const RUNTIME_TOKEN: &str = "test-runtime-token";

/// One running control plane over its own database.
pub struct TestApp {
    /// The store the router uses (tests may read and write through it directly).
    pub store: Store,
    /// The settings the router was built with.
    pub settings: Arc<Settings>,
    /// The router itself; cloned per request.
    pub router: axum::Router,
    /// `sqlite://…` or `postgres://…` of this test's database, for raw SQL in setups.
    pub db_url: String,
    /// The directory the router's blob store (`DirBlobStore`) writes to.
    pub blob_dir: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// What `TestApp::open_turn` returns: the ids and the credential from `POST /v1/turns`.
#[derive(Debug, Clone)]
pub struct OpenedTurn {
    /// `turn_id` from the response.
    pub turn_id: String,
    /// `proxy_url` from the response (carries the credential).
    pub proxy_url: String,
    /// The whole response body.
    pub body: Value,
}

impl TestApp {
    /// A control plane with default settings.
    pub async fn new() -> Self {
        Self::with_settings(Settings::default()).await
    }

    /// A control plane with the given settings.
    pub async fn with_settings(settings: Settings) -> Self {
        Self::with_blobs(settings, None).await
    }

    /// A control plane with the given settings and blob store (default: a directory in the
    /// test's temp dir), so tests can inject a failing one.
    pub async fn with_blobs(
        settings: Settings,
        blobs: Option<Arc<dyn egressgate_store::blob::BlobStore>>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let db_url = match std::env::var("EGRESSGATE_TEST_POSTGRES_URL") {
            Ok(base) if !base.is_empty() => fresh_postgres_database(&base).await,
            _ => format!(
                "sqlite://{}?mode=rwc",
                dir.path().join("egressgate.db").display()
            ),
        };
        let store = Store::open_url(&db_url, &PoolOptions::default())
            .await
            .expect("open test store");
        store.migrate().await.expect("migrate test store");
        let settings = Arc::new(settings);
        let tokens = Arc::new(Tokens {
            admin: Secret::from_presented(ADMIN_TOKEN).hash(),
            runtime: Secret::from_presented(RUNTIME_TOKEN).hash(),
        });
        let blob_dir = dir.path().join("blobs");
        let blobs = match blobs {
            Some(b) => b,
            None => Arc::new(DirBlobStore::new(blob_dir.clone()).expect("blob dir")),
        };
        let router = app(AppState {
            store: store.clone(),
            settings: settings.clone(),
            tokens,
            blobs,
        });
        Self {
            store,
            settings,
            router,
            db_url,
            blob_dir,
            _dir: dir,
        }
    }

    /// `Some(ADMIN_TOKEN)`, for the `token` argument.
    pub fn admin(&self) -> Option<&'static str> {
        Some(ADMIN_TOKEN)
    }

    /// `Some(RUNTIME_TOKEN)`, for the `token` argument.
    pub fn runtime(&self) -> Option<&'static str> {
        Some(RUNTIME_TOKEN)
    }

    /// Sends one request; `token` becomes `Authorization: Bearer …`, `user` the
    /// `X-Egressgate-User` header, `body` the raw request body (sent as JSON). Returns the
    /// status and the body parsed as JSON (`Value::Null` when empty, a JSON string when the
    /// body is not JSON).
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(u) = user {
            req = req.header("x-egressgate-user", u);
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(b)),
            None => req.body(Body::empty()),
        }
        .expect("build request");
        let (status, _, value) = self.send(req).await;
        (status, value)
    }

    /// Sends a request built by the test; returns the status, the headers and the body (as
    /// [`TestApp::request`] reads it).
    pub async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
        let resp = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("router is infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .expect("read body")
            .to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, headers, value)
    }

    /// Sends a JSON value with `method`.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        self.request(
            method,
            path,
            token,
            user,
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    /// `POST` a JSON value.
    pub async fn post_json(
        &self,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        self.send_json(Method::POST, path, token, user, body).await
    }

    /// `POST` raw bytes (malformed JSON tests).
    pub async fn post_raw(
        &self,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
        body: &str,
    ) -> (StatusCode, Value) {
        self.request(
            Method::POST,
            path,
            token,
            user,
            Some(body.as_bytes().to_vec()),
        )
        .await
    }

    /// `PUT` a JSON value.
    pub async fn put(
        &self,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        self.send_json(Method::PUT, path, token, user, body).await
    }

    /// `GET`.
    pub async fn get(
        &self,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
    ) -> (StatusCode, Value) {
        self.request(Method::GET, path, token, user, None).await
    }

    /// `DELETE`.
    pub async fn delete(
        &self,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
    ) -> (StatusCode, Value) {
        self.request(Method::DELETE, path, token, user, None).await
    }

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

    /// Opens a turn with no launch lists.
    pub async fn open_turn(&self, user: &str, chat: &str, can_ask_human: bool) -> OpenedTurn {
        self.open_turn_with(user, chat, can_ask_human, json!({}))
            .await
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
        let turn = TurnId::parse(turn_id).expect("turn id");
        let event = RefusalEvent {
            turn,
            host: host.to_owned(),
            port,
            reason,
            url: url.map(str::to_owned),
            package: None,
            at: Timestamp::now(),
            shadow: false,
            method: None,
            upload: false,
        };
        self.store
            .record_refusals(&[event], 256)
            .await
            .expect("record refusal");
    }

    /// Records a `package_not_approved` refusal of `package` (canonical) on registry host
    /// `host`, as the proxy would.
    pub async fn refuse_package(&self, turn_id: &str, host: &str, package: &str) {
        let event = RefusalEvent {
            turn: TurnId::parse(turn_id).expect("turn id"),
            host: host.to_owned(),
            port: 443,
            reason: RefusalReason::PackageNotApproved,
            url: None,
            package: Some(egressgate_store::Package::parse(package).expect("package")),
            at: Timestamp::now(),
            shadow: false,
            method: None,
            upload: false,
        };
        self.store
            .record_refusals(&[event], 256)
            .await
            .expect("record refusal");
    }

    /// Records a `not_approved` refusal of `host:443` for a turn, as the proxy would.
    pub async fn refuse_unapproved(&self, turn_id: &str, host: &str) {
        self.refuse(turn_id, host, 443, RefusalReason::NotApproved, None)
            .await;
    }

    /// `POST /v1/admin/sites` with the admin token.
    pub async fn admin_site(&self, pattern: &str) -> (StatusCode, Value) {
        self.post_json(
            "/v1/admin/sites",
            self.admin(),
            None,
            json!({"pattern": pattern}),
        )
        .await
    }

    /// `POST /v1/admin/packages` with the admin token.
    pub async fn admin_package(&self, name: &str) -> (StatusCode, Value) {
        self.post_json(
            "/v1/admin/packages",
            self.admin(),
            None,
            json!({"name": name}),
        )
        .await
    }

    /// `GET /v1/turns/{turn_id}/{what}` with the runtime token.
    pub async fn turn_get(&self, turn_id: &str, what: &str) -> (StatusCode, Value) {
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

    /// How many audit rows of `kind` were written.
    pub async fn audit_rows(&self, kind: &str) -> i64 {
        self.count(&format!("SELECT COUNT(*) FROM audit WHERE kind = '{kind}'"))
            .await
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
}

/// Creates a fresh database on the PostgreSQL server at `base` and returns its URL.
async fn fresh_postgres_database(base: &str) -> String {
    sqlx::any::install_default_drivers();
    let admin = sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(base)
        .await
        .expect("connect to EGRESSGATE_TEST_POSTGRES_URL");
    let suffix = TurnId::generate().as_str()[2..]
        .to_lowercase()
        .replace('-', "_");
    let name = format!("eg_ctl_{suffix}");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .expect("create test database");
    admin.close().await;
    let (prefix, _) = base.rsplit_once('/').unwrap_or((base, ""));
    format!("{prefix}/{name}")
}

/// The `error.code` of an error body.
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// The `error.message` of an error body.
pub fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or("")
}

/// Asserts a `422 INVALID_INPUT` whose message names `entry` first and says `why`.
#[track_caller]
pub fn assert_invalid_input(status: StatusCode, body: &Value, entry: &str, why: &str, case: &str) {
    assert_eq!(
        (status, code(body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
        "{case}: {body}"
    );
    assert!(
        message(body).starts_with(entry) && message(body).contains(why),
        "{case}: {body}"
    );
}
