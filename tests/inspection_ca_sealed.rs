//! On PostgreSQL the deployment CA's key is kept only sealed (AES-256-GCM under the seal key
//! from `EGRESSGATE_CA_SEAL_KEY` or `--ca-seal-key-file`): the row, read with SQL, holds no
//! PEM key; a process without the seal key does not inspect (one clear error line) and writes
//! nothing; a plaintext key left by an older release is refused without the key and sealed
//! at the first start with it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::ca::{Db, SEAL_KEY, certs, one_line_failure};
use support::inspect::*;
use support::pg::PgCluster;
use support::*;
use tokio::io::AsyncWriteExt as _;

/// A PostgreSQL of its own and a TLS origin for [`HOST`] that gates on it inspect.
struct Bench {
    pg: PgCluster,
    origin: Origin,
    upstream_ca: tempfile::TempDir,
}

impl Bench {
    async fn new() -> Self {
        let origin_pki = pki(&[HOST]);
        let origin = tls_origin(&origin_pki).await;
        let upstream_ca = tempfile::tempdir().unwrap();
        std::fs::write(
            upstream_ca.path().join("ca.pem"),
            pem_of(&origin_pki.ca_der),
        )
        .unwrap();
        Self {
            pg: PgCluster::start(),
            origin,
            upstream_ca,
        }
    }

    fn db(&self) -> Db {
        Db {
            data: self.upstream_ca.path().join("data"),
            url: Some(self.pg.url()),
        }
    }

    fn gate(&self, sub: &'static str, env: &[(&str, &str)]) -> Gate {
        let port = self.origin.addr.port().to_string();
        let ca = self.upstream_ca.path().join("ca.pem");
        let mut g = gate()
            .subcommand(sub)
            .database(&self.pg.url())
            .resolve(HOST, "127.0.0.1")
            .args(&["--allow-cidr", "127.0.0.0/8", "--allow-port", &port])
            .args(&["--upstream-ca", ca.to_str().unwrap(), "--inspect", HOST]);
        for (k, v) in env {
            g = g.env(k, v);
        }
        g.start()
    }

    /// Whether `proxy` ends TLS for [`HOST`] with a leaf `bundle` verifies and serves `GET /`.
    async fn inspects(&self, proxy: &Gate, api: &Api, bundle: &str) -> bool {
        let turn = api.turn("u", "c", &[HOST]).await;
        let authority = format!("{HOST}:{}", self.origin.addr.port());
        let (r, stream) = connect(proxy.proxy(), &turn, &authority).await;
        assert_eq!(r.status, 200);
        let Ok(mut tls) = handshake(stream, client_trusting(bundle, &[]), HOST).await else {
            return false;
        };
        tls.write_all(request("GET", "/", "").as_bytes())
            .await
            .unwrap();
        read_response(&mut tls).await.unwrap().status == 200
    }
}

/// Every column of every `deployment_ca` row as text.
fn all_rows(db: &Db) -> String {
    db.sql("SELECT coalesce(string_agg(t::text, ' '), '') FROM deployment_ca t")
}

