//! The response shapes of the control API as OpenAPI schemas. The simple answers are these
//! types themselves (the handlers serialize them, so body and document cannot differ); the
//! rest describe JSON the handlers build from the store's rows, and the contract tests
//! (schemathesis against the real binary) check that every response matches them.

#![allow(dead_code)] // The describing types are read by the schema derive only.

pub(crate) use crate::approval::text::DenyCode;
use egressgate_store::db::refusals::{EgressRow as StoredEgress, RefusalRow};
use egressgate_store::{ChatId, Timestamp, TurnId, UserId};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{RefOr, schema::SchemaType};

/// Every error code the API answers with. A test keeps this list and the handlers' codes in
/// step, so the document's enum is the whole set.
pub const ERROR_CODES: &[&str] = &[
    "ANSWER_NOT_STORED",
    "APPROVAL_NOT_FOUND",
    "AUDIT_FAILED",
    "BLOB_UNAVAILABLE",
    "BUSY",
    "CA_NOT_FOUND",
    "CHAT_HIDDEN",
    "CHAT_NOT_FOUND",
    "CLAIM_LOST",
    "CONFLICT",
    "CROSS_ORIGIN",
    "CSRF",
    "DEADLINE_PASSED",
    "DECISION_CONFLICT",
    "DRAFT_NOT_FOUND",
    "DRAFT_USED",
    "FORBIDDEN",
    "INCOMPLETE_RESUME",
    "INTERRUPT_EXPIRED",
    "INTERRUPT_NOT_FOUND",
    "INTERRUPT_PENDING",
    "INVALID_BODY",
    "INVALID_DECISION",
    "INVALID_HEADER",
    "INVALID_INPUT",
    "METHOD_NOT_ALLOWED",
    "MISSING_TURN",
    "MISSING_USER",
    "NOTHING_TO_APPROVE",
    "NOT_FOUND",
    "RESUME_IN_PROGRESS",
    "SNAPSHOT_FAILED",
    "STORE_UNAVAILABLE",
    "TOKEN_EXISTS",
    "TOKEN_NOT_FOUND",
    "TOO_MANY_ATTEMPTS",
    "TURN_EXPIRED",
    "TURN_NOT_FOUND",
    "TURN_SUPERSEDED",
    "UNAUTHORIZED",
];

/// The `code` of an error body: one of [`ERROR_CODES`].
pub struct ErrorCode;

impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .enum_values(Some(ERROR_CODES.iter().copied()))
            .description(Some("Stable machine-readable code (UPPER_SNAKE)."))
            .into()
    }
}

impl ToSchema for ErrorCode {}

/// `{"error": {"code", "message"}}`, the body of every error status.
#[derive(ToSchema)]
pub struct ErrorBody {
    error: ErrorDetail,
}

/// The inside of an error body.
#[derive(ToSchema)]
pub struct ErrorDetail {
    #[schema(value_type = ErrorCode)]
    code: String,
    /// Written for the caller; never database text.
    message: String,
}

/// An RFC 3339 UTC timestamp such as `2026-01-01T00:00:00.000Z`.
#[derive(ToSchema)]
#[schema(value_type = String, format = DateTime)]
pub struct Time(String);

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

/// A refusal reason (the closed set).
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum RefusalReason {
    NotApproved,
    IpLiteral,
    InternalName,
    PortNotAllowed,
    PrivateAddress,
    SniMismatch,
    HostMismatch,
    LimitExceeded,
    MethodNotAllowed,
    PackageNotApproved,
}

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

/// The card a person is shown: computed by the server, never altered by the runtime.
#[derive(ToSchema)]
pub struct Card {
    sites: Vec<String>,
    urls: Vec<String>,
    packages: Vec<String>,
    reason: String,
    /// Blocked sites left off a full card (absent when none): not shown, not granted.
    sites_not_shown: Option<u32>,
}

/// The code of a `pending` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PendingCode {
    /// The chat's card waits for the person.
    InterruptPending,
}

