//! The person's side, served by the control plane from the binary: the approval card page
//! (`/ui/cards/{interrupt_id}#secret=…`), the person's inbox (`/ui/inbox#…`), the admin
//! console (`/ui/admin`), their embedded assets under content-hashed names, and the security
//! headers and same-origin check every response and state-changing request goes through.

mod assets;
mod headers;
mod pages;
pub(crate) mod session;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

pub(crate) use headers::{same_origin, security_headers};

/// The `/ui` routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/ui/cards/{interrupt_id}", get(pages::card))
        .route("/ui/inbox", get(pages::inbox))
        .route("/ui/admin", get(pages::admin))
        .route("/ui/admin/session", post(session::sign_in))
        .route("/ui/admin/signout", post(session::sign_out))
        .route("/ui/assets/{file}", get(assets::serve))
}
