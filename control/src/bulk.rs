//! What stays in the pointer record and what goes to the blob store: the pointer must stay
//! under `item-max-bytes`, so optional bulk (the first answer, the final answer) that would
//! push it over is moved whole into a blob — never cut, because a sliced answer is wrong in
//! a way nobody notices.

use axum::http::StatusCode;
use egressgate_store::Card;
use egressgate_store::blob::{BlobError, BlobRef};
use egressgate_store::db::interrupts::Pointer;
use egressgate_store::db::resume::StoredAnswer;
use serde_json::Value;

use crate::error::ApiError;
use crate::state::AppState;

/// Room for the pointer's ids, hashes, numbers, state and column overhead.
const FIXED_OVERHEAD: usize = 1024;

/// Estimated pointer size before any optional bulk: the card, the tool call id, the decision
/// and the fixed columns.
pub fn base_size(card: &Card, tool_call_id: Option<&str>) -> usize {
    let card_len = serde_json::to_string(card).map_or(usize::MAX / 4, |s| s.len());
    FIXED_OVERHEAD + card_len + tool_call_id.map_or(0, str::len)
}

/// Estimated size of a stored pointer (everything inline that it already carries).
fn pointer_size(p: &Pointer) -> usize {
    let decision = p
        .decision
        .as_ref()
        .and_then(|d| serde_json::to_string(d).ok());
    base_size(&p.card, p.tool_call_id.as_deref())
        + p.first_answer.inline.as_ref().map_or(0, String::len)
        + decision.map_or(0, |d| d.len())
}

/// The paused run's snapshot, base64, for whoever holds the claim (resume or takeover).
pub async fn load_snapshot(state: &AppState, p: &Pointer) -> Result<Option<String>, ApiError> {
    use base64::Engine as _;
    let Some(blob) = &p.snapshot else {
        return Ok(None);
    };
    let bytes = state
        .blobs
        .get(blob)
        .await
        .map_err(|e| unavailable(&e.to_string()))?;
    Ok(Some(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

/// `507 SNAPSHOT_FAILED`: no pointer and no card exist.
pub fn snapshot_failed(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "SNAPSHOT_FAILED", message)
}

fn blob_write_failed(e: &BlobError) -> ApiError {
    tracing::error!(error = %e, "blob write failed");
    snapshot_failed("the snapshot could not be stored; no approval request was created")
}

/// Keeps the first answer inline when the pointer stays under the limit, else writes it
/// whole to the blob store: `(inline, blob locator)`.
pub async fn place_first_answer(
    state: &AppState,
    base: usize,
    first_answer: Option<String>,
) -> Result<(Option<String>, Option<BlobRef>), ApiError> {
    let Some(text) = first_answer else {
        return Ok((None, None));
    };
    if fits(state, base + text.len()) {
        return Ok((Some(text), None));
    }
    let blob = state
        .blobs
        .put(text.into_bytes())
        .await
        .map_err(|e| blob_write_failed(&e))?;
    Ok((None, Some(blob)))
}

/// Keeps the final answer (JSON) inline when it fits, else in the blob store.
pub async fn place_answer(
    state: &AppState,
    p: &Pointer,
    answer: Option<&Value>,
) -> Result<(StoredAnswer, Option<BlobRef>), ApiError> {
    let Some(answer) = answer.filter(|a| !a.is_null()) else {
        return Ok((StoredAnswer::default(), None));
    };
    let text = answer.to_string();
    if fits(state, pointer_size(p) + text.len()) {
        return Ok((
            StoredAnswer {
                inline: Some(text),
                key: None,
            },
            None,
        ));
    }
    let blob = state.blobs.put(text.into_bytes()).await.map_err(|e| {
        tracing::error!(error = %e, "answer blob write failed");
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "ANSWER_NOT_STORED",
            "the answer could not be stored",
        )
    })?;
    Ok((
        StoredAnswer {
            inline: None,
            key: Some(blob.locator()),
        },
        Some(blob),
    ))
}

fn fits(state: &AppState, size: usize) -> bool {
    u64::try_from(size).is_ok_and(|s| s <= state.settings.item_max_bytes)
}

/// The stored final answer of a done request, for a replay.
pub async fn load_answer(state: &AppState, p: &Pointer) -> Result<Value, ApiError> {
    let text = match (&p.answer.inline, &p.answer.key) {
        (Some(inline), _) => inline.clone().into_bytes(),
        (None, Some(loc)) => {
            let blob = BlobRef::from_locator(loc)
                .ok_or_else(|| unavailable("answer locator is corrupt"))?;
            state
                .blobs
                .get(&blob)
                .await
                .map_err(|e| unavailable(&e.to_string()))?
        }
        (None, None) => return Ok(Value::Null),
    };
    serde_json::from_slice(&text).map_err(|_| unavailable("stored answer is corrupt"))
}

/// Deletes blobs written for a request that was then refused (best effort: the janitor
/// removes any that survive).
pub async fn discard(state: &AppState, blobs: impl IntoIterator<Item = BlobRef>) {
    for b in blobs {
        if let Err(e) = state.blobs.delete(&b.key).await {
            tracing::warn!(error = %e, "could not delete an unused blob; the janitor will");
        }
    }
}

/// `503 BLOB_UNAVAILABLE`: stored bulk could not be read back intact.
pub fn unavailable(why: &str) -> ApiError {
    tracing::error!(error = why, "blob read failed");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "BLOB_UNAVAILABLE",
        "stored data for this request could not be read; try again",
    )
}
