//! TLS inspection end to end: the real binary, real TLS on both sides (rcgen), `--resolve` to
//! loopback. A client that trusts only the deployment CA reaches an inspected host; `read`
//! lets downloads through and refuses uploads as `method_not_allowed` (recorded before the
//! 403, which arrives over the client's own TLS session); an origin whose certificate does not
//! verify is a 502 and sees no request bytes; a host that is not inspected still shows the
//! origin's own certificate.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use support::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

const HOST: &str = "files.example.com";

/// PEM text of a DER certificate.
fn pem_of(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// A client trusting exactly the certificates in `pem` (offering `alpn`).
fn client_trusting(pem: &str, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Arc::new(cfg)
}

/// An inspecting gate in front of a TLS origin for [`HOST`] whose CA it trusts through
/// `--upstream-ca`; the origin's own CA PEM is written into the gate's temp dir.
struct Setup {
    gate: Gate,
    origin: Origin,
    origin_pki: Pki,
    ca_pem: String,
}

async fn setup(extra: &[&str]) -> Setup {
    let origin_pki = pki(&[HOST]);
    let origin = tls_origin(&origin_pki).await;
    let dir = tempfile::tempdir().unwrap();
    let upstream_ca = dir.path().join("upstream-ca.pem");
    std::fs::write(&upstream_ca, pem_of(&origin_pki.ca_der)).unwrap();
    let port = origin.addr.port().to_string();
    let gate = gate()
        .data_dir(dir)
        .resolve(HOST, "127.0.0.1")
        .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &port])
        .args(&["--upstream-ca", upstream_ca.to_str().unwrap()])
        .args(extra)
        .start();
    let r = gate.api().call("GET", "/v1/ca.pem", None, None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/x-pem-file"));
    let ca_pem = r.text();
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    Setup {
        gate,
        origin,
        origin_pki,
        ca_pem,
    }
}

async fn add_site(api: &Api, body: serde_json::Value) -> Resp {
    api.post("/v1/admin/sites", ADMIN, body).await
}

/// `CONNECT`, TLS with `sni` trusting `client`, then one raw HTTP/1.1 request; the response.
async fn over_tls(
    s: &Setup,
    turn: &Turn,
    client: Arc<rustls::ClientConfig>,
    sni: &str,
    request: &str,
) -> std::io::Result<Resp> {
    let authority = format!("{HOST}:{}", s.origin.addr.port());
    let (r, stream) = connect(s.gate.proxy(), turn, &authority).await;
    assert_eq!(r.status, 200, "CONNECT: {}", r.text());
    let mut tls = handshake(stream, client, sni).await?;
    tls.write_all(request.as_bytes()).await?;
    read_response(&mut tls).await
}

async fn handshake(
    stream: TcpStream,
    client: Arc<rustls::ClientConfig>,
    sni: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).unwrap();
    let connector = tokio_rustls::TlsConnector::from(client);
    tokio::time::timeout(Duration::from_secs(10), connector.connect(name, stream))
        .await
        .map_err(std::io::Error::other)?
}

