//! End-to-end: the real binary on loopback. The core loop of the product: a sandbox's request
//! either reaches an approved host or is refused with a clear 403 that is recorded against the
//! turn before it is sent. This file: credentials, approved hosts forwarded and tunnelled,
//! restarts and startup errors; what is refused and recorded is `proxy_refusals.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

async fn setup() -> (Gate, Origin) {
    reachable(&[FILES]).await
}

#[tokio::test]
async fn missing_wrong_and_malformed_credentials_get_407() {
    let (g, o) = setup().await;
    let api = g.api();
    api.admin_site(FILES).await;
    let url = o.url(FILES, "/");
    let no_auth = proxy_raw(
        g.proxy(),
        &format!("GET {url} HTTP/1.1\r\nhost: {FILES}:{}\r\n\r\n", o.port()),
    )
    .await;
    assert_eq!(no_auth.status, 407);
    assert_eq!(
        no_auth.header("proxy-authenticate"),
        Some("Basic realm=\"egressgate\"")
    );
    let turn = g.turn("u1", "c1").await;
    let wrong = turn.forged("not-the-secret");
    assert_eq!(g.get(&wrong, &url).await.status, 407);
    let unknown = Turn {
        id: "t_x".into(),
        credential: "t_AAAAAAAAAAAAAAAAAAAAAA:whatever".into(),
    };
    assert_eq!(g.get(&unknown, &url).await.status, 407);
    let garbage = proxy_raw(
        g.proxy(),
        &format!("GET {url} HTTP/1.1\r\nproxy-authorization: Basic !!!\r\n\r\n"),
    )
    .await;
    assert_eq!(garbage.status, 407);
    assert!(
        o.requests().is_empty(),
        "the origin must not be reached without a credential"
    );
    assert_eq!(g.get(&turn, &url).await.status, 200);
}

/// The bench with [`FILES`] listed, and a turn on it that expires in one second.
async fn one_second_bench() -> (Gate, Origin, Turn) {
    let (g, o) = setup().await;
    g.api().admin_site(FILES).await;
    let turn = one_second_turn(&g.api()).await;
    (g, o, turn)
}

/// A turn that expires one second after it is opened.
async fn one_second_turn(api: &Api) -> Turn {
    let r = api
        .post("/v1/turns", RUNTIME, serde_json::json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "ttl_seconds": 1}))
        .await;
    assert_eq!(r.status, 201);
    let url = url::Url::parse(r.json()["proxy_url"].as_str().unwrap()).unwrap();
    Turn {
        id: url.username().into(),
        credential: format!("{}:{}", url.username(), url.password().unwrap()),
    }
}

/// A keep-alive connection remembers the credential it proved, but that memory never
/// outlives the turn, and a different credential on the same connection is checked afresh.
#[tokio::test]
async fn keep_alive_connection_neither_outlives_its_turn_nor_trusts_another_credential() {
    use tokio::io::AsyncWriteExt as _;
    let (g, o, turn) = one_second_bench().await;
    let forged = turn.forged("not-the-secret");
    let port = o.port();
    let get = |t: &Turn| {
        format!(
            "GET http://{FILES}:{port}/ HTTP/1.1\r\nhost: {FILES}:{port}\r\nproxy-authorization: {}\r\n\r\n",
            t.auth_header()
        )
    };
    let mut conn = tokio::net::TcpStream::connect(g.proxy()).await.unwrap();
    conn.write_all(get(&turn).as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut conn).await.unwrap().status, 200);
    conn.write_all(get(&forged).as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut conn).await.unwrap().status, 407);

    let mut conn = tokio::net::TcpStream::connect(g.proxy()).await.unwrap();
    conn.write_all(get(&turn).as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut conn).await.unwrap().status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // the turn's own expiry
    // The proxy's sweep closes the connection of an ended turn: the request meets either that
    // close (before any answer; the client's retry on a new connection is decided afresh)
    // or, when it lands before the sweep, a 407 on the connection itself.
    let on_same = async {
        conn.write_all(get(&turn).as_bytes()).await?;
        read_response(&mut conn).await
    };
    let status = match on_same.await {
        Ok(r) => r.status,
        Err(e) if is_cut(&e) => proxy_raw(g.proxy(), &get(&turn)).await.status,
        Err(e) => panic!("the expired turn's request on its keep-alive connection: {e}"),
    };
    assert_eq!(status, 407);
    assert_eq!(
        o.requests().len(),
        2,
        "only the two live requests reach the origin"
    );
}

