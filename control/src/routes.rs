//! The route table: one place that shows every endpoint and which module serves it.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};

use crate::auth::USER_HEADER;
use crate::credentials::guard::AuthGuard;
use crate::error::ApiError;
use crate::resume_guard::ResumeGuard;
use crate::state::AppState;

mod admin;
mod approval;
mod audit;
mod batches;
mod ca;
mod chats;
mod claims;
mod dry_run;
mod events;
mod health;
mod inbox;
mod interrupts;
pub(crate) mod openapi;
mod pending;
mod pointer;
mod resume;
mod slack;
mod tokens;
mod turns;
mod user_approvals;
mod users;
mod view;
mod webhooks;

pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/openapi.json", get(openapi::document_json))
        .route("/v1/ca.pem", get(ca::ca_pem))
        .route("/v1/tools/approval.json", get(openapi::approval_tool_json))
        .route("/v1/turns", post(turns::open))
        .route("/v1/turns/{turn_id}/refusals", get(turns::refusals))
        .route("/v1/turns/{turn_id}/egress", get(turns::egress))
        .route("/v1/turns/{turn_id}/policy", get(turns::policy))
        .route(
            "/v1/turns/{turn_id}/approval-requests",
            post(approval::request),
        )
        .route("/v1/batches/decide", post(batches::decide))
        .route(
            "/v1/admin/sites",
            get(admin::list_sites).post(admin::add_site),
        )
        .route("/v1/admin/sites/{pattern}", delete(admin::remove_site))
        .route(
            "/v1/admin/packages",
            get(admin::list_packages).post(admin::add_package),
        )
        .route("/v1/admin/packages/{name}", delete(admin::remove_package))
        .route(
            "/v1/admin/users/{user_id}",
            get(users::get_user).put(users::set_user),
        )
        .route("/v1/admin/tokens", get(tokens::list).post(tokens::add))
        .route("/v1/admin/tokens/{name}", delete(tokens::remove))
        .route("/v1/admin/audit", get(audit::list))
        .route(
            "/v1/admin/webhooks",
            get(webhooks::list).post(webhooks::add),
        )
        .route("/v1/admin/webhooks/{id}", delete(webhooks::remove))
        .route(
            "/v1/admin/webhooks/{id}/deliveries",
            get(webhooks::deliveries),
        )
        .route(
            "/v1/admin/webhooks/{id}/deliveries/{delivery_id}/retry",
            post(webhooks::retry),
        )
        .route("/v1/admin/dry-run", get(dry_run::dry_run))
        .route("/v1/slack/interactions", post(slack::interactions))
        .route("/v1/users/{user_id}/interrupts", get(pending::list))
        .route("/v1/users/{user_id}/inbox-link", post(inbox::inbox_link))
        .route("/v1/inbox/cards", post(inbox::inbox_cards))
        .route("/v1/inbox/events", post(inbox::inbox_events))
        .route("/v1/interrupts/{id}/view", post(view::view))
        .route("/v1/interrupts/{id}/takeover", post(claims::takeover))
        .route("/v1/chats/{chat_id}/events", get(events::stream))
        .route("/v1/interrupts", post(interrupts::register))
        .route("/v1/interrupts/{id}/outcome", get(interrupts::outcome))
        .route("/v1/interrupts/{id}/resume", post(resume::resume))
        .route("/v1/interrupts/{id}/heartbeat", post(claims::heartbeat))
        .route("/v1/interrupts/{id}/complete", post(claims::complete))
        .route("/v1/chats/{chat_id}", delete(chats::hide))
        .route(
            "/v1/chats/{chat_id}/interrupt/reissue",
            post(interrupts::reissue),
        )
        .route("/v1/chats/{chat_id}/approvals", get(chats::list_approvals))
        .route("/v1/users/{user_id}/approvals", get(user_approvals::list))
        .route(
            "/v1/users/{user_id}/approvals/{kind}/{value}",
            delete(user_approvals::revoke),
        )
        .route(
            "/v1/chats/{chat_id}/approvals/{kind}/{value}",
            delete(chats::revoke),
        )
        .merge(crate::ui::router())
        .fallback(no_such_endpoint)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::Extension(std::sync::Arc::new(ResumeGuard::new(
            &state.settings,
        ))))
        .layer(axum::Extension(std::sync::Arc::new(AuthGuard::new(
            &state.settings,
        ))))
        .with_state(state)
}

