//! TLS inspection end to end: the real binary, real TLS on both sides (rcgen), `--resolve` to
//! loopback. A client that trusts only the deployment CA reaches an inspected host; `read`
//! lets downloads through and refuses uploads as `method_not_allowed` (recorded before the
//! 403, which arrives over the client's own TLS session); an origin whose certificate does not
//! verify is a 502 and sees no request bytes; a host that is not inspected still shows the
//! origin's own certificate.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use support::inspect::*;
use support::*;
use tokio::io::AsyncWriteExt as _;

#[tokio::test]
async fn a_client_trusting_only_the_deployment_ca_reaches_an_inspected_host() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let r = add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["inspect"], true);
    assert_eq!(r.json()["access"], "full");
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    let r = over_tls(
        &s,
        &turn,
        client,
        HOST,
        &request("POST", "/upload?x=1", "data"),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "origin says hi");
    let seen = s.origin.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].starts_with("POST /upload?x=1 HTTP/1.1"), "{seen:?}");
    assert!(!seen[0].to_ascii_lowercase().contains("proxy-authorization"));
    let line = s.gate.log_line(&["proxy decision", "inspected"]).await;
    assert!(
        line.is_some(),
        "the decision line says the request was inspected"
    );
    let metrics = api.call("GET", "/metrics", None, None, None).await;
    assert!(
        metrics
            .text()
            .contains("egressgate_proxy_requests_total{kind=\"inspected\"} 1"),
        "{}",
        metrics.text()
    );
}

