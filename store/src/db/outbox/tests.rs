//! The outbox on both stores: events become one delivery per wanting endpoint, once; a
//! taken delivery is not taken again until its lease ends; attempts are recorded.

use super::*;
use crate::db::testing::{append_event, fresh};
use crate::db::webhooks::{DeliveryStatus, NewEndpoint};
use crate::ids::WebhookId;

async fn event(store: &Store, kind: EventKind, now: Timestamp) {
    let data = serde_json::json!({"interrupt_id": "int_x", "chat_id": "c1"});
    append_event(store, ("alice", "c1"), kind, &data, now).await;
}

async fn endpoint(store: &Store, events: &[String]) -> WebhookId {
    let id = WebhookId::generate();
    let new = NewEndpoint {
        id: &id,
        url: "https://hooks.example.com/in",
        events,
        description: None,
        secret_sealed: "sealed",
        include_link: false,
    };
    store
        .add_webhook(new, "admin", Timestamp::now())
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
    id
}

fn body(e: &OutboxEvent) -> Fanned {
    Fanned {
        webhook: (e.kind != "refusal.recorded").then(|| serde_json::json!({"type": e.kind})),
        messages: Vec::new(),
    }
}

#[tokio::test]
async fn events_fan_out_once_per_wanting_endpoint_and_attempts_are_recorded() {
    let db = fresh().await;
    let s = &db.store;
    let now = Timestamp::now();
    event(s, EventKind::ApprovalRequested, now).await; // before any endpoint: nobody's
    let all = endpoint(s, &[]).await;
    let only = endpoint(s, &["approval.revoked".to_owned()]).await;
    event(s, EventKind::ApprovalRequested, now).await;
    event(s, EventKind::RefusalRecorded, now).await;
    event(s, EventKind::ApprovalRevoked, now).await;
    assert_eq!(s.outbox_fan_out(100, now, &body).await.ok(), Some(3));
    assert_eq!(s.outbox_fan_out(100, now, &body).await.ok(), Some(0));
    assert_eq!(s.outbox_pending(Queue::Webhooks).await.ok(), Some(3));

    let lease = now.plus(std::time::Duration::from_secs(30));
    let taken = s.outbox_take_due(10, now, lease).await.unwrap_or_default();
    assert_eq!(taken.len(), 3);
    assert!(
        s.outbox_take_due(10, now, lease)
            .await
            .unwrap_or_default()
            .is_empty(),
        "a taken delivery waits for its lease"
    );
    let first = &taken[0];
    let retry_at = Some(now);
    let failed = Attempt::Failed {
        status: Some(503),
        error: "HTTP 503".into(),
        retry_at,
    };
    s.outbox_record(Queue::Webhooks, &first.id, &failed, now)
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
    let again = s.outbox_take_due(10, now, lease).await.unwrap_or_default();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].id.clone(), again[0].attempts),
        (first.id.clone(), 1)
    );
    s.outbox_record(
        Queue::Webhooks,
        &first.id,
        &Attempt::Delivered {
            status: 204,
            reference: None,
        },
        now,
    )
    .await
    .unwrap_or_else(|e| unreachable!("{e}"));
    let last = Attempt::Failed {
        status: None,
        error: "timed out".into(),
        retry_at: None,
    };
    s.outbox_record(Queue::Webhooks, &taken[1].id, &last, now)
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));

    let mine = s
        .webhook_deliveries(&first.endpoint, 10)
        .await
        .unwrap_or_default();
    let d = mine
        .iter()
        .find(|d| d.id == first.id)
        .unwrap_or_else(|| unreachable!());
    assert_eq!(
        (d.status, d.attempts, d.last_status),
        (DeliveryStatus::Delivered, 2, Some(204))
    );
    let types: Vec<_> = s.webhook_deliveries(&only, 10).await.unwrap_or_default();
    assert_eq!(types.len(), 1);
    assert_eq!(types[0].event_type, "approval.revoked");
    assert_eq!(
        s.webhook_deliveries(&all, 10)
            .await
            .unwrap_or_default()
            .len(),
        2
    );

    // A failed delivery retried by hand is due again, with fresh attempts.
    assert_eq!(
        s.retry_delivery(&taken[1].endpoint, &taken[1].id, now)
            .await
            .ok(),
        Some(true)
    );
    assert_eq!(
        s.retry_delivery(&first.endpoint, &first.id, now).await.ok(),
        Some(false)
    );
    // The retried one and the third, still taken (its attempt never recorded).
    assert_eq!(s.outbox_pending(Queue::Webhooks).await.ok(), Some(2));
    assert_eq!(s.remove_webhook(&all, "admin", now).await.ok(), Some(true));
    assert_eq!(s.remove_webhook(&all, "admin", now).await.ok(), Some(false));
    assert!(
        s.webhook_deliveries(&all, 10)
            .await
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn an_unanswered_card_is_announced_expired_once() {
    let db = fresh().await;
    let s = &db.store;
    let now = Timestamp::now();
    for (chat, id, expires, state) in [
        ("c1", "int_a", now.millis() - 1000, "pending"),
        ("c2", "int_b", now.millis() + 60_000, "pending"),
        ("c3", "int_c", now.millis() + 60_000, "expired"),
    ] {
        sqlx::query(
            "INSERT INTO interrupts (user_id, chat_id, interrupt_id, secret_hash, turn_id, \
             turn_seq, card, state, created_at, expires_at, purge_at) \
             VALUES ('u1', $1, $2, 'h', 't', 1, '{}', $3, 0, $4, $5)",
        )
        .bind(chat)
        .bind(id)
        .bind(state)
        .bind(expires)
        .bind(now.millis() + 3_600_000)
        .execute(s.pool())
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
    }
    assert_eq!(s.announce_expiries(10, now).await.ok(), Some(2));
    assert_eq!(s.announce_expiries(10, now).await.ok(), Some(0));
    let rows = sqlx::query("SELECT data FROM events WHERE kind = 'approval.expired' ORDER BY id")
        .fetch_all(s.pool())
        .await
        .unwrap_or_default();
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r.try_get::<String, _>(0).unwrap_or_default())
        .collect();
    assert!(ids.iter().any(|d| d.contains("int_a")) && ids.iter().any(|d| d.contains("int_c")));
    let chat = crate::db::events::Follow::Chat(
        crate::UserId::from_db("u1".into()),
        crate::ChatId::from_db("c1".into()),
    );
    assert!(
        s.events_after(&chat, 0, 10)
            .await
            .unwrap_or_default()
            .is_empty(),
        "not part of the chat's stream"
    );
}

