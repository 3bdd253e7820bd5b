//! The control plane's test harness: the real router (`app(state)`) on a fresh, migrated
//! database per test — SQLite in a temp dir, or a fresh PostgreSQL database when
//! `EGRESSGATE_TEST_POSTGRES_URL` names a server — driven with tower's `oneshot`, no socket.
//! Known admin and runtime tokens, JSON helpers, and a raw-SQL escape hatch for test setup
//! the API has no endpoint for (expiring a turn, hiding a chat).
//!
//! Shared by every test file in `control/tests/`; keep its API stable. This file builds the app
//! and sends requests; [`caller`] names who sends them, [`setup`] opens turns, records what
//! the proxy would and reaches under the API for what it has no endpoint for, [`race`] sends
//! many at once.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod answer;
pub mod caller;
pub mod race;
pub mod setup;

// Not every test binary checks errors.
#[allow(unused_imports)]
pub use answer::*;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use egressgate_control::{AppState, Settings, Tokens, app};
use egressgate_store::blob::DirBlobStore;
use egressgate_store::{PoolOptions, Secret, Store, TurnId};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

/// A bearer token or an `X-Egressgate-User` to send, or none.
pub type Who<'a> = Option<&'a str>;

/// What every request returns: the status and the body read as JSON.
pub type Answer = (StatusCode, Value);

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

    /// A control plane whose default settings `change` adjusts (the row's one or two knobs).
    pub async fn configured(change: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = Settings::default();
        change(&mut settings);
        Self::with_settings(settings).await
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
        m: Method,
        path: &str,
        token: Who<'_>,
        user: Who<'_>,
        body: Value,
    ) -> Answer {
        let bytes = body.to_string().into_bytes();
        self.request(m, path, token, user, Some(bytes)).await
    }

    /// `POST` a JSON value.
    pub async fn post_json(
        &self,
        path: &str,
        token: Who<'_>,
        user: Who<'_>,
        body: Value,
    ) -> Answer {
        self.send_json(Method::POST, path, token, user, body).await
    }

    /// `POST` raw bytes (malformed JSON tests).
    pub async fn post_raw(&self, path: &str, token: Who<'_>, user: Who<'_>, raw: &str) -> Answer {
        let bytes = raw.as_bytes().to_vec();
        self.request(Method::POST, path, token, user, Some(bytes))
            .await
    }

    /// `PUT` a JSON value.
    pub async fn put(&self, path: &str, token: Who<'_>, user: Who<'_>, body: Value) -> Answer {
        self.send_json(Method::PUT, path, token, user, body).await
    }

    /// `GET`.
    pub async fn get(&self, path: &str, token: Who<'_>, user: Who<'_>) -> Answer {
        self.request(Method::GET, path, token, user, None).await
    }

    /// `DELETE`.
    pub async fn delete(&self, path: &str, token: Who<'_>, user: Who<'_>) -> Answer {
        self.request(Method::DELETE, path, token, user, None).await
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
