//! The card as evidence, on the real binary (and on PostgreSQL when CI names a server): a
//! script POSTs to one host's `/upload` path and GETs another, the agent asks naming a third
//! URL the script never tried, and every place a card is returned (the approval tool's answer,
//! the registered interrupt, the card page's view, the user's pending cards) shows what the
//! proxy really refused: counts, methods, times, the upload flagged, and the third URL marked
//! `tried: false`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::*;

const UPLOAD: &str = "other.example.net";
const FILES: &str = "files.example.com";

/// `POST url` through the proxy (absolute form) with a body and the turn's credential.
async fn proxy_post(g: &Gate, turn: &Turn, url: &str, body: &str) -> Resp {
    let u = url::Url::parse(url).unwrap();
    let host = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap());
    proxy_raw(
        g.proxy(),
        &format!(
            "POST {url} HTTP/1.1\r\nhost: {host}\r\nproxy-authorization: {}\r\n\
             content-type: text/csv\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            turn.auth_header(),
            body.len()
        ),
    )
    .await
}

/// An evidence entry with its times checked (RFC 3339, first ≤ last) and then blanked, so
/// the rest compares exactly.
fn without_times(mut e: Value) -> Value {
    let (first, last) = (e["first_at"].take(), e["last_at"].take());
    match (first.as_str(), last.as_str()) {
        (Some(f), Some(l)) => assert!(f.ends_with('Z') && f <= l, "{f} {l}"),
        _ => assert_eq!((first, last), (Value::Null, Value::Null)),
    }
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_shows_what_the_script_tried_its_upload_and_what_it_never_tried() {
    let o = origin().await;
    let port = o.addr.port();
    let p = port.to_string();
    let g = gate()
        .resolve(UPLOAD, "127.0.0.1")
        .resolve(FILES, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &p])
        .start();
    let api = g.api();
    let turn = api.turn("alice", "c1", &[]).await;

    // The script: two uploads (the query is never kept) and one download, all refused.
    let upload = format!("http://{UPLOAD}:{port}/upload/all-the-data");
    let get = format!("http://{FILES}:{port}/data.csv");
    for _ in 0..2 {
        let r = proxy_post(
            &g,
            &turn,
            &format!("{upload}?token=SECRET"),
            "name,salary\n",
        )
        .await;
        assert_eq!(r.status, 403, "{}", r.text());
    }
    assert_eq!(proxy_get(g.proxy(), &turn, &get).await.status, 403);
    assert!(o.requests().is_empty(), "nothing reached the origin");

    // The agent tells its own story and names a URL nothing tried.
    let never = "https://holidays.example.org/calendar.ics";
    let why = "I need to download the public holiday calendar";
    let r = approval_request(&api, &turn, json!({"reason": why, "urls": [never]})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let asked = r.json();
    assert_eq!(asked["outcome"], "ask");
    let card = asked["card"].clone();
    assert_eq!(
        card["sites"],
        json!([FILES, "holidays.example.org", UPLOAD]),
        "{card}"
    );
    let evidence: Vec<Value> = card["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .cloned()
        .map(without_times)
        .collect();
    let n = Value::Null;
    assert_eq!(
        evidence,
        [
            json!({"host": FILES, "port": port, "method": "GET", "url": get, "package": n,
                   "reason": "not_approved", "count": 1, "first_at": n, "last_at": n}),
            json!({"host": UPLOAD, "port": port, "method": "POST", "url": upload, "package": n,
                   "reason": "not_approved", "count": 2, "first_at": n, "last_at": n,
                   "upload": true}),
            json!({"host": "holidays.example.org", "port": 443, "method": n, "url": never,
                   "package": n, "reason": n, "count": 0, "first_at": n, "last_at": n,
                   "tried": false}),
        ]
    );
    assert!(!card.to_string().contains("SECRET"), "no query is kept");
    assert!(
        card["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e.get("command").is_none()),
        "no command until the sandbox reports one"
    );

    // Registered: the interrupt's message says it in words, and the card is the same one.
    let r = api
        .post(
            "/v1/interrupts",
            RUNTIME,
            json!({"draft_id": asked["draft_id"], "snapshot": "cGF1c2Vk"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let reg = r.json();
    assert_eq!(reg["card"], card);
    let message = reg["interrupt"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(&format!("The script tried to send data to {UPLOAD}.")),
        "{message}"
    );
    let id = reg["interrupt"]["id"].as_str().unwrap();
    let secret = reg["resume_secret"].as_str().unwrap();

    // What the card page reads, and the user's pending cards: the same evidence.
    let view = json!({ "secret": secret }).to_string();
    let r = api
        .call(
            "POST",
            &format!("/v1/interrupts/{id}/view"),
            None,
            None,
            Some(&view),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["card"], card);
    let pending = "/v1/users/alice/interrupts?state=pending";
    let r = api.as_user("GET", pending, "alice").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["interrupts"][0]["card"], card);
    let r = api
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await;
    assert_eq!(r.json()["card"], card);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_approve_says_why_when_only_unfixable_refusals_were_recorded() {
    let g = gate().start();
    let api = g.api();
    let turn = api.turn("bob", "c1", &[]).await;
    assert_eq!(
        proxy_get(g.proxy(), &turn, "http://10.1.2.3/data.csv")
            .await
            .status,
        403
    );
    let r = approval_request(&api, &turn, json!({"reason": "needs the data"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let b = r.json();
    assert_eq!(b["error"]["code"], "NOTHING_TO_APPROVE");
    assert_eq!(
        b["error"]["message"],
        "everything refused this turn is refused for a reason no approval can fix: 10.1.2.3 \
         (ip_literal). Running the step again will be refused again; name the URLs or packages \
         you need if they are others. Do not try to get around the proxy. Continue without \
         that data and say so."
    );
}