#[tokio::test]
async fn the_postgresql_row_holds_no_pem_key_and_a_process_without_the_seal_key_does_not_inspect() {
    let b = Bench::new().await;
    let db = b.db();
    let g = b.gate("serve", &[]);
    let api = g.api();
    let rows = all_rows(&db);
    assert!(
        rows.contains("BEGIN CERTIFICATE"),
        "the certificate is public: {rows}"
    );
    assert!(
        !rows.contains("PRIVATE KEY"),
        "no PEM key in the database: {rows}"
    );
    let sealed = db.sql("SELECT key_pem FROM deployment_ca WHERE trusted_until IS NULL");
    assert!(!sealed.is_empty() && !sealed.contains("-----"), "{sealed}");
    let bundle = api.call("GET", "/v1/ca.pem", None, None, None).await.text();
    assert!(b.inspects(&g, &api, &bundle).await, "the sealed key signs");

    // Without the seal key, or with another one: one clear line, no inspection (the origin's
    // own certificate is presented, not a leaf of the deployment CA), nothing written.
    for (key, why) in [
        ("", "EGRESSGATE_CA_SEAL_KEY"),
        (SEAL_KEY_2, "does not open"),
    ] {
        let p = b.gate("proxy", &[("EGRESSGATE_CA_SEAL_KEY", key)]);
        let line = p.log_line(&["inspection is off", why]).await;
        assert!(line.is_some(), "{:?}", p.log_lines(""));
        assert_eq!(p.log_lines("inspection is off").len(), 1);
        assert!(!p.log_lines("").iter().any(|l| l.contains("PRIVATE KEY")));
        assert!(
            !b.inspects(&p, &api, &bundle).await,
            "{key:?}: not inspected"
        );
    }
    assert!(!all_rows(&db).contains("PRIVATE KEY"));
    assert_eq!(db.sql("SELECT count(*) FROM deployment_ca"), "1");

    // `ca rotate` needs the seal key to keep the new key, and says so in one line.
    let e = one_line_failure(&db.egressgate(&["ca", "rotate"], &[("EGRESSGATE_CA_SEAL_KEY", "")]));
    assert!(
        e.contains("EGRESSGATE_CA_SEAL_KEY") && e.contains("--ca-seal-key-file"),
        "{e}"
    );
    assert_eq!(
        db.sql("SELECT count(*) FROM deployment_ca"),
        "1",
        "nothing written"
    );
    // The seal key may come from a file as well.
    let key_file = b.upstream_ca.path().join("seal.key");
    std::fs::write(&key_file, format!("{SEAL_KEY}\n")).unwrap();
    let out = db.egressgate(
        &[
            "ca",
            "rotate",
            "--ca-seal-key-file",
            key_file.to_str().unwrap(),
        ],
        &[("EGRESSGATE_CA_SEAL_KEY", "")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(db.sql("SELECT count(*) FROM deployment_ca"), "2");
    assert!(
        !all_rows(&db).contains("PRIVATE KEY"),
        "the new key is sealed too"
    );
}

/// Another valid seal key (32 bytes, base64), not the one the CA was sealed with.
const SEAL_KEY_2: &str = "YW5vdGhlci1zZWFsLWtleS1vZi0zMi1ieXRlcy0hISE=";

#[tokio::test]
async fn a_plaintext_key_of_an_older_release_is_refused_without_a_seal_key_and_sealed_with_one() {
    let b = Bench::new().await;
    let db = b.db();
    let out = db.egressgate(&["migrate"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The row an older release wrote: a ten-year CA, its key in clear.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "egressgate deployment CA");
    p.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let legacy = p.self_signed(&key).unwrap().pem();
    db.sql(&format!(
        "INSERT INTO deployment_ca (id, cert_pem, key_pem, created_at) \
         VALUES (1, $pem${legacy}$pem$, $pem${}$pem$, 0)",
        key.serialize_pem()
    ));

    let g = b.gate("serve", &[("EGRESSGATE_CA_SEAL_KEY", "")]);
    assert!(
        g.log_line(&["inspection is off", "in clear"])
            .await
            .is_some(),
        "{:?}",
        g.log_lines("")
    );
    assert!(all_rows(&db).contains("PRIVATE KEY"), "left as it was");
    assert_eq!(db.sql("SELECT count(*) FROM deployment_ca"), "1");
    drop(g);

    // With the seal key nothing stays in clear: the old CA (ten years is past the lifetime)
    // is replaced by a sealed successor and stays trusted for the overlap, without its key.
    let g = b.gate("serve", &[]);
    let rows = all_rows(&db);
    assert!(!rows.contains("PRIVATE KEY"), "{rows}");
    let bundle = g
        .api()
        .call("GET", "/v1/ca.pem", None, None, None)
        .await
        .text();
    let trusted = certs(&bundle);
    assert_eq!(trusted.len(), 2, "{bundle}");
    assert_eq!(trusted[1], certs(&legacy)[0], "the old CA is still trusted");
    assert!(b.inspects(&g, &g.api(), &bundle).await);
}
