//! The person's side shared by `tests/person_side*.rs`: a gate whose look-alike names resolve
//! to the loopback origin, a registered card from the approval tool, and a request with any
//! headers (cookies, Origin, CSRF) to the control listener.

use serde_json::json;

use super::*;

/// A gate that may reach the origin under [`FILES`] and a few names the dry run compares
/// (`a.example.com`, `example.com`, `badexample.com`), with `extra` flags.
pub async fn setup(extra: &[&str]) -> (Gate, Origin) {
    let names = [FILES, "a.example.com", "example.com", "badexample.com"];
    reachable_with(&names, extra).await
}

/// [`setup`] with no extra flags and a turn open for (`user`, `chat`): where most of the
/// person's rows start (a chat exists from its first turn).
pub async fn with_turn(user: &str, chat: &str) -> (Gate, Origin, Turn) {
    let (g, o) = setup(&[]).await;
    let turn = g.turn(user, chat).await;
    (g, o, turn)
}

/// The approval tool asked for `packages` (and what the turn was refused), registered:
/// (interrupt id, resume secret).
pub async fn card(api: &Api, turn: &Turn, packages: &[&str]) -> (String, String) {
    let body = json!({"reason": "the analysis needs the data file", "packages": packages});
    let (_, id, secret) = ask_with(api, turn, body).await;
    (id, secret)
}

/// A card asked for after `url` was refused: asserts the `403`, then registers the card for
/// `packages` (and what the turn was refused): (interrupt id, resume secret).
pub async fn refused_card(g: &Gate, turn: &Turn, url: &str, packages: &[&str]) -> (String, String) {
    assert_eq!(
        g.get(turn, url).await.status,
        403,
        "{url} must be refused first"
    );
    card(&g.api(), turn, packages).await
}

/// The headers of a runtime call on behalf of `user` (the runtime token and the user), then
/// `extra`.
pub fn runtime_as<'a>(user: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("authorization", "Bearer test-runtime-token-0123456789"),
        ("x-egressgate-user", user),
    ];
    h.extend_from_slice(extra);
    h
}

/// Any request with any headers, read to the end.
pub async fn raw(
    api: &Api,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Resp {
    let typed = !body.is_empty() || method != "GET";
    let req = request_text(api.addr, (method, path), headers, (body, typed));
    send_raw(api.addr, &req).await
}

/// `POST /ui/admin/session` with `token` (and `headers`): the console's sign-in, unchecked.
pub async fn sign_in(api: &Api, token: &str, headers: &[(&str, &str)]) -> Resp {
    let body = json!({ "token": token }).to_string();
    raw(api, "POST", "/ui/admin/session", headers, &body).await
}

/// The card page's click: card `id` resumed with its secret only (no runtime token), the
/// person deciding `approved`; unchecked.
pub async fn page_resume(api: &Api, id: &str, secret: &str, approved: bool) -> Resp {
    let path = format!("/v1/interrupts/{id}/resume");
    let body = resume_body(id, secret, "resolved", json!({ "approved": approved }));
    raw(api, "POST", &path, &[], &body).await
}
