//! What keeps requests without a valid credential cheap and few: per client address, a token
//! bucket of failures (a missing, unknown or expired bearer token, an admin console cookie of
//! no live session, a wrong sign-in token), checked in memory before the database is asked
//! about the credential. Past the limit the answer is `429 TOO_MANY_ATTEMPTS` with
//! `Retry-After`, until the bucket refills.
//!
//! The env tokens are compared in memory first and are never limited, so a flood from the
//! runtime's own address cannot lock the runtime out; a named token from a flooding address
//! waits like any other credential there, because telling it apart needs the database.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::buckets::Buckets;
use crate::error::ApiError;
use crate::resume_guard::{ClientKey, too_many};
use crate::settings::Settings;

/// The failure limit, shared by every request of one process.
#[derive(Debug)]
pub(crate) struct AuthGuard {
    per_client: Buckets<ClientKey, ()>,
}

impl AuthGuard {
    /// `auth_failures_per_client` failures per its window and address.
    pub(crate) fn new(s: &Settings) -> Self {
        Self {
            per_client: Buckets::new(s.auth_failures_per_client),
        }
    }
}

/// One request's view of the limit: the process's guard and the client's key. Extracted from
/// the request (the router installs the guard); without a guard it limits nothing, which is
/// what a credential the database itself handed back (a console session's token) needs.
pub(crate) struct Gate {
    guard: Option<Arc<AuthGuard>>,
    client: ClientKey,
}

impl Gate {
    /// The gate of a request.
    pub(crate) fn of(parts: &Parts) -> Self {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        Self {
            guard: parts.extensions.get::<Arc<AuthGuard>>().cloned(),
            client: ClientKey::of(peer),
        }
    }

    /// A gate that limits nothing, for credentials that did not come from a client.
    pub(crate) fn open() -> Self {
        Self {
            guard: None,
            client: ClientKey::Unknown,
        }
    }

    /// Before any database read about a credential: `429 TOO_MANY_ATTEMPTS` when this client
    /// has used up its failures.
    pub(crate) fn admit(&self) -> Result<(), ApiError> {
        let Some(guard) = &self.guard else {
            return Ok(());
        };
        match guard.per_client.empty(&self.client, Instant::now()) {
            Some((wait, ())) => Err(too_many(wait, "requests without a valid credential")),
            None => Ok(()),
        }
    }

    /// Charges one failure to this client.
    pub(crate) fn failed(&self) {
        if let Some(guard) = &self.guard {
            guard.per_client.take(self.client, (), Instant::now());
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Gate {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(parts))
    }
}
