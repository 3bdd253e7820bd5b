//! `POST /v1/turns/{turn_id}/approval-requests`: the approval tool's first call. Gathers the
//! facts (turn, refusals, grants, permission, the chat's card) and runs the design's steps
//! 1–7 in order, with two more answers a model can act on: 5b, what the person declined in
//! this turn is not asked again (`denied`, `DECLINED_THIS_TURN`); 6b, while the chat's card
//! waits for the person, the answer is that card (`pending`, `INTERRUPT_PENDING`) instead
//! of a draft that registration would refuse. The first matching step answers; only step 7
//! writes anything (the draft card).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use egressgate_store::db::interrupts::{InterruptState, Outcome};
use egressgate_store::{Card, Timestamp};

use super::openapi::schemas::{self, DenyCode, PendingCode, ToolAnswer};
use super::openapi::shared::{TurnNotFound, TurnParams};
use crate::approval::input::{self, ApprovalRequestBody};
use crate::approval::merge::{self, Early};
use crate::approval::text::{self, NoAnswer};
use crate::approval::{evidence, fit};
use crate::auth::ApprovalsAuth;
use crate::body::StrictJson;
use crate::error::ApiError;
use crate::grants::Grants;
use crate::state::AppState;
use crate::turn_access::find_turn;

fn denied(code: DenyCode, message: String) -> Json<ToolAnswer> {
    Json(ToolAnswer::Denied { code, message })
}

#[utoipa::path(post, path = "/v1/turns/{turn_id}/approval-requests", tag = "approval", security(("runtime" = [])),
    request_body = ApprovalRequestBody, params(TurnParams),
    responses(
        (status = 200, description = "The answer, in the fixed order: `denied` (codes `NOT_APPROVABLE`, `DECLINED_THIS_TURN`, `NO_HUMAN`, `NOT_PERMITTED`), `already_approved`, `pending` (code `INTERRUPT_PENDING`: the chat's open request), or `ask` with the draft card.", body = schemas::ToolAnswer),
        TurnNotFound,
        (status = 410, description = "`TURN_EXPIRED`: the turn has expired. `CHAT_HIDDEN`: the chat was hidden.", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: an entry and why (step 1), e.g. a host no person can approve as a whole: an IP literal, internal, a public suffix or a path-style multi-tenant host not opted in. `NOTHING_TO_APPROVE`: nothing named and nothing approvable refused this turn (step 3); the message names what was refused and why no approval fixes it.", body = schemas::ErrorBody),
    ))]
/// The handler. Identity and the "can a human answer" flag come from the turn, never from
/// the model-written body.
pub(crate) async fn request(
    _auth: ApprovalsAuth,
    State(state): State<AppState>,
    Path(turn_id): Path<String>,
    headers: HeaderMap,
    StrictJson(body): StrictJson<ApprovalRequestBody>,
) -> Result<Json<ToolAnswer>, ApiError> {
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
    let wanted = match merge::merge(&req, &refusals, settings) {
        Ok(w) => w,
        Err(Early::NothingToApprove(refused)) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "NOTHING_TO_APPROVE",
                text::nothing_to_approve(&refused),
            ));
        }
        Err(Early::NotApprovable(pairs)) => {
            return Ok(denied(
                DenyCode::NotApprovable,
                text::not_approvable(&pairs),
            ));
        }
    };

    // Step 5.
    let grants = Grants::load(&state.store, &turn, now).await?;
    let left = merge::drop_granted(wanted, &grants);
    if left.is_empty() {
        return Ok(Json(ToolAnswer::AlreadyApproved {
            message: text::ALREADY_APPROVED,
        }));
    }

    // Step 5b: a card of this turn that the person declined (or dismissed) is final for it.
    let current = state
        .store
        .chat_interrupt(&turn.user, &turn.chat, now)
        .await?;
    let declined = current.as_ref().filter(|p| {
        p.turn_id == turn.id
            && p.decision
                .as_ref()
                .is_some_and(|d| d.outcome != Outcome::Approved)
    });
    let left = match declined {
        Some(p) => {
            let (left, sites, packages) = merge::drop_declined(left, &p.card);
            if left.is_empty() {
                return Ok(denied(
                    DenyCode::DeclinedThisTurn,
                    text::declined_this_turn(&sites, &packages),
                ));
            }
            left
        }
        None => left,
    };

    // At most card-max-sites hosts: every named one, then the latest refused ones.
    let fitted = fit::fit(&left, settings.card_caps.sites);
    // At most card-max-packages packages: every named one, then those refused this turn.
    let packages = fit::fit_packages(&left, &req.packages, settings.card_caps.packages);
    let card = Card::new(
        fitted.sites.into_iter().collect(),
        left.urls.iter().map(|u| u.text.clone()).collect(),
        packages.into_iter().collect(),
        req.reason,
    )
    .with_sites_not_shown(fitted.not_shown);
    // What was named passed the caps in step 1 and the fit bounds the rest; checked again so
    // no card a person cannot read is ever stored.
    input::check_caps(
        &settings.card_caps,
        card.sites.len(),
        card.urls.len(),
        card.packages.len(),
    )?;

    // Step 6.
    let no_answer = if !turn.launch.can_ask_human {
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

    // Step 6b: the chat's card still waits for the person (a claimed card is left to its
    // holder, who may chain a new card in its place).
    if let Some(p) = current.filter(|p| p.effective_state(now) == InterruptState::Pending) {
        return Ok(Json(ToolAnswer::Pending {
            code: PendingCode::InterruptPending,
            interrupt_id: p.id,
            state: InterruptState::Pending,
            card: p.card,
            message: text::PENDING,
        }));
    }

    // Step 7, with what the sandbox really tried for the card's sites and packages.
    let rows = state.store.list_evidence(&turn.id).await?;
    let evidence = evidence::for_card(&card, &rows, &refusals, &left.urls);
    let card = card.with_evidence(evidence);
    let draft = state
        .store
        .create_draft(&turn, &card, req.tool_call_id.as_deref(), now)
        .await?;
    Ok(Json(ToolAnswer::Ask {
        draft_id: draft,
        card,
    }))
}
