//! `--ca-name-constraints true`: the deployment CA permits exactly the inspected names, so
//! even its key in a thief's hands mints nothing a client accepts for any other host. Checked
//! with real verifiers (rustls' webpki in-process and `openssl verify`) on leaves signed with
//! the CA's own key, on both stores; and an inspected set that grows is a rotation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::ca::{Db, certs, dns, mint_leaf, openssl_verify, wait_for_successor, webpki_verify};
use support::inspect::*;

/// Whether both verifiers accept a leaf for `name` signed with `ca`'s key, trusting `bundle`;
/// panics when they disagree.
fn accepted(bundle: &str, ca: &(String, String), name: &str) -> bool {
    let leaf = mint_leaf(&ca.0, &ca.1, dns(name));
    let webpki = webpki_verify(bundle, &leaf, name);
    let (openssl, said) = openssl_verify(bundle, &leaf);
    assert_eq!(
        webpki.is_ok(),
        openssl,
        "{name}: webpki {webpki:?}, openssl {said}"
    );
    if let Err(e) = &webpki {
        assert!(e.to_lowercase().contains("name"), "{name}: {e}");
    }
    openssl
}

#[tokio::test]
async fn a_constrained_ca_signs_only_the_inspected_names_and_a_new_one_is_a_rotation() {
    let s = setup(&[
        "--ca-name-constraints",
        "true",
        "--inspect",
        HOST,
        "--registry",
        "npm",
    ])
    .await;
    let api = s.gate.api();
    let db = Db::of(s.gate.data_dir.path());
    let ca = db.signing_ca();
    assert_eq!(ca.0, s.ca_pem, "the key read is the signing CA's");

    // What the proxy inspects verifies, through the proxy too.
    let turn = api.turn("u", "c", &[HOST]).await;
    let r = over_tls(
        &s,
        &turn,
        client_trusting(&s.ca_pem, &[]),
        HOST,
        &request("GET", "/", ""),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(accepted(&s.ca_pem, &ca, HOST));
    assert!(accepted(&s.ca_pem, &ca, "registry.npmjs.org"), "a registry");
    // Everything else is refused by the verifiers, whoever holds the key.
    for outside in [
        "bank.example.net",
        "example.com",
        "sub.files.example.com",
        "registry.npmjs.org.evil.test",
    ] {
        assert!(!accepted(&s.ca_pem, &ca, outside), "{outside}");
    }
    let ip = mint_leaf(
        &ca.0,
        &ca.1,
        rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()),
    );
    assert!(
        webpki_verify(&s.ca_pem, &ip, "127.0.0.1").is_err(),
        "no address either"
    );

    // An administrator inspects one more name: the CA no longer covers the set, so the proxy
    // mints a successor for the grown set (a rotation: the old CA stays in the bundle).
    add_site(
        &api,
        serde_json::json!({"pattern": "*.example.org", "inspect": true}),
    )
    .await;
    let bundle = wait_for_successor(&s.gate, Duration::from_secs(20)).await;
    let trusted = certs(&bundle);
    assert_eq!(trusted.len(), 2, "{bundle}");
    assert_eq!(trusted[1], certs(&s.ca_pem)[0], "the old CA after the new");
    let grown = db.signing_ca();
    assert_eq!(certs(&grown.0), trusted[..1], "the new one signs");
    let newest = support::pem_of(&trusted[0]);
    assert!(accepted(&newest, &grown, "git.example.org"), "the new name");
    assert!(accepted(&newest, &grown, HOST), "and the old ones");
    assert!(
        !accepted(&newest, &grown, "example.org"),
        "a wildcard's apex is not in it"
    );
    assert!(!accepted(&newest, &grown, "bank.example.net"));
}
