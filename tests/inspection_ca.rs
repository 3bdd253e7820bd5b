//! The deployment CA across processes: two proxies on one PostgreSQL mint under one CA, and
//! `egressgate ca rotate` reaches a running proxy while the old CA stays trusted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::ca::one_line_failure;
use support::inspect::*;
use support::*;
use tokio::io::AsyncWriteExt as _;

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
    let db = support::ca::Db::of(s.gate.data_dir.path());
    let data = db.data.clone();
    let out = db.egressgate(&["ca", "rotate", "--overlap", "1h"], &[]);
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

fn egressgate(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_egressgate"));
    for (k, _) in std::env::vars() {
        if k.starts_with("EGRESSGATE_") || k == "DATABASE_URL" {
            c.env_remove(k);
        }
    }
    c.args(args).arg("--data-dir").arg(dir).output().unwrap()
}

#[test]
fn bad_inspection_flags_are_one_clear_line_and_nothing_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let e = one_line_failure(&egressgate(&["serve", "--inspect", "*.com"], &data));
    assert!(e.contains("--inspect") && e.contains("*.com"), "{e}");
    let e = one_line_failure(&egressgate(
        &["serve", "--upstream-ca", "/nonexistent/ca.pem"],
        &data,
    ));
    assert!(
        e.contains("--upstream-ca") && e.contains("/nonexistent/ca.pem"),
        "{e}"
    );
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let e = one_line_failure(&egressgate(
        &["serve", "--upstream-ca", not_pem.to_str().unwrap()],
        &data,
    ));
    assert!(e.contains("no PEM certificate"), "{e}");
    let e = one_line_failure(&egressgate(&["ca", "rotate", "--overlap", "soon"], &data));
    assert!(e.contains("--overlap"), "{e}");
    assert!(
        !data.join("ca-key.pem").exists(),
        "no CA was made by a failed start"
    );
}
