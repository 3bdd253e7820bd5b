//! Finding the card through the real binary: `card_url` on a registered card only when the
//! operator set `--control-public-url`, and a person's inbox link — issued for one known user,
//! kept only as a hash, listing that user's pending cards and no one else's, opening their
//! cards (and no other user's) on the card page, following their events live, and refused
//! once expired. Runs on SQLite, and on PostgreSQL when `EGRESSGATE_TEST_POSTGRES_URL` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::person::{card, raw, setup};
use support::sse::Events;
use support::*;

const PUBLIC: &str = "https://gate.example.org/approve";

/// `POST /v1/users/{user}/inbox-link` with the runtime token (naming `named` when given).
async fn inbox_link(api: &Api, user: &str, named: Option<&str>) -> Resp {
    let path = format!("/v1/users/{user}/inbox-link");
    api.call("POST", &path, Some(RUNTIME), named, None).await
}

/// A link for `user`, checked: (the whole answer, the secret in its fragment).
async fn issued(api: &Api, user: &str) -> (Value, String) {
    let r = inbox_link(api, user, None).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let secret = v["url"].as_str().unwrap().split_once('#').unwrap().1;
    (v.clone(), secret.to_owned())
}

/// What the inbox page asks with `secret`: `POST /v1/inbox/cards`.
async fn inbox_cards(api: &Api, secret: &str) -> Resp {
    let body = json!({ "secret": secret }).to_string();
    raw(api, "POST", "/v1/inbox/cards", &[], &body).await
}

