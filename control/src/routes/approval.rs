//! `POST /v1/turns/{turn_id}/approval-requests`: the approval tool's first call. Gathers the
//! facts (turn, refusals, grants, permission) and runs the design's steps 1–7 in order; the
//! first matching step answers. Only step 7 writes anything (the draft card).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use egressgate_store::{Card, Timestamp};
use serde_json::{Value, json};

use crate::AppState;
use crate::approval::fit;
use crate::approval::input::{self, ApprovalRequestBody};
use crate::approval::merge::{self, Early};
use crate::approval::text::{self, NoAnswer};
use crate::auth::ApprovalsAuth;
use crate::body::StrictJson;
use crate::error::ApiError;
use crate::grants::Grants;
use crate::turn_access::find_turn;

fn denied(code: &str, message: String) -> Json<Value> {
    Json(json!({"outcome": "denied", "code": code, "message": message}))
}

/// The handler. Identity and the "can a human answer" flag come from the turn, never from
/// the model-written body.
pub(crate) async fn request(
    _auth: ApprovalsAuth,
    State(state): State<AppState>,
    Path(turn_id): Path<String>,
    headers: HeaderMap,
    StrictJson(body): StrictJson<ApprovalRequestBody>,
) -> Result<Json<Value>, ApiError> {
    let now = Timestamp::now();
    let turn = find_turn(&state.store, &turn_id, &headers, now).await?;
    // A hidden chat's cards can never be resumed; asking would only leave a dead draft.
    let chat = state.store.chat_state(&turn.user, &turn.chat).await?;
    if chat.is_none_or(|c| c.hidden) {
        return Err(ApiError::gone("CHAT_HIDDEN", "this chat was hidden"));
    }
    let settings = &state.settings;

    // Step 1.
    let req = input::validate(body, settings)?;

    // Steps 2–4.
    let (refusals, _overflow) = state.store.list_refusals(&turn.id).await?;
    let wanted = match merge::merge(&req, &refusals, &settings.internal_suffixes) {
        Ok(w) => w,
        Err(Early::NothingToApprove) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "NOTHING_TO_APPROVE",
                text::NOTHING_TO_APPROVE,
            ));
        }
        Err(Early::NotApprovable(pairs)) => {
            return Ok(denied("NOT_APPROVABLE", text::not_approvable(&pairs)));
        }
    };

    // Step 5.
    let grants = Grants::load(&state.store, &turn, now).await?;
    let left = merge::drop_granted(wanted, &grants);
    if left.is_empty() {
        return Ok(Json(
            json!({"outcome": "already_approved", "message": text::ALREADY_APPROVED}),
        ));
    }
    // At most card-max-sites hosts: every named one, then the latest refused ones.
    let fitted = fit::fit(&left, settings.card_max_sites);
    let card = Card::new(
        fitted.sites.into_iter().collect(),
        left.urls.into_iter().map(|u| u.text).collect(),
        left.packages.into_iter().collect(),
        req.reason,
    )
    .with_sites_not_shown(fitted.not_shown);
    // What was named passed the caps in step 1 and the fit bounds the rest; checked again so
    // no card a person cannot read is ever stored.
    input::check_caps(
        settings,
        card.sites.len(),
        card.urls.len(),
        card.packages.len(),
    )?;

    // Step 6.
    let no_answer = if !turn.can_ask_human {
        Some(NoAnswer::NoHuman)
    } else if !state
        .store
        .can_approve(&turn.user)
        .await?
        .unwrap_or(settings.default_can_approve)
    {
        Some(NoAnswer::NotPermitted)
    } else {
        None
    };
    if let Some(who) = no_answer {
        return Ok(denied(
            who.code(),
            text::denied(who, &card.sites, &card.packages),
        ));
    }

    // Step 7.
    let draft = state
        .store
        .create_draft(&turn, &card, req.tool_call_id.as_deref(), now)
        .await?;
    Ok(Json(
        json!({"outcome": "ask", "draft_id": draft, "card": card}),
    ))
}