fn request(method: &str, path: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: {HOST}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Waits (bounded) for a log line containing every needle.
async fn log_line(gate: &Gate, needles: &[&str]) -> Option<String> {
    for _ in 0..100 {
        if let Some(l) = gate
            .log_lines(needles[0])
            .into_iter()
            .find(|l| needles.iter().all(|n| l.contains(n)))
        {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

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
    let line = log_line(&s.gate, &["proxy decision", "inspected"]).await;
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
    let line = log_line(&s.gate, &["proxy decision", "upstream_tls"]).await;
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
    let approvals = api
        .call(
            "GET",
            "/v1/chats/c/approvals",
            Some(RUNTIME),
            Some("u"),
            None,
        )
        .await
        .json();
    assert_eq!(approvals["approvals"][0]["access"], "full", "{approvals}");
    let r = over_tls(&s, &turn, client, HOST, &request("PUT", "/f", "x"))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

/// A TLS origin for [`HOST`] that runs `git http-backend` (smart HTTP, CGI) for every request,
/// serving the bare repositories under `root` (pushes allowed, so only the proxy stops them).
async fn git_origin(pki: &Pki, root: std::path::PathBuf) -> std::net::SocketAddr {
    use http_body_util::BodyExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, root) = (acceptor.clone(), root.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let root = root.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let header = |h: &str| {
                                parts
                                    .headers
                                    .get(h)
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("")
                                    .to_owned()
                            };
                            let mut cgi = tokio::process::Command::new("git");
                            cgi.arg("http-backend")
                                .env_clear()
                                .env("GIT_PROJECT_ROOT", &root)
                                .env("GIT_HTTP_EXPORT_ALL", "1")
                                .env("REMOTE_USER", "tester")
                                .env("REMOTE_ADDR", "127.0.0.1")
                                .env("REQUEST_METHOD", parts.method.as_str())
                                .env("PATH_INFO", parts.uri.path())
                                .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
                                .env("CONTENT_TYPE", header("content-type"))
                                .env("CONTENT_LENGTH", body.len().to_string())
                                .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
                                .env("HTTP_GIT_PROTOCOL", header("git-protocol"))
                                .stdin(std::process::Stdio::piped())
                                .stdout(std::process::Stdio::piped());
                            let mut child = cgi.spawn().unwrap();
                            let mut stdin = child.stdin.take().unwrap();
                            stdin.write_all(&body).await.unwrap();
                            drop(stdin);
                            let out = child.wait_with_output().await.unwrap().stdout;
                            let split = out.windows(4).position(|w| w == b"\r\n\r\n");
                            let (head, body, skip) = match split {
                                Some(i) => (&out[..i], &out[i..], 4),
                                None => {
                                    let i = out.windows(2).position(|w| w == b"\n\n").unwrap();
                                    (&out[..i], &out[i..], 2)
                                }
                            };
                            let mut resp = http::Response::builder();
                            for line in String::from_utf8_lossy(head).lines() {
                                let Some((k, v)) = line.split_once(':') else {
                                    continue;
                                };
                                if k.eq_ignore_ascii_case("status") {
                                    let code = v.trim().split(' ').next().unwrap_or("200");
                                    resp = resp.status(code.parse::<u16>().unwrap());
                                } else {
                                    resp = resp.header(k.trim(), v.trim());
                                }
                            }
                            let body = http_body_util::Full::new(bytes::Bytes::copy_from_slice(
                                &body[skip..],
                            ));
                            Ok::<_, std::convert::Infallible>(resp.body(body).unwrap())
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

fn git(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    git_with(dir, args, &[])
}

/// `git` with extra environment (the CA bundle: this git build reads `GIT_SSL_CAINFO`, as the
/// sandbox sets it, more reliably than `-c http.sslCAInfo`).
fn git_with(dir: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new("git")
        .current_dir(dir)
        .envs(envs.iter().copied())
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "git failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_clone_works_under_read_and_git_push_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A bare repository with one commit, served by git http-backend behind TLS.
    let root = w.join("srv");
    std::fs::create_dir(&root).unwrap();
    ok(&git(&root, &["init", "-q", "--bare", "repo.git"]));
    let seed = w.join("seed");
    std::fs::create_dir(&seed).unwrap();
    ok(&git(&seed, &["init", "-q", "-b", "main"]));
    std::fs::write(seed.join("README"), "hello\n").unwrap();
    ok(&git(&seed, &["add", "README"]));
    ok(&git(
        &seed,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-qm",
            "one",
        ],
    ));
    let bare = root.join("repo.git");
    ok(&git(&seed, &["push", "-q", bare.to_str().unwrap(), "main"]));
    ok(&git(&bare, &["symbolic-ref", "HEAD", "refs/heads/main"]));
    let head_before = ok(&git(&bare, &["rev-parse", "main"]));

    let origin_pki = pki(&[HOST]);
    let addr = git_origin(&origin_pki, root.clone()).await;
    let upstream_ca = w.join("upstream-ca.pem");
    std::fs::write(&upstream_ca, pem_of(&origin_pki.ca_der)).unwrap();
    let gate = gate()
        .resolve(HOST, "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &addr.port().to_string(),
        ])
        .args(&["--upstream-ca", upstream_ca.to_str().unwrap()])
        .start();
    let api = gate.api();
    let r = add_site(
        &api,
        serde_json::json!({"pattern": HOST, "inspect": true, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let ca = api.call("GET", "/v1/ca.pem", None, None, None).await.text();
    let ca_file = w.join("deployment-ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let turn = api.turn("u", "c", &[]).await;
    let proxy = format!("http://{}@{}", turn.credential, gate.proxy());
    let ca_path = ca_file.to_str().unwrap();
    let via = |dir: &std::path::Path, args: &[&str]| {
        let mut all = vec!["-c".to_owned(), format!("http.proxy={proxy}")];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        tokio::task::block_in_place(|| git_with(dir, &all, &[("GIT_SSL_CAINFO", ca_path)]))
    };
    let url = format!("https://{HOST}:{}/repo.git", addr.port());
    ok(&via(w, &["clone", "-q", &url, "clone"]));
    assert_eq!(
        std::fs::read_to_string(w.join("clone/README")).unwrap(),
        "hello\n"
    );

    let clone = w.join("clone");
    std::fs::write(clone.join("NEW"), "upload\n").unwrap();
    ok(&git(&clone, &["add", "NEW"]));
    ok(&git(
        &clone,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-qm",
            "two",
        ],
    ));
    let out = via(&clone, &["push", "origin", "main"]);
    assert!(!out.status.success(), "push must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("403"),
        "git shows the proxy's 403: {stderr}"
    );
    assert_eq!(
        ok(&git(&bare, &["rev-parse", "main"])),
        head_before,
        "nothing was pushed"
    );
    let row = wait_for_refusal(&api, &turn, "method_not_allowed", 5)
        .await
        .expect("the push was recorded");
    assert_eq!(row["method"], "GET", "{row}");
    assert_eq!(
        row["url"],
        format!("https://{HOST}:{}/repo.git/info/refs", addr.port())
    );
}

/// One HTTP/2 request (ALPN `h2`) through a tunnel to the inspected host: status, version,
/// refusal header and body.
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
        .uri(format!("https://{HOST}:{port}{path}"))
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            b"payload",
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
    let (status, _, refused, body) = over_h2(&s, &turn, client, "POST", "/upload").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(refused.as_deref(), Some("method_not_allowed"));
    assert!(body.contains("approval tool"), "{body}");
    assert_eq!(
        s.origin.requests().len(),
        1,
        "the POST never reached the origin"
    );
}

/// `egressgate sandbox run` with `extra` flags (the CA source), running `script` under `sh`.
fn sandbox(proxy_url: &str, extra: &[&str], script: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(["sandbox", "run", "--proxy-url", proxy_url])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .env_remove("EGRESSGATE_CONTROL_URL")
        .env("SSL_CERT_FILE", "/nonexistent/overridden.pem")
        .output()
        .unwrap()
}

/// Checks, inside the sandbox, that every trust variable names one bundle holding the system
/// roots and the deployment CA, then fetches from the inspected host with curl's defaults.
fn trust_script(port: u16, mounted: bool) -> String {
    let vars = "SSL_CERT_FILE REQUESTS_CA_BUNDLE PIP_CERT CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS \
                npm_config_cafile GIT_SSL_CAINFO";
    let mount_check = if mounted {
        "cmp -s \"$SSL_CERT_FILE\" /etc/ssl/certs/ca-certificates.crt || echo not-mounted; \
         curl -sS --max-time 10 --cacert /etc/ssl/certs/ca-certificates.crt -o /dev/null \
         -w 'system:%{http_code} ' https://files.example.com:PORT/;"
    } else {
        ""
    };
    format!(
        "for v in {vars}; do eval \"test \\\"\\${{$v}}\\\" = \\\"$SSL_CERT_FILE\\\"\" || echo bad-$v; done; \
         test \"$(grep -c 'BEGIN CERTIFICATE' \"$SSL_CERT_FILE\")\" -gt 1 || echo one-cert-only; \
         {mount_check} curl -sS --max-time 10 https://files.example.com:PORT/"
    )
    .replace("PORT", &port.to_string())
}

#[tokio::test]
async fn the_sandbox_trusts_the_deployment_ca_fetched_from_the_control_plane() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    let turn = api.turn("u", "c", &[]).await;
    let proxy_url = format!("http://{}@{}", turn.credential, s.gate.proxy());
    let control = format!("http://{}", s.gate.control.unwrap());
    let script = trust_script(s.origin.addr.port(), true);
    let out = tokio::task::spawn_blocking(move || {
        sandbox(&proxy_url, &["--control-url", &control], &script)
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout} {stderr}");
    assert_eq!(stdout, "system:200 origin says hi", "{stderr}");
}

#[tokio::test]
async fn the_sandbox_takes_the_ca_from_a_file_without_isolation_too_and_refuses_a_bad_one() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    let turn = api.turn("u", "c", &[]).await;
    let proxy_url = format!("http://{}@{}", turn.credential, s.gate.proxy());
    let ca_file = s.gate.data_dir.path().join("deployment-ca.pem");
    std::fs::write(&ca_file, &s.ca_pem).unwrap();
    let script = trust_script(s.origin.addr.port(), false);
    let (p, f) = (proxy_url.clone(), ca_file.to_str().unwrap().to_owned());
    let out = tokio::task::spawn_blocking(move || {
        sandbox(&p, &["--no-isolate", "--ca-file", &f], &script)
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "origin says hi",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A file that is not a certificate: the launcher fails before running anything.
    let bad = s.gate.data_dir.path().join("not-a-ca.pem");
    std::fs::write(&bad, "hello").unwrap();
    let f = bad.to_str().unwrap().to_owned();
    let out =
        tokio::task::spawn_blocking(move || sandbox(&proxy_url, &["--ca-file", &f], "echo ran"))
            .await
            .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(out.stdout.is_empty(), "the command did not run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a PEM certificate"), "{stderr}");
}

#[tokio::test]
async fn two_proxies_on_one_postgresql_mint_under_one_ca() {
    let pg = support::pg::PgCluster::start();
    let origin_pki = pki(&[HOST]);
    let origin = tls_origin(&origin_pki).await;
    let dir = tempfile::tempdir().unwrap();
    let upstream_ca = dir.path().join("upstream-ca.pem");
    std::fs::write(&upstream_ca, pem_of(&origin_pki.ca_der)).unwrap();
    let port = origin.addr.port().to_string();
    let proxy = || {
        gate()
            .subcommand("proxy")
            .database(&pg.url())
            .resolve(HOST, "127.0.0.1")
            .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &port])
            .args(&["--upstream-ca", upstream_ca.to_str().unwrap()])
            .start()
    };
    // Started together, so both may find no CA yet: the first write wins, the other reads it.
    let (p1, p2) = std::thread::scope(|s| {
        let a = s.spawn(proxy);
        let b = s.spawn(proxy);
        (a.join().unwrap(), b.join().unwrap())
    });
    let public = p1.proxy().to_string();
    let control = gate()
        .subcommand("control")
        .database(&pg.url())
        .args(&["--proxy-public-url", &public])
        .start();
    let api = control.api();
    add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    let ca = api.call("GET", "/v1/ca.pem", None, None, None).await.text();
    assert_eq!(ca.matches("BEGIN CERTIFICATE").count(), 1, "{ca}");
    let client = client_trusting(&ca, &[b"http/1.1"]);
    let turn = api.turn("u", "c", &[]).await;
    for p in [&p1, &p2] {
        let (r, stream) = connect(p.proxy(), &turn, &format!("{HOST}:{port}")).await;
        assert_eq!(r.status, 200);
        let mut tls = handshake(stream, client.clone(), HOST).await.unwrap();
        tls.write_all(request("GET", "/", "").as_bytes())
            .await
            .unwrap();
        let r = read_response(&mut tls).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(origin.requests().len(), 2);
}

#[tokio::test]
async fn ca_rotate_starts_a_new_ca_that_a_running_proxy_picks_up_and_keeps_the_old_one_trusted() {
    let s = setup(&[]).await;
    let api = s.gate.api();
    add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    let turn = api.turn("u", "c", &[]).await;
    let old = s.ca_pem.clone();
    let data = s.gate.data_dir.path().join("data");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"));
    cmd.args(["ca", "rotate", "--overlap", "1h", "--data-dir"])
        .arg(&data)
        .env_remove("DATABASE_URL");
    if let Some(url) = postgres_database_for(s.gate.data_dir.path()) {
        cmd.arg("--database-url").arg(url);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("until 20"), "the stated time: {stderr}");
    let bundle = api.call("GET", "/v1/ca.pem", None, None, None).await.text();
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2, "{bundle}");
    assert!(
        bundle.ends_with(&old),
        "the old CA is still trusted, after the new one"
    );
    let new = bundle.strip_suffix(&old).unwrap().to_owned();
    // The proxy re-reads the CA every few seconds; bounded wait for its first new leaf.
    let mut served = None;
    for _ in 0..40 {
        let r = over_tls(
            &s,
            &turn,
            client_trusting(&new, &[]),
            HOST,
            &request("GET", "/", ""),
        )
        .await;
        if let Ok(r) = r {
            served = Some(r.status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(served, Some(200), "leaves are minted under the new CA");
    let authority = format!("{HOST}:{}", s.origin.addr.port());
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    assert!(
        handshake(stream, client_trusting(&old, &[]), HOST)
            .await
            .is_err(),
        "the old CA no longer signs"
    );
    let key = std::fs::read_to_string(data.join("ca-key.pem")).unwrap_or_default();
    assert!(
        key.is_empty() || key.starts_with(&new),
        "the key file holds the new CA"
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
    let approvals = api
        .call(
            "GET",
            "/v1/chats/c/approvals",
            Some(RUNTIME),
            Some("u"),
            None,
        )
        .await
        .json();
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
    let approvals = api
        .call(
            "GET",
            "/v1/chats/c/approvals",
            Some(RUNTIME),
            Some("u"),
            None,
        )
        .await
        .json();
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