#[tokio::test]
async fn expired_turn_gets_407() {
    let (g, o, turn) = one_second_bench().await;
    let target = o.url(FILES, "/");
    assert_eq!(g.get(&turn, &target).await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // the turn's own expiry
    assert_eq!(g.get(&turn, &target).await.status, 407);
}

#[tokio::test]
async fn approved_host_is_forwarded_without_proxy_credentials_or_hop_headers() {
    let (g, o) = setup().await;
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = g.turn("u1", "c1").await;
    let port = o.port();
    let raw = format!(
        "GET http://{FILES}:{port}/data.csv?x=1 HTTP/1.1\r\nhost: {FILES}:{port}\r\nproxy-authorization: {}\r\n\
         proxy-connection: keep-alive\r\nconnection: close, x-secret-hop\r\nx-secret-hop: 1\r\nx-end-to-end: kept\r\n\r\n",
        turn.auth_header()
    );
    let r = proxy_raw(g.proxy(), &raw).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "origin says hi");
    let seen = o.requests();
    assert_eq!(seen.len(), 1);
    let head = seen[0].to_ascii_lowercase();
    assert!(
        head.starts_with("get /data.csv?x=1 http/1.1"),
        "origin-form upstream: {head}"
    );
    assert!(
        !head.contains("proxy-authorization"),
        "credential leaked upstream: {head}"
    );
    assert!(
        !head.contains("proxy-connection") && !head.contains("x-secret-hop"),
        "hop-by-hop leaked: {head}"
    );
    assert!(head.contains("x-end-to-end: kept"));
    // Allowed traffic is summed in memory and written about once a second.
    let mut egress = serde_json::Value::Null;
    for _ in 0..40 {
        egress = api
            .get(&format!("/v1/turns/{}/egress", turn.id), RUNTIME)
            .await
            .json();
        if egress["egress"][0]["host"] == FILES {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(egress["egress"][0]["host"], FILES);
    assert_eq!(egress["egress"][0]["connections"], 1);
    // The bytes the response body really carried, counted as they passed.
    assert_eq!(egress["egress"][0]["bytes_down"], 14, "{egress}");
}

#[tokio::test]
async fn approved_host_is_reachable_by_connect_with_tls_end_to_end() {
    let pki = pki(&[FILES]);
    let o = tls_origin(&pki).await;
    let g = gate().reach_as(&o, &[FILES]).sites(&[FILES]).ready().await;
    let turn = g.turn("u1", "c1").await;
    let (head, stream) = connect(g.proxy(), &turn, &o.at(FILES)).await;
    assert_eq!(head.status, 200);
    let r = tls_get(stream, pki.client(), FILES).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "origin says hi");
}

#[tokio::test]
async fn restart_on_the_same_data_dir_keeps_turns_lists_and_refusals() {
    let o = origin().await;
    let port = o.port().to_string();
    let names = [FILES, "evil.example.com"];
    let g = gate().reach_as(&o, &names).sites(&[FILES]).ready().await;
    let turn = g.turn("u1", "c1").await;
    assert_eq!(
        proxy_get(
            g.proxy(),
            &turn,
            &format!("http://evil.example.com:{port}/")
        )
        .await
        .status,
        403
    );
    let dir = g.kill();
    let g = gate().data_dir(dir).reach_as(&o, &[FILES]).start();
    let api = g.api();
    assert_eq!(
        g.get(&turn, &format!("http://{FILES}:{port}/"))
            .await
            .status,
        200,
        "turn and list survive"
    );
    let rec = api.refusals(&turn).await;
    assert_eq!(rec["refusals"][0]["host"], "evil.example.com");
    let sites = api.get("/v1/admin/sites", ADMIN).await.json();
    assert_eq!(sites["sites"][0]["pattern"], FILES);
}

#[test]
fn bad_flags_and_unreachable_database_are_one_line_errors() {
    let bin = env!("CARGO_BIN_EXE_egressgate");
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["serve", "--proxy-listen", "not-an-address"],
        vec!["serve", "--allow-cidr", "10.0.0.0/99"],
        vec!["serve", "--resolve", "files.example.com"],
        vec!["serve", "--turn-ttl", "forever"],
        vec![
            "serve",
            "--database-url",
            "postgres://nobody:pw@127.0.0.1:1/none",
        ],
        vec!["serve", "--database-url", "mysql://x"],
        vec!["serve", "--config", "/nonexistent/egressgate.toml"],
        vec!["control", "--control-listen", "127.0.0.1:0"],
    ] {
        let out = std::process::Command::new(bin)
            .args(&args)
            .arg("--data-dir")
            .arg(dir.path().join("d"))
            .env("EGRESSGATE_DB_STATEMENT_TIMEOUT", "2s")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        let errors: Vec<_> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(
            errors.len(),
            1,
            "{args:?}: expected one error line, got {stderr}"
        );
        assert!(!stderr.contains(":pw@"), "password leaked: {stderr}");
    }
}

#[test]
fn config_file_env_and_flags_layer_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("eg.toml");
    let migrate = || {
        let mut c = egressgate();
        c.args(["migrate", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(dir.path().join("d"));
        c
    };
    std::fs::write(&cfg, "turn-ttl = \"nonsense\"\n").unwrap();
    // The file's bad value is reported...
    let e = cli_failure(&mut migrate());
    assert!(e.contains("turn-ttl"), "{e}");
    // ...unless the environment overrides it, and a flag overrides the environment.
    let out = migrate()
        .env("EGRESSGATE_TURN_TTL", "also-bad")
        .args(["--turn-ttl", "2h"])
        .output()
        .unwrap();
    assert_success(&out);
    std::fs::write(&cfg, "no-such-key = 1\n").unwrap();
    let e = cli_failure(&mut migrate());
    assert!(!e.is_empty(), "unknown keys are errors");
}
