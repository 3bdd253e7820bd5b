//! The deployment CA's life on the real binary, on both stores: who makes it (the proxy at
//! start and `egressgate ca print`, never `GET /v1/ca.pem`), how long it lives
//! (`--ca-lifetime`), its successor minted before it ends with both in the bundle for the
//! overlap (`--ca-overlap`), and leaves that never outlive their CA.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::ca::{Db, certs, one_line_failure, presented, valid_in, wait_for_successor};
use support::inspect::*;
use support::*;

#[tokio::test]
async fn the_ca_endpoint_never_makes_a_ca_it_answers_404_until_the_proxy_or_ca_print_does() {
    let control = gate()
        .subcommand("control")
        .args(&["--proxy-public-url", "127.0.0.1:3128"])
        .start();
    let api = control.api();
    let db = Db::of(control.data_dir.path());
    for _ in 0..2 {
        let r = api.call("GET", "/v1/ca.pem", None, None, None).await;
        assert_eq!(r.status, 404, "{}", r.text());
        assert_eq!(r.json()["error"]["code"], "CA_NOT_FOUND", "{}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("ca print"), "names the way out: {message}");
    }
    assert!(
        !db.data.join("ca-key.pem").exists(),
        "the endpoint wrote no key file"
    );
    if db.url.is_some() {
        assert_eq!(
            db.sql("SELECT count(*) FROM deployment_ca"),
            "0",
            "nor a row"
        );
    }
    // `egressgate ca print` makes it, as documented; the endpoint then serves the same.
    let out = db.egressgate(&["ca", "print"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(certs(&printed).len(), 1, "{printed}");
    let r = api.call("GET", "/v1/ca.pem", None, None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), printed);
}

#[tokio::test]
async fn a_ca_lives_its_lifetime_and_its_successor_is_minted_before_it_ends() {
    // Due for renewal once less than 20 s of its 30 s remain: the proxy's CA poll (every few
    // seconds) mints the successor about 10 s in.
    let s = setup(&["--ca-lifetime", "30s", "--ca-overlap", "20s"]).await;
    let started = Instant::now();
    let api = s.gate.api();
    let first = certs(&s.ca_pem);
    assert_eq!(first.len(), 1);
    assert!(valid_in(&first[0], 20), "the CA is valid now");
    assert!(
        !valid_in(&first[0], 35),
        "for its lifetime only, not ten years"
    );
    add_site(&api, serde_json::json!({"pattern": HOST, "inspect": true})).await;
    let turn = api.turn("u", "c", &[]).await;
    let authority = format!("{HOST}:{}", s.origin.addr.port());

    // A leaf is never valid past its CA (leaves otherwise live 24 hours).
    let bundle = api.call("GET", "/v1/ca.pem", None, None, None).await.text();
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    let tls = handshake(stream, client_trusting(&bundle, &[]), HOST)
        .await
        .unwrap();
    let chain = presented(&tls);
    assert!(valid_in(&chain[0], 1), "the leaf is valid now");
    assert!(!valid_in(&chain[0], 31), "but not past its CA's end");

    // Bounded wait for the successor: the bundle then holds it first and the old CA after.
    let renewed = wait_for_successor(&s.gate, Duration::from_secs(28)).await;
    let now_trusted = certs(&renewed);
    assert_ne!(now_trusted[0], first[0], "a new CA signs");
    assert!(now_trusted.contains(&first[0]), "the old one stays trusted");
    let (_, stream) = connect(s.gate.proxy(), &turn, &authority).await;
    let newest = support::pem_of(&now_trusted[0]);
    let tls = handshake(stream, client_trusting(&newest, &[]), HOST).await;
    assert!(tls.is_ok(), "leaves are minted under the successor");

    // Once the old CA has ended it leaves the bundle.
    let mut dropped = false;
    while started.elapsed() < Duration::from_secs(45) {
        let bundle = api.call("GET", "/v1/ca.pem", None, None, None).await.text();
        if !valid_in(&first[0], 0) && !certs(&bundle).contains(&first[0]) {
            dropped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(dropped, "the old CA is no longer trusted after its end");
}

#[test]
fn bad_ca_settings_are_one_clear_line_and_nothing_starts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db {
        data: dir.path().join("data"),
        url: None,
    };
    let e = one_line_failure(&db.egressgate(&["serve", "--ca-lifetime", "soon"], &[]));
    assert!(e.contains("--ca-lifetime") && e.contains("soon"), "{e}");
    let e = one_line_failure(&db.egressgate(
        &["serve", "--ca-lifetime", "30d", "--ca-overlap", "30d"],
        &[],
    ));
    assert!(
        e.contains("--ca-overlap") && e.contains("--ca-lifetime"),
        "{e}"
    );
    let e =
        one_line_failure(&db.egressgate(&["serve"], &[("EGRESSGATE_CA_SEAL_KEY", "not a key")]));
    assert!(e.contains("EGRESSGATE_CA_SEAL_KEY"), "{e}");
    assert!(!e.contains("not a key"), "the key is never echoed: {e}");
    let e = one_line_failure(&db.egressgate(
        &["serve", "--ca-seal-key-file", "/nonexistent/seal.key"],
        &[],
    ));
    assert!(
        e.contains("--ca-seal-key-file") && e.contains("/nonexistent/seal.key"),
        "{e}"
    );
    assert!(
        !db.data.join("ca-key.pem").exists(),
        "no CA was made by a failed start"
    );
}
