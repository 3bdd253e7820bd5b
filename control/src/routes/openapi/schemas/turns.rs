//! The turn endpoints' answers: the opened turn, its refusal record, its allowed traffic and
//! its policy.

#![allow(dead_code)] // The describing types are read by the schema derive only.

use egressgate_store::db::refusals::{EgressRow as StoredEgress, RefusalRow};
use egressgate_store::{Timestamp, TurnId};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Time, string_enum};

/// `201` of `POST /v1/turns`.
#[derive(Serialize, ToSchema)]
pub struct TurnOpened {
    #[schema(value_type = String)]
    pub(crate) turn_id: TurnId,
    /// `http://TURN_ID:SECRET@host:port`: the sandbox's proxy setting; carries the credential.
    pub(crate) proxy_url: String,
    #[schema(value_type = Time)]
    pub(crate) expires_at: Timestamp,
}

string_enum!(
    /// A refusal reason: the store's closed set, in its spelling.
    RefusalReason,
    "A refusal reason (the closed set).",
    egressgate_store::RefusalReason::ALL.map(|r| r.as_str())
);

/// One row of a turn's refusal record.
#[derive(ToSchema)]
pub struct Refusal {
    host: String,
    #[schema(minimum = 0, maximum = 65535)]
    port: u16,
    reason: RefusalReason,
    /// Whether a person can approve it (only `not_approved`, `method_not_allowed`,
    /// `package_not_approved`).
    approvable: bool,
    /// Latest sanitised sample URL (plain HTTP, and requests on inspected hosts).
    url: Option<String>,
    /// The request method, when the proxy saw the request (plain HTTP, inspected hosts).
    method: Option<String>,
    /// The package a `package_not_approved` refusal is about, in canonical spelling
    /// (`numpy`, `npm:@scope/name`); one row per package. Absent for a registry request that
    /// names no package (then not approvable).
    package: Option<String>,
    count: i64,
    first_seen: Time,
    last_seen: Time,
    /// Present (and true) only for a shadow-mode record: the request was let through.
    shadow: Option<bool>,
}

/// `GET /v1/turns/{turn_id}/refusals`.
#[derive(Serialize, ToSchema)]
pub struct Refusals {
    #[schema(value_type = String)]
    pub(crate) turn_id: TurnId,
    #[schema(value_type = Vec<Refusal>)]
    pub(crate) refusals: Vec<RefusalRow>,
    /// Refusals past `max-refusals-per-turn` distinct hosts, counted only.
    pub(crate) overflow: i64,
}

/// A turn's allowed traffic to one host.
#[derive(ToSchema)]
pub struct EgressRow {
    host: String,
    connections: i64,
    bytes_up: i64,
    bytes_down: i64,
    first_seen: Time,
    last_seen: Time,
}

/// `GET /v1/turns/{turn_id}/egress`.
#[derive(Serialize, ToSchema)]
pub struct Egress {
    #[schema(value_type = String)]
    pub(crate) turn_id: TurnId,
    #[schema(value_type = Vec<EgressRow>)]
    pub(crate) egress: Vec<StoredEgress>,
}

/// `GET /v1/turns/{turn_id}/policy`: what a package installer in the sandbox enforces.
#[derive(Serialize, ToSchema)]
pub struct Policy {
    #[schema(value_type = String)]
    pub(crate) turn_id: TurnId,
    pub(crate) sites: Vec<String>,
    pub(crate) packages: Vec<String>,
    #[schema(value_type = Time)]
    pub(crate) expires_at: Timestamp,
}