/// `200` of the approval tool, by `outcome`: each kind carries exactly its fields.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ToolAnswer {
    /// Nobody will be asked; the message says what stays blocked and what to do.
    Denied {
        /// Which template.
        code: DenyCode,
        /// For the model.
        message: String,
    },
    /// Everything is already allowed: run the step.
    AlreadyApproved {
        /// For the model.
        message: &'static str,
    },
    /// The chat's card still waits for the person: pause on it instead of asking again.
    Pending {
        /// Always `INTERRUPT_PENDING`.
        code: PendingCode,
        /// The waiting card's interrupt id.
        #[schema(value_type = String)]
        interrupt_id: egressgate_store::InterruptId,
        /// Always `pending`.
        state: InterruptState,
        /// The waiting card.
        #[schema(value_type = Card)]
        card: egressgate_store::Card,
        /// For the model.
        message: &'static str,
    },
    /// A single-use draft card to register with `POST /v1/interrupts`.
    Ask {
        /// The draft.
        #[schema(value_type = String)]
        draft_id: egressgate_store::DraftId,
        /// What the person will see.
        #[schema(value_type = Card)]
        card: egressgate_store::Card,
    },
}

/// An AG-UI 1.0 `Interrupt`: goes straight into `RUN_FINISHED.outcome.interrupts`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Interrupt {
    id: String,
    /// `tool_call` (with `toolCallId`) or `egressgate:approval`.
    reason: String,
    tool_call_id: Option<String>,
    message: String,
    #[schema(value_type = Object)]
    response_schema: Value,
    expires_at: Time,
}

/// `201` of `POST /v1/interrupts` and `200` of the reissue: the only time the secret is shown.
#[derive(ToSchema)]
pub struct InterruptIssued {
    interrupt: Interrupt,
    card: Card,
    resume_secret: String,
}

/// Where a request is in its life.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InterruptState {
    Pending,
    Claimed,
    Done,
    Expired,
}

/// How the person answered.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum DecisionOutcome {
    Approved,
    Declined,
    Cancelled,
}

/// The decision fixed by the first claim; `sites` and `packages` are empty unless approved.
#[derive(ToSchema)]
pub struct Decision {
    outcome: DecisionOutcome,
    sites: Vec<String>,
    packages: Vec<String>,
    /// Present (`read`) only when the person narrowed the card's `full` with
    /// `payload.access`; absent means `full`.
    #[schema(value_type = Option<String>, pattern = "^read$")]
    access: Option<String>,
}

/// `GET /v1/interrupts/{id}/outcome`.
#[derive(ToSchema)]
pub struct OutcomeAnswer {
    state: InterruptState,
    card: Card,
    decision: Option<Decision>,
    /// True while the claim is the card page's, for the runtime to take over
    /// (`POST /v1/interrupts/{id}/takeover`).
    handoff: Option<bool>,
}

/// The claim the winning resume holds.
#[derive(ToSchema)]
pub struct Claim {
    claim_id: String,
    lease_expires_at: Time,
    deadline: Time,
}

/// `200` of a resume: `claimed` (the first), or `done` with `replayed: true` (a replay that
/// runs nothing).
#[derive(ToSchema)]
pub struct ResumeAnswer {
    #[schema(value_type = String, pattern = "^(claimed|done)$")]
    state: String,
    claim: Option<Claim>,
    decision: Option<Decision>,
    /// Base64 snapshot, with `claimed` (null when none was stored).
    snapshot: Option<String>,
    replayed: Option<bool>,
    /// The completed run's answer, with `done`.
    answer: Option<Value>,
}

/// `POST /v1/interrupts/{id}/heartbeat`.
#[derive(Serialize, ToSchema)]
pub struct Heartbeat {
    #[schema(value_type = Time)]
    pub(crate) lease_expires_at: Timestamp,
}

/// `POST /v1/interrupts/{id}/complete`: always `done`.
#[derive(Serialize, ToSchema)]
pub struct Completed {
    #[schema(value_type = String, pattern = "^done$")]
    pub(crate) state: &'static str,
}

impl Completed {
    /// The one answer.
    pub(crate) const DONE: Self = Self { state: "done" };
}

/// `POST /v1/batches/decide`: tool use id → text of the cancelled result.
#[derive(ToSchema)]
pub struct BatchAnswer {
    cancel: std::collections::BTreeMap<String, String>,
}

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
}

/// `GET /v1/chats/{chat_id}/approvals`.
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
