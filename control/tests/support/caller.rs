//! Requests as one caller: the administrator, the runtime, the runtime on behalf of a user,
//! nobody, or any token, so a row reads as who asks for what
//! (`app.as_user("alice").get("/v1/chats/c1/approvals")`) rather than as a list of headers.

use axum::http::{Method, StatusCode};
use serde_json::Value;

use super::{ADMIN_TOKEN, RUNTIME_TOKEN, TestApp};

/// A caller of one [`TestApp`]: the bearer token and the `X-Egressgate-User` it sends.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    app: &'a TestApp,
    token: Option<&'a str>,
    user: Option<&'a str>,
}

impl TestApp {
    /// The administrator (the admin token).
    pub fn as_admin(&self) -> Caller<'_> {
        self.with_token(Some(ADMIN_TOKEN))
    }

    /// The runtime (the runtime token), for nobody in particular.
    pub fn as_runtime(&self) -> Caller<'_> {
        self.with_token(Some(RUNTIME_TOKEN))
    }

    /// The runtime on behalf of `user`.
    pub fn as_user<'a>(&'a self, user: &'a str) -> Caller<'a> {
        Caller {
            user: Some(user),
            ..self.as_runtime()
        }
    }

    /// No credential at all (the resume endpoints, the public documents).
    pub fn anonymous(&self) -> Caller<'_> {
        self.with_token(None)
    }

    /// Any bearer token (or none): scoped, wrong, expired.
    pub fn with_token<'a>(&'a self, token: Option<&'a str>) -> Caller<'a> {
        Caller {
            app: self,
            token,
            user: None,
        }
    }
}

impl Caller<'_> {
    /// `GET path`.
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.app
            .request(Method::GET, path, self.token, self.user, None)
            .await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let (token, user) = (self.token, self.user);
        self.app
            .request(Method::DELETE, path, token, user, None)
            .await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let (token, user) = (self.token, self.user);
        self.app.post_json(path, token, user, body).await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.app.put(path, self.token, self.user, body).await
    }

    /// `POST path` with raw bytes (malformed JSON rows).
    pub async fn post_raw(&self, path: &str, raw: &str) -> (StatusCode, Value) {
        self.app.post_raw(path, self.token, self.user, raw).await
    }
}
