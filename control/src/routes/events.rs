//! `GET /v1/chats/{chat_id}/events` (runtime token + `X-Egressgate-User`): the chat's events as
//! server-sent events — `refusal.recorded`, `approval.requested`, `approval.resolved`,
//! `approval.revoked` — each with an `id:` line, resumable with `Last-Event-ID`, a keep-alive
//! comment every 10 s, and a `resync` event when the subscriber fell too far behind (or asked
//! for events already pruned): then it should re-read the chat's state and carry on. A chat
//! exists from its first turn; before that, and for another user's chat of the same id, the
//! answer is one identical `404 CHAT_NOT_FOUND`.
//!
//! The stream reads the events table (`id > last`), so any control process serves any chat;
//! the person's inbox follows every chat of its user through the same cursor ([`open`]);
//! it wakes on the store's signal (in-process writes, PostgreSQL `NOTIFY`) and polls anyway.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use egressgate_store::{ChatId, Store, Timestamp};
use futures_util::Stream;
use tokio::sync::watch;

use super::openapi::schemas;
use crate::auth::ChatUser;
use crate::error::ApiError;
use crate::state::AppState;

/// Most events read per query; a backlog larger than this is a lag and gets a resync.
const BATCH: i64 = 256;
/// Poll interval when no signal arrives (another process's write without `NOTIFY`).
const POLL: Duration = Duration::from_secs(1);
/// Keep-alive comment interval (proxies and browsers drop silent streams).
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Whose events a stream follows: the store reads both kinds through one cursor.
pub(crate) use egressgate_store::db::events::Follow;

/// One subscriber's position.
struct Cursor {
    store: Store,
    follow: Follow,
    last: i64,
    wake: watch::Receiver<u64>,
    queue: VecDeque<Event>,
    /// When the stream ends by itself (the inbox link's expiry).
    until: Option<Timestamp>,
}

fn resync(id: i64, why: &str) -> Event {
    Event::default()
        .event("resync")
        .id(id.to_string())
        .data(serde_json::json!({"reason": why, "last_event_id": id}).to_string())
}

impl Cursor {
    /// The next event to send; `None` ends the stream (the store failed: the client
    /// reconnects with `Last-Event-ID` and loses nothing; or the credential's time is up).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            if self.until.is_some_and(|t| t.has_passed(Timestamp::now())) {
                return None;
            }
            let rows = match self
                .store
                .events_after(&self.follow, self.last, BATCH + 1)
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!(error = %e, "event stream read failed; closing it");
                    return None;
                }
            };
            if rows.len() > usize::try_from(BATCH).unwrap_or(usize::MAX) {
                let latest = self.store.latest_event_id(&self.follow).await.ok()?;
                self.last = latest;
                return Some(resync(latest, "lagged"));
            }
            if let Some(last) = rows.last() {
                self.last = last.id;
                self.queue.extend(rows.into_iter().map(|r| {
                    Event::default()
                        .event(r.kind)
                        .id(r.id.to_string())
                        .data(r.data)
                }));
                continue;
            }
            tokio::select! {
                changed = self.wake.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(POLL).await;
                    }
                }
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }
}

fn last_event_id(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    match headers.get("last-event-id") {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|n| *n >= 0)
            .map(Some)
            .ok_or_else(|| ApiError::invalid_input("Last-Event-ID must be an event id")),
    }
}

#[utoipa::path(get, path = "/v1/chats/{chat_id}/events", tag = "chats", security(("runtime" = [])),
    params(("chat_id" = String, Path, description = "The chat."), ("X-Egressgate-User" = String, Header, description = "The chat's user."),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id.")),
    responses((status = 200, description = "Server-sent events: `refusal.recorded`, `approval.requested`, `approval.resolved`, `approval.revoked` (each with an `id:`), `resync` when the subscriber fell behind, and a keep-alive comment.", content_type = "text/event-stream", body = String),
        (status = 404, description = "`CHAT_NOT_FOUND`: no such chat: none of this user's turns named it (another user's chat of that id is answered the same).", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: a malformed Last-Event-ID.", body = schemas::ErrorBody)))]
/// `GET /v1/chats/{chat_id}/events`.
pub(crate) async fn stream(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let not_found = || ApiError::not_found("CHAT_NOT_FOUND", "no such chat");
    let chat = ChatId::parse(&chat_id).ok_or_else(not_found)?;
    // A chat is (user, chat id), and exists from its first turn. Another user's chat of the
    // same id is answered by the same one indexed read as a chat nobody opened.
    if state.store.chat_state(&user, &chat).await?.is_none() {
        return Err(not_found());
    }
    open(state.store, Follow::Chat(user, chat), &headers, None).await
}

/// The event stream of `follow`, from the request's `Last-Event-ID` (else from now), ending
/// by itself at `until` when given.
pub(crate) async fn open(
    store: Store,
    follow: Follow,
    headers: &HeaderMap,
    until: Option<Timestamp>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    let wake = store.subscribe_events();
    let mut queue = VecDeque::new();
    let last = match last_event_id(headers)? {
        None => store.latest_event_id(&follow).await?,
        Some(after) => {
            let oldest = store.oldest_event_id().await?;
            if oldest > after.saturating_add(1) {
                // Events after `after` may have been pruned: say so, then go on from now.
                let latest = store.latest_event_id(&follow).await?;
                queue.push_back(resync(latest, "pruned"));
                latest
            } else {
                after
            }
        }
    };
    let cursor = Cursor {
        store,
        follow,
        last,
        wake,
        queue,
        until,
    };
    let events =
        futures_util::stream::unfold(
            cursor,
            |mut c| async move { c.next().await.map(|e| (Ok(e), c)) },
        );
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}