#[tokio::test]
async fn read_allows_downloads_and_refuses_uploads_with_a_recorded_403_inside_tls() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let r = add_site(
        &api,
        serde_json::json!({"pattern": HOST, "inspect": true, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["access"], "read");
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    // (HEAD is in the unit tests: this raw client would wait for a body.)
    for m in ["GET", "OPTIONS"] {
        let r = over_tls(
            &s,
            &turn,
            client.clone(),
            HOST,
            &request(m, "/data.csv", ""),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{m}: {}", r.text());
    }
    let before = s.origin.requests().len();
    for m in ["POST", "PUT", "DELETE"] {
        let r = over_tls(
            &s,
            &turn,
            client.clone(),
            HOST,
            &request(m, "/up?token=secret", "x"),
        )
        .await
        .unwrap();
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
        let port = s.origin.addr.port();
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
async fn an_origin_whose_certificate_does_not_verify_is_a_502_and_gets_no_bytes() {
    // This origin's certificate is signed by a CA the gate was not told to trust.
    let rogue = tls_origin(&pki(&[HOST])).await;
    let rogue_port = rogue.addr.port().to_string();
    let s = setup(&["--allow-port", &rogue_port]).await;
    let api = s.gate.api();
    add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    let turn = api.turn("u", "c", &[]).await;
    let (r, stream) = connect(s.gate.proxy(), &turn, &format!("{HOST}:{rogue_port}")).await;
    assert_eq!(r.status, 200);
    let mut tls = handshake(stream, client_trusting(&s.ca_pem, &[]), HOST)
        .await
        .unwrap();
    tls.write_all(request("POST", "/secret", "do-not-send").as_bytes())
        .await
        .unwrap();
    let r = read_response(&mut tls).await.unwrap();
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("did not verify"), "{}", r.text());
    assert_eq!(rogue.connection_count(), 1, "the origin was dialled");
    assert!(
        rogue.requests().is_empty(),
        "no request bytes reached the origin"
    );
    let line = s.gate.log_line(&["proxy decision", "upstream_tls"]).await;
    assert!(line.is_some(), "the failure has its decision line");
}

#[tokio::test]
async fn a_host_that_is_not_inspected_still_shows_the_origins_own_certificate() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    api.admin_site(HOST).await;
    let turn = api.turn("u", "c", &[]).await;
    // Trusting only the origin's CA works: the tunnel is opaque.
    let authority = format!("{HOST}:{}", s.origin.addr.port());
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    let r = tls_get(stream, s.origin_pki.client(), HOST).await.unwrap();
    assert_eq!(r.status, 200);
    // Trusting only the deployment CA fails: nobody minted a leaf for it.
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    let err = handshake(stream, client_trusting(&s.ca_pem, &[]), HOST).await;
    assert!(
        err.is_err(),
        "the deployment CA signed nothing for a host that is not inspected"
    );
}

#[tokio::test]
async fn inspect_flag_inspects_a_host_allowed_by_a_launch_site_and_sni_mismatch_stays() {
    let s = setup(&["--inspect", "*.example.com"]).await;
    let api = s.gate.api();
    let turn = api.turn("u", "c", &[HOST, "other.example.com"]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    let r = over_tls(&s, &turn, client.clone(), HOST, &request("GET", "/", ""))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // A leaf for one host is never served for another: an SNI that is not the CONNECT host is
    // domain fronting, refused before any certificate is presented.
    let authority = format!("{HOST}:{}", s.origin.addr.port());
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    let err = handshake(stream, client, "other.example.com").await;
    assert!(
        err.is_err(),
        "no leaf for other.example.com on a tunnel to {HOST}"
    );
    assert!(
        wait_for_refusal(&api, &turn, "sni_mismatch", 5)
            .await
            .is_some()
    );
}

#[tokio::test]
async fn read_without_inspection_is_refused_with_a_clear_422_and_nothing_is_stored() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let r = add_site(&api, serde_json::json!({"pattern": HOST, "access": "read"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INVALID_INPUT");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("inspect"), "{msg}");
    let r = add_site(
        &api,
        serde_json::json!({"pattern": HOST, "access": "write"}),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text());
    let r = add_site(&api, serde_json::json!({"pattern": HOST, "inspect": "yes"})).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let list = api.get("/v1/admin/sites", ADMIN).await.json();
    assert_eq!(list["sites"], serde_json::json!([]), "nothing was written");
}

#[tokio::test]
async fn read_is_enforced_per_request_in_plain_http_forwarding_too() {
    let plain = origin().await;
    let gate = gate()
        .resolve(HOST, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--inspect", HOST])
        .args(&["--allow-port", &plain.addr.port().to_string()])
        .start();
    let api = gate.api();
    // Covered by --inspect, so `read` is accepted without `inspect: true`.
    let r = add_site(&api, serde_json::json!({"pattern": HOST, "access": "read"})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let turn = api.turn("u", "c", &[]).await;
    let url = format!("http://{HOST}:{}/data", plain.addr.port());
    assert_eq!(proxy_get(gate.proxy(), &turn, &url).await.status, 200);
    let raw = format!(
        "POST {url} HTTP/1.1\r\nhost: {HOST}:{}\r\nproxy-authorization: {}\r\ncontent-length: 1\r\nconnection: close\r\n\r\nx",
        plain.addr.port(),
        turn.auth_header()
    );
    let r = proxy_raw(gate.proxy(), &raw).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
    assert_eq!(plain.requests().len(), 1, "only the GET reached the origin");
}

#[tokio::test]
async fn the_ca_key_file_is_private_never_logged_and_ca_print_matches_the_endpoint() {
    let s = setup(&[]).await;
    let key_file = s.gate.data_dir.path().join("data").join("ca-key.pem");
    if std::env::var("EGRESSGATE_TEST_POSTGRES_URL").is_ok() {
        // On PostgreSQL the CA lives in the database, never in a file.
        assert!(!key_file.exists());
        return;
    }
    let meta = std::fs::metadata(&key_file).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&key_file).unwrap();
    let key_line = text
        .lines()
        .skip_while(|l| !l.contains("PRIVATE KEY"))
        .nth(1)
        .unwrap()
        .to_owned();
    let log = s.gate.log_lines("");
    assert!(
        log.iter()
            .all(|l| !l.contains(&key_line) && !l.contains("PRIVATE KEY")),
        "the CA key never reaches the log"
    );
    let data = s.gate.data_dir.path().join("data");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(["ca", "print", "--data-dir"])
        .arg(&data)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::env::var("EGRESSGATE_TEST_POSTGRES_URL").is_err() {
        assert_eq!(String::from_utf8_lossy(&out.stdout), s.ca_pem);
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PRIVATE KEY"));
}

#[tokio::test]
async fn approving_a_method_not_allowed_refusal_grants_full_access() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    add_site(
        &api,
        serde_json::json!({"pattern": HOST, "inspect": true, "access": "read"}),
    )
    .await;
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    let r = over_tls(&s, &turn, client.clone(), HOST, &request("PUT", "/f", "x"))
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    // The agent asks without naming anything: the refused host is merged into the card.
    let (id, secret) = ask(&api, &turn, &[]).await;
    let card = api
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await
        .json();
    assert_eq!(card["card"]["sites"], serde_json::json!([HOST]), "{card}");
    approve_card(&api, &id, &secret).await;
    let approvals = api.chat_approvals("u", "c").await;
    assert_eq!(approvals["approvals"][0]["access"], "full", "{approvals}");
    let r = over_tls(&s, &turn, client, HOST, &request("PUT", "/f", "x"))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

/// One HTTP/2 request (ALPN `h2`) through a tunnel to the inspected host (`path`, or a whole
/// `https://` URL for another `:authority`): status, version, refusal header and body.
async fn over_h2(
    s: &Setup,
    turn: &Turn,
    client: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
) -> (u16, http::Version, Option<String>, String) {
    use http_body_util::BodyExt as _;
    let port = s.origin.addr.port();
    let (r, stream) = connect(s.gate.proxy(), turn, &format!("{HOST}:{port}")).await;
    assert_eq!(r.status, 200);
    let tls = handshake(stream, client, HOST).await.unwrap();
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "h2 by ALPN"
    );
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(if path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("https://{HOST}:{port}{path}")
        })
        // A `GET` with a body is an upload that `read` refuses: only other methods carry one.
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            if method == "GET" { b"" } else { b"payload" },
        )))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let (status, version) = (resp.status().as_u16(), resp.version());
    let refused = resp
        .headers()
        .get("x-egress-refused")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        version,
        refused,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

#[tokio::test]
async fn http2_clients_are_served_and_decided_per_stream() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    add_site(
        &api,
        serde_json::json!({"pattern": HOST, "inspect": true, "access": "read"}),
    )
    .await;
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"h2", b"http/1.1"]);
    let (status, version, _, body) = over_h2(&s, &turn, client.clone(), "GET", "/data").await;
    assert_eq!((status, version), (200, http::Version::HTTP_2), "{body}");
    assert_eq!(body, "origin says hi");
    let seen = s.origin.requests();
    assert!(seen[0].starts_with("GET /data HTTP/1.1"), "{seen:?}");
    assert!(
        seen[0]
            .to_ascii_lowercase()
            .contains(&format!("host: {HOST}:")),
        "{seen:?}"
    );
    let (status, _, refused, body) = over_h2(&s, &turn, client.clone(), "POST", "/upload").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(refused.as_deref(), Some("method_not_allowed"));
    assert!(body.contains("approval tool"), "{body}");
    // An :authority that is not the CONNECT host is a virtual host the tunnel may not reach.
    let other = "https://other.example.com/";
    let (status, _, refused, body) = over_h2(&s, &turn, client, "GET", other).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(refused.as_deref(), Some("host_mismatch"));
    assert_eq!(
        s.origin.requests().len(),
        1,
        "the POST never reached the origin"
    );
}

