//! A card goes stale before its first click, and the click then answers `410
//! INTERRUPT_EXPIRED` and grants nothing: a newer turn of the chat (seen at once or only at
//! resume), the user losing the right to approve, the card's own expiry. And an audit that
//! cannot be written leaves the card unclaimed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use axum::http::StatusCode;
use egressgate_store::{Timestamp, UserId};
use support::{TestApp, assert_error};

/// What made the card stale before its first click.
#[derive(Clone, Copy, Debug)]
enum Stale {
    /// The person typed again: a newer turn of the chat.
    NewerTurn,
    /// The chat moved on without the turn endpoint's own expiry (another process, a race).
    NewerTurnSeenOnlyAtResume,
    /// The administrator took away the user's right to approve.
    LostTheRightToApprove,
    /// The card's own expiry passed.
    PastItsExpiry,
}

async fn make_stale(app: &TestApp, how: Stale) {
    match how {
        Stale::NewerTurn => {
            app.open_turn("alice", "c1", true).await;
        }
        Stale::NewerTurnSeenOnlyAtResume => {
            app.exec_sql("UPDATE chats SET turn_seq = turn_seq + 1")
                .await;
        }
        Stale::LostTheRightToApprove => {
            let change = egressgate_store::db::admin::UserChange {
                can_approve: Some(false),
                mode: None,
                ..Default::default()
            };
            let alice = UserId::parse("alice").unwrap();
            let at = Timestamp::now();
            app.store
                .set_user(&alice, change, "admin", at)
                .await
                .unwrap();
        }
        Stale::PastItsExpiry => {
            app.exec_sql("UPDATE interrupts SET expires_at = 1").await;
        }
    }
}

#[tokio::test]
async fn a_stale_card_expires_at_its_first_click_and_grants_nothing() {
    for how in [
        Stale::NewerTurn,
        Stale::NewerTurnSeenOnlyAtResume,
        Stale::LostTheRightToApprove,
        Stale::PastItsExpiry,
    ] {
        let app = TestApp::new().await;
        let r = cards::files_card(&app, "alice", "c1").await;
        make_stale(&app, how).await;
        let (status, body) = cards::click(&app, &r).await;
        let case = format!("{how:?}");
        assert_error(
            status,
            &body,
            (StatusCode::GONE, "INTERRUPT_EXPIRED"),
            &case,
        );
        assert_eq!(
            app.count("SELECT COUNT(*) FROM approvals").await,
            0,
            "{case}"
        );
        assert_eq!(
            app.count("SELECT COUNT(*) FROM resume_slots").await,
            0,
            "{case}"
        );
        // A card past its expiry is expired by its time alone: nothing needs writing.
        if !matches!(how, Stale::PastItsExpiry) {
            let expired = "SELECT COUNT(*) FROM interrupts WHERE state = 'expired'";
            assert_eq!(app.count(expired).await, 1, "{case}");
        }
        let (_, outcome) = app
            .as_runtime()
            .get(&format!("/v1/interrupts/{}/outcome", r.id))
            .await;
        assert_eq!(outcome["state"], "expired", "{case}");
    }
}

#[tokio::test]
async fn an_audit_failure_leaves_the_card_unclaimed() {
    let app = TestApp::new().await;
    let r = cards::files_card(&app, "alice", "c1").await;
    cards::break_audit(&app).await;
    let (status, body) = cards::click(&app, &r).await;
    let failed = (StatusCode::SERVICE_UNAVAILABLE, "AUDIT_FAILED");
    assert_error(status, &body, failed, "an audit that cannot be written");
    let pending = "SELECT COUNT(*) FROM interrupts WHERE state = 'pending' AND claim_count = 0 AND decision IS NULL";
    assert_eq!(app.count(pending).await, 1);
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}
