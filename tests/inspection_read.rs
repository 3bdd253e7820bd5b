//! The `read` access level end to end, on inspected hosts: downloads pass and uploads are
//! refused as `method_not_allowed` (recorded before the 403, inside the client's own TLS
//! session, and in plain forwarding too); `read` needs inspection (422 otherwise, for admin
//! sites, launch sites and a person's decision); approving a `method_not_allowed` refusal
//! grants full access; a person may narrow a card to `read`, never widen it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::inspect::*;
use support::*;

#[tokio::test]
async fn read_allows_downloads_and_refuses_uploads_with_a_recorded_403_inside_tls() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let r = add_site(
        &api,
        json!({"pattern": HOST, "inspect": true, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["access"], "read");
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    // (HEAD is in the unit tests: this raw client would wait for a body.)
    for m in ["GET", "OPTIONS"] {
        let r = s.request(&turn, client.clone(), (m, "/data.csv", "")).await;
        assert_eq!(r.status, 200, "{m}: {}", r.text());
    }
    let before = s.origin.requests().len();
    for m in ["POST", "PUT", "DELETE"] {
        let r = s
            .request(&turn, client.clone(), (m, "/up?token=secret", "x"))
            .await;
        assert_eq!(r.status, 403, "{m}: {}", r.text());
        assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
        assert_eq!(r.header("x-egress-approvable"), Some("true"));
        assert!(r.text().contains("approval tool"), "{}", r.text());
        // Recorded before the 403 was sent: the record shows it right away.
        let rec = api.refusals(&turn).await;
        let row = rec["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["reason"] == "method_not_allowed")
            .cloned()
            .unwrap_or_else(|| panic!("no refusal row after {m}: {rec}"));
        assert_eq!(row["method"], m);
        assert_eq!(row["approvable"], true);
        let port = s.origin.port();
        assert_eq!(
            row["url"],
            format!("https://{HOST}:{port}/up"),
            "sanitised: no query"
        );
    }
    assert_eq!(
        s.origin.requests().len(),
        before,
        "no refused request reached the origin"
    );
}

#[tokio::test]
async fn read_without_inspection_is_refused_with_a_clear_422_and_nothing_is_stored() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let r = add_site(&api, json!({"pattern": HOST, "access": "read"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INVALID_INPUT");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("inspect"), "{msg}");
    let r = add_site(&api, json!({"pattern": HOST, "access": "write"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let r = add_site(&api, json!({"pattern": HOST, "inspect": "yes"})).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let list = api.get("/v1/admin/sites", ADMIN).await.json();
    assert_eq!(list["sites"], json!([]), "nothing was written");
}

#[tokio::test]
async fn read_is_enforced_per_request_in_plain_http_forwarding_too() {
    let plain = origin().await;
    let gate = gate()
        .resolve(HOST, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--inspect", HOST])
        .args(&["--allow-port", &plain.port().to_string()])
        .start();
    let api = gate.api();
    // Covered by --inspect, so `read` is accepted without `inspect: true`.
    let r = add_site(&api, json!({"pattern": HOST, "access": "read"})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let turn = api.turn("u", "c", &[]).await;
    let url = plain.url(HOST, "/data");
    assert_eq!(proxy_get(gate.proxy(), &turn, &url).await.status, 200);
    let raw = format!(
        "POST {url} HTTP/1.1\r\nhost: {HOST}:{}\r\nproxy-authorization: {}\r\ncontent-length: 1\r\nconnection: close\r\n\r\nx",
        plain.port(),
        turn.auth_header()
    );
    let r = proxy_raw(gate.proxy(), &raw).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
    assert_eq!(plain.requests().len(), 1, "only the GET reached the origin");
}

#[tokio::test]
async fn approving_a_method_not_allowed_refusal_grants_full_access() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let turn = s.inspected_turn("read").await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    let r = s.request(&turn, client.clone(), ("PUT", "/f", "x")).await;
    assert_eq!(r.status, 403);
    // The agent asks without naming anything: the refused host is merged into the card.
    let (id, secret) = ask(&api, &turn, &[]).await;
    let card = api.outcome(&id).await;
    assert_eq!(card["card"]["sites"], json!([HOST]), "{card}");
    approve_card(&api, &id, &secret).await;
    let approvals = api.chat_approvals("u", "c").await;
    assert_eq!(approvals["approvals"][0]["access"], "full", "{approvals}");
    let r = s.request(&turn, client, ("PUT", "/f", "x")).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_person_may_narrow_a_card_to_read_for_an_inspected_host_never_widen_it() {
    let s = setup(&["--inspect", HOST]).await;
    let api = s.gate.api();
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    // Not approved at all yet: CONNECT is refused, recorded, and merged into the card.
    let authority = format!("{HOST}:{}", s.origin.port());
    let (r, _) = connect(s.gate.proxy(), &turn, &authority).await;
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
    let (id, secret) = ask(&api, &turn, &[]).await;
    let schema = api.outcome(&id).await;
    assert_eq!(schema["card"]["sites"], json!([HOST]), "{schema}");
    // Widening or inventing a level is refused, and nothing is claimed.
    let decide = async |access: &str| {
        let payload = json!({"approved": true, "access": access});
        answer_card(&api, &id, &secret, payload).await
    };
    let r = decide("admin").await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INVALID_DECISION");
    let r = decide("read").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"]["access"], "read", "{}", r.text());
    let approvals = api.chat_approvals("u", "c").await;
    assert_eq!(approvals["approvals"][0]["access"], "read", "{approvals}");
    let r = s.request(&turn, client.clone(), ("GET", "/", "")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.request(&turn, client, ("POST", "/", "x")).await;
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
}

#[tokio::test]
async fn read_for_a_host_that_is_not_inspected_is_an_invalid_decision() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let turn = api.turn("u", "c", &[]).await;
    let url = format!("https://{HOST}/data.csv");
    let read = json!({"approved": true, "access": "read"});
    let (r, id, secret) = ask_and_answer(&api, &turn, &[&url], read).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("does not inspect"), "{}", r.text());
    let approvals = api.chat_approvals("u", "c").await;
    assert_eq!(approvals["approvals"], json!([]), "nothing was written");
    // The same card can still be approved at its own level.
    let r = answer_card(&api, &id, &secret, json!({"approved": true})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["decision"]["access"],
        serde_json::Value::Null,
        "absent: full"
    );
}

#[tokio::test]
async fn launch_time_sites_may_be_read_only_on_inspected_hosts() {
    let s = setup(&["--inspect", HOST]).await;
    let api = s.gate.api();
    let open = |sites: serde_json::Value| {
        api.post(
            "/v1/turns",
            RUNTIME,
            json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "sites": sites}),
        )
    };
    // Not inspected: refused, and no turn was opened.
    let r = open(json!([{"pattern": "other.example.org", "access": "read"}])).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("sites[0]"), "{}", r.text());
    let r = open(json!([{"pattern": HOST, "access": "upload"}])).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let r = open(json!([{"pattern": HOST, "acces": "read"}])).await;
    assert_eq!(r.status, 400, "an unknown field: {}", r.text());
    let audit = api
        .get("/v1/admin/audit?kind=turn_opened", ADMIN)
        .await
        .json();
    assert_eq!(audit["audit"], json!([]), "nothing was written: {audit}");

    let r = open(json!([{"pattern": HOST, "access": "read"}])).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let url = url::Url::parse(v["proxy_url"].as_str().unwrap()).unwrap();
    let turn = Turn {
        id: v["turn_id"].as_str().unwrap().to_owned(),
        credential: format!("{}:{}", url.username(), url.password().unwrap()),
    };
    let policy = api
        .get(&format!("/v1/turns/{}/policy", turn.id), RUNTIME)
        .await
        .json();
    assert_eq!(policy["sites"], json!([HOST]), "{policy}");
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    let r = s.request(&turn, client.clone(), ("GET", "/", "")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.request(&turn, client, ("DELETE", "/x", "")).await;
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
    assert_eq!(s.origin.requests().len(), 1);
}

#[tokio::test]
async fn a_read_grant_on_a_host_no_longer_inspected_fails_closed_until_a_person_grants_full() {
    let origin_pki = pki(&[HOST]);
    let origin = tls_origin(&origin_pki).await;
    let port = origin.port().to_string();
    let started = |dir: Option<tempfile::TempDir>, inspect: bool| {
        let mut g = gate().resolve(HOST, "127.0.0.1").args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &port,
        ]);
        if inspect {
            g = g.args(&["--inspect", HOST]);
        }
        if let Some(d) = dir {
            g = g.data_dir(d);
        }
        g.start()
    };
    let g = started(None, true);
    let r = add_site(&g.api(), json!({"pattern": HOST, "access": "read"})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    // Restarted without --inspect: the proxy cannot see inside this host's TLS any more.
    let g = started(Some(g.kill()), false);
    let api = g.api();
    let turn = g.turn("u", "c").await;
    let authority = format!("{HOST}:{port}");
    let (_, stream) = connect(g.proxy(), &turn, &authority).await;
    assert!(
        tls_get(stream, origin_pki.client(), HOST).await.is_err(),
        "closed, not relayed"
    );
    assert_recorded(&api, &turn, "method_not_allowed").await;
    assert_eq!(origin.connection_count(), 0, "the origin was never dialled");
    let (id, secret) = ask(&api, &turn, &[]).await;
    approve_card(&api, &id, &secret).await;
    // The remembered read grant gives way to the fresh full approval at once.
    let (_, stream) = connect(g.proxy(), &turn, &authority).await;
    let r = tls_get(stream, origin_pki.client(), HOST).await.unwrap();
    assert_eq!(
        r.status, 200,
        "an opaque tunnel again, the origin's own certificate"
    );
}