/// The guards every request passes, `/mcp` included (`app` applies them outside the merged
/// routers): one credential each, no cross-site writes, the security headers.
pub(crate) fn guarded(router: Router, state: &AppState) -> Router {
    router
        .layer(axum::middleware::from_fn(one_credential_each))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::ui::same_origin,
        ))
        .layer(axum::middleware::from_fn(crate::ui::security_headers))
}

/// A request that sends `Authorization` or `X-Egressgate-User` twice is ambiguous (which one
/// would a check read?), so it is `400 INVALID_HEADER` before any handler runs.
async fn one_credential_each(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    for name in [axum::http::header::AUTHORIZATION.as_str(), USER_HEADER] {
        if req.headers().get_all(name).iter().nth(1).is_some() {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "INVALID_HEADER",
                format!("send the {name} header once"),
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// An administrator's listing, `{"<key>": [row, …]}`, each stored row written by `row`: the
/// console's lists (sites, packages, tokens, webhooks, deliveries) answer in this one shape.
fn listing<T>(
    key: &str,
    rows: &[T],
    row: impl Fn(&T) -> serde_json::Value,
) -> axum::Json<serde_json::Value> {
    let rows: Vec<serde_json::Value> = rows.iter().map(row).collect();
    axum::Json(serde_json::json!({ key: rows }))
}

/// Unknown paths answer in the API's error shape too.
async fn no_such_endpoint() -> ApiError {
    ApiError::not_found("NOT_FOUND", "no such endpoint")
}

/// A known path with a method it does not serve.
async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "this endpoint does not serve that method",
    )
}

#[cfg(test)]
mod tests {
    //! The route table and the OpenAPI document cannot drift: every `.route(...)` in the
    //! control plane's source (this file and any sub-router merged into it), with each method
    //! it serves, must be an operation of the document, and the document may name nothing
    //! the router does not serve.

    use std::collections::BTreeSet;

    /// `(METHOD, path)` for every `.route("path", method(..).method(..))` in `source`.
    fn routes_in(source: &str) -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for chunk in source.split(".route(").skip(1) {
            let Some(path) = chunk
                .trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split('"').next())
            else {
                continue;
            };
            // The method router runs to the close of this `.route(` call.
            let mut depth = 1usize;
            let mut end = chunk.len();
            for (i, c) in chunk.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let body = &chunk[..end];
            for m in super::openapi::METHODS {
                let called = body.match_indices(&format!("{m}(")).any(|(i, _)| {
                    i == 0 || !body[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if called {
                    out.insert((m.to_owned(), path.to_owned()));
                }
            }
        }
        out
    }

    /// Served on the listener but not JSON-over-HTTP endpoints of this document.
    /// Not the JSON API: the MCP endpoint (its own protocol) and the browser pages, assets
    /// and console form posts under `/ui/`.
    const NOT_IN_DOCUMENT: &[&str] = &[
        "/mcp",
        "/ui/admin",
        "/ui/assets/{file}",
        "/ui/cards/{interrupt_id}",
        "/ui/inbox",
        "/ui/admin/session",
        "/ui/admin/signout",
    ];

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let mut stack = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
        let mut routes = BTreeSet::new();
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                for entry in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                    stack.push(entry.path());
                }
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let (source, _) = text.split_once("#[cfg(test)]").unwrap_or((&text, ""));
            routes.extend(
                routes_in(source)
                    .into_iter()
                    .filter(|(_, p)| !NOT_IN_DOCUMENT.contains(&p.as_str())),
            );
        }
        assert!(
            routes.len() > 20,
            "the route scan found too little: {routes:?}"
        );
        super::openapi::assert_names_every_operation(
            &routes,
            "routes missing from the OpenAPI document (annotate the handler and add it to paths(...))",
            "documented but not routed",
        );
    }

    #[test]
    fn the_scan_sees_chained_methods() {
        let found = routes_in(r#"x.route("/a/{id}", get(m::x).post(m::y)).route("/b", delete(z))"#);
        let want: BTreeSet<_> = [("get", "/a/{id}"), ("post", "/a/{id}"), ("delete", "/b")]
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        assert_eq!(found, want);
    }
}
