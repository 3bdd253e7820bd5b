//! The API described as OpenAPI 3.1, generated from the handlers' `#[utoipa::path]`
//! annotations and served at `GET /openapi.json`; and the approval tool's input schema that a
//! runtime hands to a model as is (`GET /v1/tools/approval.json`).
//!
//! To document a new handler: annotate it with `#[utoipa::path(...)]` (its success and
//! endpoint-specific error statuses, each error description naming its codes in backticks)
//! and add it to `paths(...)` below and its operationId to [`operation_ids`]. The statuses every endpoint shares (401/403/429/503 on
//! authenticated ones, 400 `INVALID_BODY` on those with a body) are added by [`Shared`]. The
//! coverage test fails for any route in `routes.rs` that is missing here.

use std::sync::LazyLock;

use axum::Json;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

pub(crate) mod operation_ids;
pub(crate) mod schemas;
pub(crate) mod shared;

use super::{
    admin, approval, audit, batches, ca, chats, claims, dry_run, events, health, inbox, interrupts,
    pending, resume, slack, tokens, turns, user_approvals, users, view, webhooks,
};
use schemas::ErrorBody;
use shared::error_response;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "egressgate control API",
        description = "Turns, refusals, the approval tool, interrupts, resume exactly once, \
            approvals and administration. Errors are `{\"error\": {\"code\", \"message\"}}`; \
            each error response lists its codes in `x-error-codes`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        health::healthz, health::readyz, document_json, approval_tool_json, ca::ca_pem,
        turns::open, turns::refusals, turns::egress, turns::policy,
        approval::request, batches::decide,
        interrupts::register, interrupts::outcome, interrupts::reissue,
        resume::resume, claims::heartbeat, claims::complete,
        chats::hide, chats::list_approvals, chats::revoke,
        user_approvals::list, user_approvals::revoke,
        admin::list_sites, admin::add_site, admin::remove_site,
        admin::list_packages, admin::add_package, admin::remove_package,
        users::set_user, users::get_user, audit::list,
        tokens::list, tokens::add, tokens::remove, dry_run::dry_run,
        pending::list, view::view, claims::takeover, events::stream,
        inbox::inbox_link, inbox::inbox_cards, inbox::inbox_events,
        webhooks::list, webhooks::add, webhooks::remove, webhooks::deliveries, webhooks::retry,
        slack::interactions,
    ),
    components(schemas(ErrorBody, audit::AuditKindParam)),
    modifiers(&Shared),
    tags(
        (name = "turns", description = "One turn per user message; what its sandbox was refused"),
        (name = "approval", description = "The approval tool, interrupts and resume"),
        (name = "chats", description = "A person's approvals and chats"),
        (name = "admin", description = "Pre-approved lists, permissions, audit (admin token)"),
        (name = "meta", description = "Health and this document"),
    ),
)]
struct ApiDoc;

/// Declares the security schemes, names each operation, adds the statuses every endpoint of
/// a kind shares, then lists each error response's codes (the backticked UPPER_SNAKE words
/// of its description) in `x-error-codes`, so a client can switch on them without parsing
/// prose.
struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        for (name, scheme, about) in [
            (
                "runtime",
                HttpAuthScheme::Bearer,
                "The runtime token, or a named token with the endpoint's scope.",
            ),
            (
                "admin",
                HttpAuthScheme::Bearer,
                "The admin token, or a named token with the `admin` scope.",
            ),
            (
                "turn_credential",
                HttpAuthScheme::Basic,
                "The turn's proxy credential (`turn_id:secret` of its `proxy_url`), for a package installer in the sandbox.",
            ),
        ] {
            let mut http = Http::new(scheme);
            http.description = Some(about.to_owned());
            components.add_security_scheme(name, SecurityScheme::Http(http));
        }
        operation_ids::apply(doc);
        for item in doc.paths.paths.values_mut() {
            for (op, state_changing) in [
                (&mut item.get, false),
                (&mut item.post, true),
                (&mut item.put, true),
                (&mut item.delete, true),
            ] {
                if let Some(op) = op {
                    add_shared(op, state_changing);
                    list_codes(op);
                }
            }
        }
    }
}

/// Adds `description` to the response for `status`, creating it when absent.
fn merge(op: &mut Operation, status: &str, description: &str) {
    match op.responses.responses.get_mut(status) {
        Some(RefOr::T(r)) => {
            r.description.push_str("\n\n");
            r.description.push_str(description);
        }
        _ => {
            op.responses
                .responses
                .insert(status.into(), error_response(description));
        }
    }
}

