//! What a runtime's token reaches: a chat, card or approval of another user is answered
//! exactly as one that does not exist, on every chat- and user-scoped endpoint (the chat's
//! event stream included); an `/mcp` session serves the turn it was opened for and no other.
//! On both stores (`EGRESSGATE_TEST_POSTGRES_URL` runs the gate on PostgreSQL).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::sse::Events;
use support::*;

const FILES: &str = "files.example.com";

/// `(status, body)` of a call (bounded in time), for comparing another user's answer with a stranger's.
async fn answer(
    api: &Api,
    method: &str,
    path: &str,
    user: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    // An answer that never completes (an event stream held open) is a failure, not a hang.
    let call = api.call(method, path, Some(RUNTIME), user, body);
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no complete answer (an open stream?)"));
    (r.status, r.text())
}

/// Asserts that `bob`'s answer about alice's thing is exactly the answer about a thing that
/// does not exist (`unknown`), and not the owner's.
fn same_as_unknown(what: &str, bob: &(u16, String), unknown: &(u16, String)) {
    assert_eq!(
        bob, unknown,
        "{what}: another user's is not answered as unknown"
    );
}

#[tokio::test]
async fn another_users_chat_card_or_approval_is_answered_as_unknown() {
    let g = gate().start();
    let api = g.api();
    // Alice's chat c1: an approved card (an approval row, a claimed open request); her chat
    // c2: a pending card.
    let turn = api.turn("alice", "c1", &[]).await;
    let (claimed, claimed_secret) = ask(&api, &turn, &[&format!("https://{FILES}/a.csv")]).await;
    approve_card(&api, &claimed, &claimed_secret).await;
    let turn2 = api.turn("alice", "c2", &[]).await;
    let (pending, pending_secret) = ask(&api, &turn2, &["https://b.example.com/b.csv"]).await;

    // The event stream: the owner's is a stream; another user's chat of the same id and a
    // chat nobody opened are one identical 404.
    let _owner = Events::open(&api, "c1", "alice", None).await;
    let bob = answer(&api, "GET", "/v1/chats/c1/events", Some("bob"), None).await;
    let unknown = answer(&api, "GET", "/v1/chats/nochat/events", Some("alice"), None).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    assert!(bob.1.contains("CHAT_NOT_FOUND"), "{}", bob.1);
    same_as_unknown("events", &bob, &unknown);

    // The chat's approvals: the owner's lists the approval; the others list nothing alike.
    let owner = api.chat_approvals("alice", "c1").await;
    assert_eq!(owner["approvals"][0]["value"], FILES, "{owner}");
    let bob = answer(&api, "GET", "/v1/chats/c1/approvals", Some("bob"), None).await;
    let unknown = answer(
        &api,
        "GET",
        "/v1/chats/nochat/approvals",
        Some("alice"),
        None,
    )
    .await;
    assert_eq!(bob.0, 200);
    same_as_unknown("approvals", &bob, &unknown);

    // Revoking, reissuing and hiding another user's chat change nothing and say "no such".
    let path = |chat: &str| format!("/v1/chats/{chat}/approvals/site/{FILES}");
    let bob = answer(&api, "DELETE", &path("c1"), Some("bob"), None).await;
    let unknown = answer(&api, "DELETE", &path("nochat"), Some("alice"), None).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("revoke", &bob, &unknown);
    let path = |chat: &str| format!("/v1/chats/{chat}/interrupt/reissue");
    let bob = answer(&api, "POST", &path("c1"), Some("bob"), Some("")).await;
    let unknown = answer(&api, "POST", &path("nochat"), Some("alice"), Some("")).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("reissue", &bob, &unknown);
    let bob = answer(&api, "DELETE", "/v1/chats/c1", Some("bob"), None).await;
    let unknown = answer(&api, "DELETE", "/v1/chats/nochat", Some("alice"), None).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("hide", &bob, &unknown);
    let still = api.chat_approvals("alice", "c1").await;
    assert_eq!(still["approvals"][0]["value"], FILES, "{still}");

    // A user's pending cards: naming bob while asking for alice's lists nothing, as for a
    // user without cards.
    let list = |who: &str| format!("/v1/users/{who}/interrupts?state=pending");
    let owner = answer(&api, "GET", &list("alice"), Some("alice"), None).await;
    assert!(owner.1.contains(&pending), "{}", owner.1);
    let bob = answer(&api, "GET", &list("alice"), Some("bob"), None).await;
    assert_eq!(bob.0, 200, "{}", bob.1);
    assert!(
        !bob.1.contains(&pending),
        "bob read alice's cards: {}",
        bob.1
    );
    let unknown = answer(&api, "GET", &list("nobody"), Some("nobody"), None).await;
    assert_eq!(
        bob.1.replace("\"alice\"", "\"nobody\""),
        unknown.1,
        "another user's list is not the empty list"
    );

    // Cards by id: outcome, view (even with the right secret), takeover.
    let unknown_id = "int_AAAAAAAAAAAAAAAAAAAAAA";
    let outcome = |id: &str| format!("/v1/interrupts/{id}/outcome");
    let bob = answer(&api, "GET", &outcome(&pending), Some("bob"), None).await;
    let unknown = answer(&api, "GET", &outcome(unknown_id), Some("bob"), None).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("outcome", &bob, &unknown);
    let view = |id: &str| format!("/v1/interrupts/{id}/view");
    let secret = json!({"secret": pending_secret}).to_string();
    let bob = answer(&api, "POST", &view(&pending), Some("bob"), Some(&secret)).await;
    let unknown = answer(&api, "POST", &view(unknown_id), Some("bob"), Some(&secret)).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("view", &bob, &unknown);
    let takeover = |id: &str| format!("/v1/interrupts/{id}/takeover");
    let bob = answer(&api, "POST", &takeover(&claimed), Some("bob"), Some("")).await;
    let unknown = answer(&api, "POST", &takeover(unknown_id), Some("bob"), Some("")).await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("takeover", &bob, &unknown);

    // A turn named with another user is no turn.
    let refusals = |id: &str| format!("/v1/turns/{id}/refusals");
    let bob = answer(&api, "GET", &refusals(&turn.id), Some("bob"), None).await;
    let unknown = answer(
        &api,
        "GET",
        &refusals("t_AAAAAAAAAAAAAAAAAAAAAA"),
        Some("bob"),
        None,
    )
    .await;
    assert_eq!(bob.0, 404, "{}", bob.1);
    same_as_unknown("refusals", &bob, &unknown);
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// One POST to `/mcp` with the runtime token, `turn` and (after the handshake) the session;
/// returns the response head and everything of the body up to the JSON-RPC answer.
async fn mcp(api: &Api, turn: &str, session: Option<&str>, body: &str) -> (Resp, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nauthorization: Bearer {RUNTIME}\r\n\
         x-egressgate-turn: {turn}\r\n",
        api.addr
    );
    if let Some(s) = session {
        req.push_str(&format!(
            "mcp-session-id: {s}\r\nmcp-protocol-version: 2025-11-25\r\n"
        ));
    }
    req.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    let mut s = tokio::net::TcpStream::connect(api.addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // The answer is one server-sent event; the stream may stay open after it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let (status, headers) = parse_head(head.as_bytes());
            let done = status != 200 || rest.contains("\"jsonrpc\"") && rest.contains("}\n");
            if done {
                let resp = Resp {
                    status,
                    headers,
                    body: rest.as_bytes().to_vec(),
                };
                return (resp, rest.to_owned());
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let n = tokio::time::timeout(left, s.read(&mut chunk))
            .await
            .expect("no MCP answer in time")
            .unwrap();
        assert!(n > 0, "closed before an answer: {text}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// An `/mcp` session opened for one turn serves that turn only: a later request of the same
/// session that names another turn in `X-Egressgate-Turn` is refused, and does not read the
/// other turn's refusals.
#[tokio::test]
async fn an_mcp_session_serves_the_turn_it_was_opened_for() {
    let g = gate().start();
    let api = g.api();
    let a = api.turn("alice", "c1", &[]).await;
    let b = api.turn("bob", "c9", &[]).await;
    // Turn B was refused a host: what B's refusals tool would show.
    let r = proxy_get(g.proxy(), &b, "http://secret-b.example.com/x").await;
    assert_eq!(r.status, 403, "{}", r.text());

    let (r, _) = mcp(&api, &a.id, None, INIT).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (r, _) = mcp(&api, &a.id, Some(&session), initialized).await;
    assert_eq!(r.status, 202, "{}", r.text());

    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"egress_refusals","arguments":{}}}"#;
    let (r, text) = mcp(&api, &b.id, Some(&session), call).await;
    assert_eq!(r.status, 200, "{text}");
    assert!(
        !text.contains("secret-b.example.com"),
        "a session of turn A served turn B: {text}"
    );
    assert!(text.contains("\"error\""), "{text}");
    assert!(text.contains("turn_mismatch"), "{text}");
    assert!(text.contains(&a.id) && text.contains(&b.id), "{text}");

    // The turn it was opened for is still served, and a new session serves turn B.
    let (_, text) = mcp(&api, &a.id, Some(&session), call).await;
    assert!(text.contains("\"result\""), "{text}");
    assert!(!text.contains("secret-b.example.com"), "{text}");
    let (r, _) = mcp(&api, &b.id, None, INIT).await;
    let other = r.header("mcp-session-id").expect("a session id").to_owned();
    mcp(&api, &b.id, Some(&other), initialized).await;
    let (_, text) = mcp(&api, &b.id, Some(&other), call).await;
    assert!(text.contains("secret-b.example.com"), "{text}");
}