/// The card ids an inbox answer lists.
fn listed(r: &Resp) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["interrupts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["interrupt_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The card page's view of card `id` with `secret`.
async fn view(api: &Api, id: &str, secret: &str) -> Resp {
    let body = json!({ "secret": secret }).to_string();
    raw(
        api,
        "POST",
        &format!("/v1/interrupts/{id}/view"),
        &[],
        &body,
    )
    .await
}

/// A refused download in a new turn of (`user`, `chat`), turned into a registered card:
/// (interrupt id, resume secret, turn id).
async fn waiting_card(g: &Gate, o: &Origin, user: &str, chat: &str) -> (String, String, String) {
    let turn = g.turn(user, chat).await;
    assert_eq!(g.get(&turn, &o.url(FILES, "/data.csv")).await.status, 403);
    let (id, secret) = card(&g.api(), &turn, &[]).await;
    (id, secret, turn.id)
}

#[tokio::test]
async fn card_url_is_given_only_where_the_operator_said_people_reach_the_gate() {
    let (plain, o) = setup(&[]).await;
    let turn = plain.turn("alice", "c1").await;
    assert_eq!(plain.get(&turn, &o.url(FILES, "/x")).await.status, 403);
    let body = json!({"reason": "the analysis needs the data file"});
    let r = approval_request(&plain.api(), &turn, body.clone()).await;
    let r = register(&plain.api(), json!({"draft_id": r.json()["draft_id"]})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(r.json()["resume_secret"].is_string());
    assert!(
        r.json().get("card_url").is_none(),
        "no guessed link: {}",
        r.text()
    );
    let (public, o) = setup(&["--control-public-url", &format!("{PUBLIC}/")]).await;
    let turn = public.turn("alice", "c1").await;
    assert_eq!(public.get(&turn, &o.url(FILES, "/x")).await.status, 403);
    let r = approval_request(&public.api(), &turn, body).await;
    let r = register(&public.api(), json!({"draft_id": r.json()["draft_id"]})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let (id, secret) = (
        v["interrupt"]["id"].as_str().unwrap(),
        v["resume_secret"].as_str().unwrap(),
    );
    assert_eq!(
        v["card_url"],
        format!("{PUBLIC}/ui/cards/{id}#secret={secret}"),
        "the MCP tool's link shape, under the public URL"
    );
    // A reissued secret comes with its own link; the old one stops opening the card.
    let reissue = "/v1/chats/c1/interrupt/reissue";
    let r = public.api().as_user("POST", reissue, "alice").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let fresh = r.json()["resume_secret"].as_str().unwrap().to_owned();
    assert_eq!(
        r.json()["card_url"],
        format!("{PUBLIC}/ui/cards/{id}#secret={fresh}")
    );
    assert_eq!(view(&public.api(), id, secret).await.status, 404);
    assert_eq!(view(&public.api(), id, &fresh).await.status, 200);
}

#[tokio::test]
async fn an_inbox_link_opens_one_users_cards_and_is_kept_only_as_a_hash() {
    let (g, o) = setup(&["--control-public-url", PUBLIC]).await;
    let api = g.api();
    let (a1, _, _) = waiting_card(&g, &o, "alice", "c1").await;
    let (b1, _, _) = waiting_card(&g, &o, "bob", "c1").await;
    // The runtime asks; the clear errors first.
    let no_token = api
        .call("POST", "/v1/users/alice/inbox-link", None, None, None)
        .await;
    assert_eq!(no_token.status, 401);
    let malformed = inbox_link(&api, "%01", None).await;
    assert_eq!(malformed.status, 422, "{}", malformed.text());
    assert_eq!(malformed.json()["error"]["code"], "INVALID_INPUT");
    let unknown = inbox_link(&api, "nobody", None).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"]["code"], "USER_NOT_FOUND");
    let for_another = inbox_link(&api, "alice", Some("bob")).await;
    assert_eq!(for_another.status, 404);
    assert_eq!(
        for_another.body, unknown.body,
        "answered as an unknown user"
    );
    let (v, alice) = issued(&api, "alice").await;
    assert_field_starts(&v, "url", &format!("{PUBLIC}/ui/inbox#inb_"));
    let expires = egressgate_store::Timestamp::parse_rfc3339(v["expires_at"].as_str().unwrap());
    let left = expires.unwrap().millis() - egressgate_store::Timestamp::now().millis();
    assert!(
        (14 * 60_000..=15 * 60_000).contains(&left),
        "15 minutes: {left} ms"
    );
    assert!(alice.len() > 40, "at least 128 random bits: {alice}");
    // Alice's link lists her card only, and bob's lists his.
    assert_eq!(listed(&inbox_cards(&api, &alice).await), [a1.as_str()]);
    let r = inbox_cards(&api, &alice).await;
    assert_eq!(r.json()["user_id"], "alice");
    assert_eq!(r.json()["expires_at"], v["expires_at"]);
    assert!(!r.text().contains(&alice), "the secret is never echoed");
    let (_, bob) = issued(&api, "bob").await;
    assert_eq!(listed(&inbox_cards(&api, &bob).await), [b1.as_str()]);
    // On the card page, alice's link opens her card, not bob's (the card secret's answer).
    assert_eq!(view(&api, &a1, &alice).await.status, 200);
    let theirs = view(&api, &b1, &alice).await;
    assert_eq!(theirs.status, 404);
    assert_eq!(theirs.json()["error"]["code"], "INTERRUPT_NOT_FOUND");
    // Wrong secrets, an unknown id, a card secret: not an inbox link.
    let (id, key) = alice.split_once('.').unwrap();
    for bad in [
        format!("{id}.{}", "A".repeat(key.len())),
        format!("inb_{}.{key}", "B".repeat(22)),
        id.to_owned(),
        "not a link".to_owned(),
    ] {
        let r = inbox_cards(&api, &bad).await;
        assert_eq!(r.status, 401, "{bad}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "UNAUTHORIZED");
        assert!(!r.text().contains("alice"));
    }
    // Answering through the link claims the card like its own secret does.
    let page = support::person::page_resume(&api, &a1, &alice, true).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.json()["state"], "claimed");
    assert!(listed(&inbox_cards(&api, &alice).await).is_empty());
    // At rest: the row holds the user and the key's SHA-256, never the secret.
    let rows = link_rows(&g).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let hash = egressgate_store::Secret::from_presented(key).hash();
    let row = rows.iter().find(|r| r.0 == id).unwrap();
    assert_eq!((row.1.as_str(), row.2.as_str()), ("alice", hash.as_str()));
    for r in &rows {
        for secret in [&alice, &bob] {
            let key = secret.split_once('.').unwrap().1;
            assert!(
                !format!("{r:?}").contains(key),
                "secret stored in clear: {r:?}"
            );
        }
    }
}

/// Every inbox link row: (link id, user, secret hash, and every other column as text).
async fn link_rows(g: &Gate) -> Vec<(String, String, String, String)> {
    use sqlx::Row as _;
    sqlx::any::install_default_drivers();
    let url = postgres_database_for(g.data_dir.path()).unwrap_or_else(|| {
        format!(
            "sqlite://{}",
            g.data_dir.path().join("data/egressgate.db").display()
        )
    });
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let rows = sqlx::query(
        "SELECT link_id, user_id, secret_hash, created_at, expires_at, purge_at FROM inbox_links",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    rows.iter()
        .map(|r| {
            let times: Vec<i64> = (3..6).map(|i| r.get::<i64, _>(i)).collect();
            (r.get(0), r.get(1), r.get(2), format!("{times:?}"))
        })
        .collect()
}

#[tokio::test]
async fn the_inbox_follows_its_users_events_and_an_expired_link_opens_nothing() {
    let (g, o) = setup(&["--inbox-link-ttl", "5s"]).await;
    let api = g.api();
    g.turn("alice", "c0").await;
    let (v, alice) = issued(&api, "alice").await;
    // Without a public URL the link is the path alone.
    assert_field_starts(&v, "url", "/ui/inbox#inb_");
    let mut ev = Events::inbox(&api, &alice).await;
    // Bob's card is not alice's event; her own new card in another chat is.
    let (_, _, bob_turn) = waiting_card(&g, &o, "bob", "c1").await;
    let (a2, secret, turn) = waiting_card(&g, &o, "alice", "c2").await;
    let (_, kind, data) = loop {
        let (_, kind, data) = ev.next().await;
        if kind != "refusal.recorded" {
            break ((), kind, data);
        }
        assert_eq!(
            data["turn_id"],
            turn.as_str(),
            "only alice's refusal, not {bob_turn}"
        );
    };
    assert_eq!(kind, "approval.requested");
    assert_eq!(data["interrupt_id"], a2.as_str());
    let r = support::flow::click_approve(&api, &a2, &secret).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (_, kind, data) = ev.next().await;
    assert_eq!(
        (kind.as_str(), &data["interrupt_id"]),
        ("approval.resolved", &json!(a2))
    );
    // The link expires (5 s): the stream ends by itself and every call is refused.
    let (a3, _, _) = waiting_card(&g, &o, "alice", "c3").await;
    let until = egressgate_store::Timestamp::parse_rfc3339(v["expires_at"].as_str().unwrap());
    let wait = until.unwrap().millis() - egressgate_store::Timestamp::now().millis() + 100;
    tokio::time::sleep(std::time::Duration::from_millis(
        u64::try_from(wait).unwrap_or(0),
    ))
    .await;
    let r = inbox_cards(&api, &alice).await;
    assert_eq!(r.status, 410, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INBOX_LINK_EXPIRED");
    assert!(!r.text().contains("c3"), "{}", r.text());
    let gone = view(&api, &a3, &alice).await;
    assert_eq!(
        gone.status,
        404,
        "an expired link opens no card: {}",
        gone.text()
    );
    let body = json!({ "secret": alice }).to_string();
    let again = raw(&api, "POST", "/v1/inbox/events", &[], &body).await;
    assert_eq!(again.status, 410);
    ev.closes_within(5).await;
}