fn add_shared(op: &mut Operation, state_changing: bool) {
    if state_changing {
        merge(
            op,
            "403",
            "`CROSS_ORIGIN`: a browser request from another site (its `Origin` or \
             `Sec-Fetch-Site`) that would change state.",
        );
    }
    if op.request_body.is_some() {
        merge(
            op,
            "400",
            "`INVALID_BODY`: malformed JSON, a wrong type, a missing or an unknown field.",
        );
    }
    merge(
        op,
        "400",
        "`INVALID_HEADER`: `Authorization` or `X-Egressgate-User` sent twice.",
    );
    if op.security.as_ref().is_some_and(|s| !s.is_empty()) {
        merge(
            op,
            "401",
            "`UNAUTHORIZED`: a bearer token was required or sent, and it is missing or unknown.",
        );
        merge(
            op,
            "403",
            "`FORBIDDEN`: the token lacks the endpoint's scope.",
        );
        merge(
            op,
            "429",
            "`TOO_MANY_ATTEMPTS`: this client address sent too many requests without a valid \
             credential; see `Retry-After`.",
        );
        merge(
            op,
            "503",
            "`STORE_UNAVAILABLE`: the database is unavailable. `AUDIT_FAILED`: the change \
             could not be audited, so it was not made (fail closed).",
        );
    }
}

/// The backticked UPPER_SNAKE codes of a description, in order, without repeats.
pub(crate) fn codes_in(description: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, part) in description.split('`').enumerate() {
        let is_code = i % 2 == 1
            && part.len() > 2
            && part.chars().all(|c| c.is_ascii_uppercase() || c == '_');
        if is_code && !out.iter().any(|c| c == part) {
            out.push(part.to_owned());
        }
    }
    out
}

fn list_codes(op: &mut Operation) {
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(r) = response else { continue };
        if !(status.starts_with('4') || status.starts_with('5')) {
            continue;
        }
        let codes = codes_in(&r.description);
        if codes.is_empty() {
            continue;
        }
        let ext = utoipa::openapi::extensions::ExtensionsBuilder::new()
            .add("x-error-codes", json!(codes))
            .build();
        match &mut r.extensions {
            Some(e) => e.merge(ext),
            None => r.extensions = Some(ext),
        }
    }
}

/// The whole document, built once.
pub(crate) fn document() -> &'static Value {
    static DOC: LazyLock<Value> =
        LazyLock::new(|| serde_json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null));
    &DOC
}

/// The HTTP methods an operation of the document can be under, as its path items name them.
#[cfg(test)]
pub(crate) const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

/// Fails unless `table` (`(method, path)` rows) names exactly the operations the document
/// describes, read from the document in one way for the route table and the operationId
/// table alike. `undocumented` heads the rows the document lacks, `unlisted` the operations
/// the table lacks.
#[cfg(test)]
pub(crate) fn assert_names_every_operation(
    table: &std::collections::BTreeSet<(String, String)>,
    undocumented: &str,
    unlisted: &str,
) {
    let mut documented = std::collections::BTreeSet::new();
    for (path, item) in document()["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            if item.get(method).is_some() {
                documented.insert((method.to_owned(), path.clone()));
            }
        }
    }
    let extra: Vec<_> = table.difference(&documented).collect();
    assert!(extra.is_empty(), "{undocumented}: {extra:?}");
    let missing: Vec<_> = documented.difference(table).collect();
    assert!(missing.is_empty(), "{unlisted}: {missing:?}");
}

fn json_response(v: &Value) -> Response {
    ([(header::CACHE_CONTROL, "no-cache")], Json(v.clone())).into_response()
}

/// `GET /openapi.json`: this document.
#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API.", content_type = "application/json", body = schemas::OpenApiDocument)))]
pub(crate) async fn document_json() -> Response {
    json_response(document())
}

/// `GET /v1/tools/approval.json`: the approval tool's input schema, for a model as is.
#[utoipa::path(get, path = "/v1/tools/approval.json", tag = "approval",
    responses((status = 200, description = "A JSON Schema (2020-12) object with root `type: object`: \
        `reason`, `urls`, `packages`.", content_type = "application/json", body = schemas::ToolInputSchema)))]
pub(crate) async fn approval_tool_json() -> Response {
    static SCHEMA: LazyLock<Value> = LazyLock::new(crate::approval::schema::approval_tool_schema);
    json_response(&SCHEMA)
}
