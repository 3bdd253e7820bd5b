//! The server-rendered page shells (minijinja templates compiled into the binary, HTML
//! auto-escaped). Pages carry no data a link alone must not reveal: the card page's and the
//! inbox's scripts fetch what they show with the secret from the URL fragment, and the
//! console shows its lists only to a signed-in session.

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use egressgate_store::InterruptId;
use minijinja::{Environment, context};

use super::assets;
use super::session;
use crate::state::AppState;

static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    for (name, text) in [
        ("page.html", include_str!("templates/page.html")),
        ("card.html", include_str!("templates/card.html")),
        ("admin.html", include_str!("templates/admin.html")),
        ("inbox.html", include_str!("templates/inbox.html")),
    ] {
        if let Err(e) = env.add_template(name, text) {
            tracing::error!(error = %e, template = name, "template does not compile");
        }
    }
    env
});

/// An embedded file's URL for a template: our own constant path, not input, so it is
/// inserted as is (auto-escaping would spell its slashes `&#x2f;`).
fn asset(name: &str) -> minijinja::Value {
    minijinja::Value::from_safe_string(assets::url(name))
}

/// Renders page `name` (each extends `page.html`, the one head every page shares) with `ctx`
/// and the shared assets.
fn render(name: &str, ctx: minijinja::Value) -> Response {
    let shared = context! { css => asset("ui.css"), icon => asset("icon.svg") };
    let page = TEMPLATES
        .get_template(name)
        .and_then(|t| t.render(context! { ..ctx, ..shared }));
    match page {
        Ok(html) => ([(header::CACHE_CONTROL, "no-store")], Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, template = name, "page could not be rendered");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered",
            )
                .into_response()
        }
    }
}

/// `GET /ui/cards/{interrupt_id}`: the card page's shell. The secret stays in the fragment
/// (`#secret=…`), which browsers never send; an id that cannot exist renders the same shell,
/// whose script then says the link is not valid.
pub(crate) async fn card(Path(id): Path<String>) -> Response {
    let id = InterruptId::parse(&id)
        .map(|i| i.as_str().to_owned())
        .unwrap_or_default();
    render(
        "card.html",
        context! {
            interrupt_id => id,
            fragment => asset("fragment.js"),
            js => asset("card.js"),
        },
    )
}

/// `GET /ui/inbox`: the person's inbox shell. Like the card page, its secret stays in the
/// fragment and the page holds no data until its script presents that secret.
pub(crate) async fn inbox() -> Response {
    render(
        "inbox.html",
        context! {
            fragment => asset("fragment.js"),
            js => asset("inbox.js"),
        },
    )
}

/// `GET /ui/admin`: the console for a signed-in session (with its CSRF token in the page),
/// otherwise the sign-in form.
pub(crate) async fn admin(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let csrf = match session::current(&state, &headers).await {
        Ok(s) => s.map(|s| s.csrf),
        Err(e) => return e.into_response(),
    };
    render(
        "admin.html",
        context! {
            signed_in => csrf.is_some(),
            csrf => csrf.unwrap_or_default(),
            js => asset("admin.js"),
        },
    )
}
