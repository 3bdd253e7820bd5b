//! The response shapes of the control API as OpenAPI schemas, one room per area (turns, the
//! approval flow, chats and administration) beside the error body every status shares. The simple answers are these
//! types themselves (the handlers serialize them, so body and document cannot differ); the
//! rest describe JSON the handlers build from the store's rows, and the contract tests
//! (schemathesis against the real binary) check that every response matches them.

#![allow(dead_code)] // The describing types are read by the schema derive only.

mod admin;
mod approval;
mod turns;
mod webhooks;

use utoipa::ToSchema;

pub use admin::{
    AdminPackage, AdminPackages, AdminSite, AdminSites, AdminTokenCreated, AdminTokens, AdminUser,
    Approvals, Audit, DryRun, Hidden, Revoked, UserPermission,
};
pub(crate) use approval::DenyCode;
pub use approval::{
    BatchAnswer, CardView, Completed, Heartbeat, InboxCards, InboxLink, InterruptIssued,
    OutcomeAnswer, PendingCards, PendingCode, ResumeAnswer, TakeoverAnswer, ToolAnswer,
};
pub use turns::{Egress, Policy, Refusals, TurnOpened};
pub use webhooks::{SlackAnswer, WebhookCreated, WebhookDeliveries, WebhookRetry, Webhooks};

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
    "DELIVERY_NOT_FOUND",
    "DECISION_CONFLICT",
    "DRAFT_NOT_FOUND",
    "DRAFT_USED",
    "FORBIDDEN",
    "INBOX_LINK_EXPIRED",
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
    "SLACK_NOT_CONFIGURED",
    "SLACK_REPLAYED",
    "SLACK_UNVERIFIED",
    "SNAPSHOT_FAILED",
    "STORE_UNAVAILABLE",
    "TOKEN_EXISTS",
    "TOKEN_NOT_FOUND",
    "TOO_MANY_ATTEMPTS",
    "TURN_EXPIRED",
    "TURN_NOT_FOUND",
    "TURN_SUPERSEDED",
    "UNAUTHORIZED",
    "USER_NOT_FOUND",
    "WEBHOOK_NOT_FOUND",
];

/// Declares a schema-only type for a closed set of strings listed elsewhere: the values come
/// from that list (the store's own spellings, or [`ERROR_CODES`]), so the document cannot
/// restate them differently.
macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident, $about:literal, $values:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::String))
                    .enum_values(Some($values))
                    .description(Some($about))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}
pub(crate) use string_enum;

string_enum!(
    /// The `code` of an error body: one of [`ERROR_CODES`].
    ErrorCode,
    "Stable machine-readable code (UPPER_SNAKE).",
    ERROR_CODES.iter().copied()
);

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

/// `GET /openapi.json`: this document, an OpenAPI 3.1 object.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct OpenApiDocument(serde_json::Value);

/// `GET /v1/tools/approval.json`: a JSON Schema (2020-12) for a model's tool input.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct ToolInputSchema(serde_json::Value);