#[tokio::test]
async fn a_person_may_narrow_a_card_to_read_for_an_inspected_host_never_widen_it() {
    let s = setup(&["--inspect", HOST]).await;
    let api = s.gate.api();
    let turn = api.turn("u", "c", &[]).await;
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    // Not approved at all yet: CONNECT is refused, recorded, and merged into the card.
    let authority = format!("{HOST}:{}", s.origin.addr.port());
    let (r, _) = connect(s.gate.proxy(), &turn, &authority).await;
    assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
    let (id, secret) = ask(&api, &turn, &[]).await;
    let schema = api
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await
        .json();
    assert_eq!(
        schema["card"]["sites"],
        serde_json::json!([HOST]),
        "{schema}"
    );
    // Widening or inventing a level is refused, and nothing is claimed.
    let r = resume(
        &api,
        &id,
        &secret,
        "resolved",
        serde_json::json!({"approved": true, "access": "admin"}),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "INVALID_DECISION");
    let r = resume(
        &api,
        &id,
        &secret,
        "resolved",
        serde_json::json!({"approved": true, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"]["access"], "read", "{}", r.text());
    let approvals = api.chat_approvals("u", "c").await;
    assert_eq!(approvals["approvals"][0]["access"], "read", "{approvals}");
    let r = over_tls(&s, &turn, client.clone(), HOST, &request("GET", "/", ""))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = over_tls(&s, &turn, client, HOST, &request("POST", "/", "x"))
        .await
        .unwrap();
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
}

#[tokio::test]
async fn read_for_a_host_that_is_not_inspected_is_an_invalid_decision() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    let turn = api.turn("u", "c", &[]).await;
    let (id, secret) = ask(&api, &turn, &[&format!("https://{HOST}/data.csv")]).await;
    let r = resume(
        &api,
        &id,
        &secret,
        "resolved",
        serde_json::json!({"approved": true, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("does not inspect"), "{}", r.text());
    let approvals = api.chat_approvals("u", "c").await;
    assert_eq!(
        approvals["approvals"],
        serde_json::json!([]),
        "nothing was written"
    );
    // The same card can still be approved at its own level.
    let r = resume(
        &api,
        &id,
        &secret,
        "resolved",
        serde_json::json!({"approved": true}),
    )
    .await;
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
            serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "sites": sites}),
        )
    };
    // Not inspected: refused, and no turn was opened.
    let r = open(serde_json::json!([{"pattern": "other.example.org", "access": "read"}])).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("sites[0]"), "{}", r.text());
    let r = open(serde_json::json!([{"pattern": HOST, "access": "upload"}])).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let r = open(serde_json::json!([{"pattern": HOST, "acces": "read"}])).await;
    assert_eq!(r.status, 400, "an unknown field: {}", r.text());
    let audit = api
        .get("/v1/admin/audit?kind=turn_opened", ADMIN)
        .await
        .json();
    assert_eq!(
        audit["audit"],
        serde_json::json!([]),
        "nothing was written: {audit}"
    );

    let r = open(serde_json::json!([{"pattern": HOST, "access": "read"}])).await;
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
    assert_eq!(policy["sites"], serde_json::json!([HOST]), "{policy}");
    let client = client_trusting(&s.ca_pem, &[b"http/1.1"]);
    let r = over_tls(&s, &turn, client.clone(), HOST, &request("GET", "/", ""))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = over_tls(&s, &turn, client, HOST, &request("DELETE", "/x", ""))
        .await
        .unwrap();
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
    assert_eq!(s.origin.requests().len(), 1);
}

#[tokio::test]
async fn a_read_grant_on_a_host_no_longer_inspected_fails_closed_until_a_person_grants_full() {
    let origin_pki = pki(&[HOST]);
    let origin = tls_origin(&origin_pki).await;
    let port = origin.addr.port().to_string();
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
    let r = add_site(
        &g.api(),
        serde_json::json!({"pattern": HOST, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    // Restarted without --inspect: the proxy cannot see inside this host's TLS any more.
    let g = started(Some(g.kill()), false);
    let api = g.api();
    let turn = api.turn("u", "c", &[]).await;
    let authority = format!("{HOST}:{port}");
    let (_, stream) = connect(g.proxy(), &turn, &authority).await;
    assert!(
        tls_get(stream, origin_pki.client(), HOST).await.is_err(),
        "closed, not relayed"
    );
    let row = wait_for_refusal(&api, &turn, "method_not_allowed", 5).await;
    assert!(row.is_some(), "recorded as method_not_allowed");
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
