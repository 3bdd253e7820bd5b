//! TLS inspection end to end: the real binary, real TLS on both sides (rcgen), `--resolve` to
//! loopback. A client that trusts only the deployment CA reaches an inspected host; an origin
//! whose certificate does not verify is a 502 and sees no request bytes; a host that is not
//! inspected still shows the origin's own certificate; the CA key stays private; HTTP/2 is
//! decided per stream. The `read` access level is `inspection_read.rs`.

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
    let r = s
        .request(&turn, client, ("POST", "/upload?x=1", "data"))
        .await;
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
    let metrics = api.open_get("/metrics").await;
    assert!(
        metrics
            .text()
            .contains("egressgate_proxy_requests_total{kind=\"inspected\"} 1"),
        "{}",
        metrics.text()
    );
}

#[tokio::test]
async fn an_origin_whose_certificate_does_not_verify_is_a_502_and_gets_no_bytes() {
    // This origin's certificate is signed by a CA the gate was not told to trust.
    let rogue = tls_origin(&pki(&[HOST])).await;
    let rogue_port = rogue.addr.port().to_string();
    let s = setup(&["--allow-port", &rogue_port]).await;
    let turn = s
        .listed_turn(serde_json::json!({"pattern": HOST, "inspect": true}))
        .await;
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
    let authority = format!("{HOST}:{}", s.origin.port());
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
    let r = s.request(&turn, client.clone(), ("GET", "/", "")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A leaf for one host is never served for another: an SNI that is not the CONNECT host is
    // domain fronting, refused before any certificate is presented.
    let authority = format!("{HOST}:{}", s.origin.port());
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    let err = handshake(stream, client, "other.example.com").await;
    assert!(
        err.is_err(),
        "no leaf for other.example.com on a tunnel to {HOST}"
    );
    assert_recorded(&api, &turn, "sni_mismatch").await;
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
    let out = egressgate()
        .args(["ca", "print", "--data-dir"])
        .arg(&data)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert_success(&out);
    if std::env::var("EGRESSGATE_TEST_POSTGRES_URL").is_err() {
        assert_eq!(String::from_utf8_lossy(&out.stdout), s.ca_pem);
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PRIVATE KEY"));
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
    let port = s.origin.port();
    let (r, stream) = connect(s.gate.proxy(), turn, &format!("{HOST}:{port}")).await;
    assert_eq!(r.status, 200);
    let tls = handshake(stream, client, HOST).await.unwrap();
    let mut send = h2_sender(tls).await;
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
    let turn = s.inspected_turn("read").await;
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
