//! The proxy's own TLS listener (the credential never crosses a network in clear) and the
//! admin CLI (what the admin API does, for people who keep lists in scripts).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use support::*;
use tokio::io::AsyncWriteExt as _;

const FILES: &str = "files.example.com";

#[tokio::test]
async fn the_proxy_listener_speaks_tls() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, der) = Pki::write_pem(&["proxy.example.com"], dir.path());
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &o.port().to_string(),
        ])
        .args(&[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = g.turn("u", "c").await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(g.proxy()).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("proxy.example.com").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(name, tcp)
        .await
        .unwrap();
    let req = format!(
        "GET http://{FILES}:{p}/ HTTP/1.1\r\nhost: {FILES}:{p}\r\nproxy-authorization: {}\r\nconnection: close\r\n\r\n",
        turn.auth_header(),
        p = o.port()
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    let r = read_response(&mut tls).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "origin says hi");

    // Plain HTTP to the TLS listener is not served.
    let raw = format!(
        "GET http://{FILES}/ HTTP/1.1\r\nproxy-authorization: {}\r\n\r\n",
        turn.auth_header()
    );
    let plain = try_proxy_raw(g.proxy(), raw.as_bytes(), 5).await;
    assert!(
        plain.is_err() || plain.is_ok_and(|r| r.status != 200),
        "a cleartext request must not be proxied by the TLS listener"
    );
}

fn admin(args: &[&str], data: &std::path::Path) -> std::process::Output {
    egressgate()
        .arg("admin")
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap()
}

/// A fresh data directory, migrated: (the temp dir that holds it, its path).
fn migrated_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    migrated(&data);
    (dir, data)
}

/// `egressgate migrate` on a fresh data dir: it creates the database `admin` then keeps.
fn migrated(data: &std::path::Path) {
    let migrated = egressgate()
        .args(["migrate", "--data-dir"])
        .arg(data)
        .env_remove("DATABASE_URL")
        .status()
        .unwrap();
    assert!(
        migrated.success(),
        "migrate creates the database admin then keeps"
    );
}

#[test]
fn admin_cli_keeps_the_lists_like_the_api() {
    let (_dir, data) = migrated_dir();
    let out = admin(
        &["sites", "add", "*.Example.COM.", "--note", "docs mirror"],
        &data,
    );
    assert_success(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "added *.example.com\n"
    );
    let out = admin(&["sites", "add", "*.example.com"], &data);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "already present *.example.com\n"
    );
    let out = admin(&["sites", "add", "*.co.uk"], &data);
    assert!(!out.status.success(), "a public-suffix wildcard is refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("public suffix"));
    let out = admin(&["packages", "add", "Requests"], &data);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "added requests\n");
    let out = admin(&["sites", "list"], &data);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "*.example.com\tdocs mirror\n"
    );
    let out = admin(&["sites", "remove", "*.example.com"], &data);
    assert!(out.status.success());
    let out = admin(&["sites", "remove", "*.example.com"], &data);
    assert!(
        !out.status.success(),
        "removing what is not there is an error"
    );
    assert_eq!(
        String::from_utf8_lossy(&admin(&["sites", "list"], &data).stdout),
        ""
    );
    assert_eq!(
        String::from_utf8_lossy(&admin(&["packages", "list"], &data).stdout),
        "requests\n"
    );
}

/// A loopback DNS server answering every A query with 127.0.0.1 (and counting queries).
async fn fake_dns() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let queries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let q2 = queries.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        loop {
            let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
                return;
            };
            if n < 12 {
                continue;
            }
            q2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // Question ends after the name's zero label plus type and class.
            let mut i = 12;
            while i < n && buf[i] != 0 {
                i += usize::from(buf[i]) + 1;
            }
            let qend = (i + 5).min(n);
            let qtype = u16::from_be_bytes([buf[i + 1], buf[i + 2]]);
            let mut resp = Vec::with_capacity(qend + 16);
            resp.extend_from_slice(&buf[..2]); // id
            resp.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(qtype == 1), 0, 0, 0, 0]);
            resp.extend_from_slice(&buf[12..qend]);
            if qtype == 1 {
                resp.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            }
            let _ = sock.send_to(&resp, peer).await;
        }
    });
    (addr, queries)
}

#[tokio::test]
async fn configured_upstream_dns_is_used_and_its_answers_are_vetted() {
    let o = origin().await;
    let (dns, queries) = fake_dns().await;
    let port = o.port().to_string();
    let url = format!("http://{FILES}:{port}/");
    // Without an allowed range the loopback answer is refused as private_address...
    let g = gate()
        .args(&["--dns-server", &dns.to_string(), "--allow-port", &port])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = g.turn("u", "c").await;
    let r = g.get(&turn, &url).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("x-egress-refused"), Some("private_address"));
    assert!(
        queries.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the configured server was asked"
    );
    drop(g);
    // ...and with it, the answer is dialled.
    let g = gate()
        .args(&[
            "--dns-server",
            &dns.to_string(),
            "--allow-port",
            &port,
            "--allow-cidr",
            "127.0.0.0/8",
        ])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = g.turn("u", "c").await;
    assert_eq!(g.get(&turn, &url).await.status, 200);
    assert_eq!(o.requests().len(), 1);
}

#[test]
fn admin_cli_manages_named_tokens() {
    let (_dir, data) = migrated_dir();
    let out = admin(
        &[
            "tokens",
            "add",
            "ci",
            "--scope",
            "turns",
            "--scope",
            "cards:read",
            "--ttl",
            "30d",
        ],
        &data,
    );
    assert_success(&out);
    let secret = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(secret.len() >= 43, "the secret alone on stdout: {secret:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("added token ci (turns,cards:read), expires 20"),
        "{stderr}"
    );
    assert!(!stderr.contains(&secret));
    let out = admin(&["tokens", "add", "ci", "--scope", "admin"], &data);
    assert!(!out.status.success(), "a taken name is refused");
    for bad in [
        &["tokens", "add", "x", "--scope", "root"][..],
        &["tokens", "add", "a b", "--scope", "turns"][..],
        &["tokens", "add", "x"][..],
        &["tokens", "add", "x", "--scope", "turns", "--ttl", "soon"][..],
    ] {
        let out = admin(bad, &data);
        assert!(!out.status.success(), "{bad:?} accepted");
    }
    let out = admin(&["tokens", "list"], &data);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        listed.starts_with("ci\tturns,cards:read\texpires 20"),
        "{listed}"
    );
    assert_eq!(listed.lines().count(), 1);
    assert!(!listed.contains(&secret));
    let out = admin(&["tokens", "remove", "ci"], &data);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "removed ci\n");
    assert!(!admin(&["tokens", "remove", "ci"], &data).status.success());
    assert_eq!(
        String::from_utf8_lossy(&admin(&["tokens", "list"], &data).stdout),
        ""
    );
}
