//! One `api request` line per control-API request, at info: the route template (never the raw
//! path or its query, where a link's secret could stand), method, status, error code, duration,
//! and the ids that say whose request it was (user, chat, turn, card). Tokens, secrets and
//! bodies are never read here. The ids come from the path's parameters and the runtime's
//! `X-Egressgate-User`, each parsed with the store's id rules first, so a forged value cannot
//! break the line.

use std::time::Instant;

use axum::RequestExt as _;
use axum::extract::{MatchedPath, RawPathParams, Request};
use axum::middleware::Next;
use axum::response::Response;
use egressgate_store::{ChatId, InterruptId, TurnId, UserId};

use crate::auth::USER_HEADER;
use crate::error::ErrorCode;

/// Whose request it was, from the path and the runtime's user header.
#[derive(Default)]
struct Who {
    user: Option<UserId>,
    chat: Option<ChatId>,
    turn: Option<TurnId>,
    card: Option<InterruptId>,
}

impl Who {
    async fn of(req: &mut Request) -> Self {
        let header = req.headers().get(USER_HEADER).and_then(|v| v.to_str().ok());
        let mut who = Self {
            user: header.and_then(UserId::parse),
            ..Self::default()
        };
        if let Ok(params) = req.extract_parts::<RawPathParams>().await {
            for (name, value) in &params {
                match name {
                    "user_id" => who.user = UserId::parse(value).or(who.user.take()),
                    "chat_id" => who.chat = ChatId::parse(value),
                    "turn_id" => who.turn = TurnId::parse(value),
                    "id" | "interrupt_id" => who.card = InterruptId::parse(value),
                    _ => {}
                }
            }
        }
        who
    }
}

/// The middleware: the line is written once the answer is ready (a streamed answer, such
/// as a chat's events, is logged when its stream starts).
pub async fn log(mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().clone();
    let who = Who::of(&mut req).await;
    let resp = next.run(req).await;
    let code = resp.extensions().get::<ErrorCode>().map(|c| c.0);
    tracing::info!(
        target: "egressgate::api",
        route,
        method = %method,
        status = resp.status().as_u16(),
        code,
        duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        user_id = who.user.as_ref().map(UserId::as_str),
        chat_id = who.chat.as_ref().map(ChatId::as_str),
        turn_id = who.turn.as_ref().map(TurnId::as_str),
        interrupt_id = who.card.as_ref().map(InterruptId::as_str),
        "api request"
    );
    resp
}
