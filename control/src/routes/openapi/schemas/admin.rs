//! The person's and the administrator's answers: a chat's approvals, revoking and hiding,
//! the pre-approved lists, user permissions and the audit log.

#![allow(dead_code)] // The describing types are read by the schema derive only.

use egressgate_store::{ChatId, UserId};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Time;

/// One approval of a chat.
#[derive(ToSchema)]
pub struct Approval {
    #[schema(value_type = String, pattern = "^(site|package)$")]
    kind: String,
    value: String,
    card_id: Option<String>,
    expires_at: Time,
    /// How much of the host a site approval opens: `full` (a card grants it) or `read`.
    #[schema(value_type = String, pattern = "^(full|read)$")]
    access: String,
    /// How far it reaches: `turn` (the card's turn and its resumed run), `chat` or `user`
    /// (every chat of the user; listed by `GET /v1/users/{user_id}/approvals`).
    #[schema(value_type = String, pattern = "^(turn|chat|user)$")]
    scope: String,
    /// Connections it still admits: `null` is unlimited, `0` spent (listed until it expires).
    uses_left: Option<i64>,
    /// The path prefixes a site approval is narrowed to: `null` is the whole host.
    paths: Option<Vec<String>>,
    /// The turn of a `turn`-scope approval (absent otherwise).
    turn_id: Option<String>,
}

/// `GET /v1/chats/{chat_id}/approvals`, `GET /v1/users/{user_id}/approvals`.
#[derive(ToSchema)]
pub struct Approvals {
    approvals: Vec<Approval>,
}

/// `DELETE /v1/chats/{chat_id}/approvals/{kind}/{value}`.
#[derive(ToSchema)]
pub struct Revoked {
    revoked: RevokedEntry,
}

/// What was revoked.
#[derive(ToSchema)]
pub struct RevokedEntry {
    #[schema(value_type = String, pattern = "^(site|package)$")]
    kind: String,
    value: String,
}

/// `DELETE /v1/chats/{chat_id}`.
#[derive(Serialize, ToSchema)]
pub struct Hidden {
    #[schema(value_type = String)]
    pub(crate) chat_id: ChatId,
    pub(crate) hidden: bool,
}

/// One pre-approved site.
#[derive(ToSchema)]
pub struct AdminSite {
    pattern: String,
    note: Option<String>,
    created_at: Time,
    /// Whether the proxy inspects matching hosts' TLS.
    inspect: bool,
    /// `full` or `read`.
    access: String,
}

/// `GET /v1/admin/sites`.
#[derive(ToSchema)]
pub struct AdminSites {
    sites: Vec<AdminSite>,
}

/// One pre-approved package.
#[derive(ToSchema)]
pub struct AdminPackage {
    name: String,
    note: Option<String>,
    created_at: Time,
}

/// `GET /v1/admin/packages`.
#[derive(ToSchema)]
pub struct AdminPackages {
    packages: Vec<AdminPackage>,
}

/// `PUT /v1/admin/users/{user_id}`: what was set (only the fields the request named).
#[derive(Serialize, ToSchema)]
pub struct UserPermission {
    #[schema(value_type = String)]
    pub(crate) user_id: UserId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) can_approve: Option<bool>,
    /// `enforce` or `shadow`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mode: Option<&'static str>,
    /// The Slack user id set, or `null` when it was cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable)]
    pub(crate) slack_user_id: Option<Option<String>>,
    /// The e-mail address set, or `null` when it was cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable)]
    pub(crate) email: Option<Option<String>>,
}

/// `GET /v1/admin/users/{user_id}`: a user's settings and contacts.
#[derive(Serialize, ToSchema)]
pub struct AdminUser {
    #[schema(value_type = String)]
    pub(crate) user_id: UserId,
    /// Whether they may approve cards now (the deployment's default when none was set).
    pub(crate) can_approve: bool,
    /// Their own mode (`enforce` or `shadow`); `null` when the deployment's applies.
    pub(crate) mode: Option<&'static str>,
    /// Their Slack user id, which maps a Slack click back to them.
    pub(crate) slack_user_id: Option<String>,
    /// Their e-mail address.
    pub(crate) email: Option<String>,
}

/// One audit row.
#[derive(ToSchema)]
pub struct AuditRow {
    id: i64,
    at: Time,
    kind: String,
    actor: String,
    user_id: Option<String>,
    chat_id: Option<String>,
    interrupt_id: Option<String>,
    detail: Value,
}

/// `GET /v1/admin/audit`.
#[derive(ToSchema)]
pub struct Audit {
    audit: Vec<AuditRow>,
}

/// One named API token, never its secret.
#[derive(ToSchema)]
pub struct AdminToken {
    name: String,
    /// `turns`, `approvals`, `cards:read`, `chats` or `admin`.
    scopes: Vec<String>,
    created_at: Time,
    /// `null` when the token does not expire.
    expires_at: Option<Time>,
}

/// `GET /v1/admin/tokens`.
#[derive(ToSchema)]
pub struct AdminTokens {
    tokens: Vec<AdminToken>,
}

/// `201` of `POST /v1/admin/tokens`: the token and, this once, its secret.
#[derive(ToSchema)]
pub struct AdminTokenCreated {
    name: String,
    scopes: Vec<String>,
    created_at: Time,
    expires_at: Option<Time>,
    /// The bearer secret; only its SHA-256 is stored.
    token: String,
}

/// A refusal the dry run's entry would have let through, with the turn it was recorded on.
#[derive(ToSchema)]
pub struct DryRunRefusal {
    turn_id: String,
    user_id: String,
    chat_id: String,
    #[serde(flatten)]
    refusal: super::turns::Refusal,
}

/// A card that asked for the dry run's package.
#[derive(ToSchema)]
pub struct AskedCard {
    interrupt_id: Option<String>,
    user_id: Option<String>,
    chat_id: Option<String>,
    at: Time,
}

/// `GET /v1/admin/dry-run`: what a pre-approved entry would have allowed; nothing is saved.
#[derive(ToSchema)]
pub struct DryRun {
    /// The pattern as it would be stored (pattern runs only).
    pattern: Option<String>,
    /// The package as it would be stored (package runs only).
    package: Option<String>,
    /// The look-back used.
    days: u32,
    /// Approvable refusals the pattern matches, or the package's refusals (any version).
    would_allow: Vec<DryRunRefusal>,
    /// Distinct hosts among them.
    hosts: Vec<String>,
    /// Cards that asked for the package.
    cards: Vec<AskedCard>,
    /// Whether the scan hit its row limit (older matches may exist).
    truncated: bool,
}