/// A builder that messages the user on Slack when a contact is set (as the Slack channel does).
fn slack_message(e: &OutboxEvent) -> Fanned {
    let messages = e
        .contacts
        .slack_user_id
        .iter()
        .map(|id| ChannelMessage {
            channel: Channel::Slack,
            recipient: id.clone(),
            payload: serde_json::json!({"type": e.kind}),
        })
        .collect();
    Fanned {
        webhook: None,
        messages,
    }
}

#[tokio::test]
async fn channel_messages_share_the_cursor_and_the_bookkeeping() {
    let db = fresh().await;
    let s = &db.store;
    let now = Timestamp::now();
    let alice = crate::UserId::from_db("alice".into());
    event(s, EventKind::ApprovalRequested, now).await; // alice has no contact yet
    assert_eq!(
        s.outbox_fan_out(100, now, &slack_message).await.ok(),
        Some(0)
    );
    let change = crate::db::admin::UserChange {
        contacts: crate::db::contacts::ContactChange {
            slack_user_id: Some(Some("U1ALICE".into())),
            email: None,
        },
        ..Default::default()
    };
    s.set_user(&alice, change, "admin", now)
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
    event(s, EventKind::ApprovalRequested, now).await;
    assert_eq!(
        s.outbox_fan_out(100, now, &slack_message).await.ok(),
        Some(1)
    );
    assert_eq!(
        s.outbox_fan_out(100, now, &slack_message).await.ok(),
        Some(0)
    );
    let slack = Queue::Channel(Channel::Slack);
    assert_eq!(s.outbox_pending(slack).await.ok(), Some(1));
    assert_eq!(
        s.outbox_pending(Queue::Channel(Channel::Email)).await.ok(),
        Some(0)
    );
    let lease = now.plus(std::time::Duration::from_secs(30));
    let none = s.channel_take_due(Channel::Email, 10, now, lease).await;
    assert!(none.unwrap_or_default().is_empty(), "another channel's row");
    let taken = s
        .channel_take_due(Channel::Slack, 10, now, lease)
        .await
        .unwrap_or_default();
    assert_eq!(taken.len(), 1);
    let m = &taken[0];
    assert_eq!(
        (m.recipient.as_str(), m.user.as_str(), m.attempts),
        ("U1ALICE", "alice", 0)
    );
    assert_eq!(m.interrupt_id.as_deref(), Some("int_x"));
    let again = s.channel_take_due(Channel::Slack, 10, now, lease).await;
    assert!(again.unwrap_or_default().is_empty(), "leased");
    let delivered = Attempt::Delivered {
        status: 200,
        reference: Some("1700000000.000100".into()),
    };
    s.outbox_record(slack, &m.id, &delivered, now)
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(s.outbox_pending(slack).await.ok(), Some(0));
    let row = sqlx::query("SELECT status, reference FROM channel_deliveries WHERE id = $1")
        .bind(m.id.as_str())
        .fetch_one(s.pool())
        .await
        .unwrap_or_else(|e| unreachable!("{e}"));
    let got: (String, Option<String>) = (
        row.try_get(0).unwrap_or_default(),
        row.try_get(1).unwrap_or_default(),
    );
    assert_eq!(got, ("delivered".into(), Some("1700000000.000100".into())));
}
