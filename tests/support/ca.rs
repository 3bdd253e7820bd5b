//! The deployment CA seen from outside: where a gate keeps it (the key file of a SQLite data
//! directory, the sealed `deployment_ca` row of PostgreSQL), the `egressgate ca` subcommands
//! on the same store, leaves a leaked CA key could mint, and what real verifiers (rustls'
//! webpki in-process, `openssl verify`) make of them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// The seal key the harness gives every gate on PostgreSQL (32 bytes, base64).
pub const SEAL_KEY: &str = "ZWdyZXNzZ2F0ZS10ZXN0LXNlYWwta2V5LTMyYnl0ZXM=";

/// Where one gate keeps its data: a data directory and, on PostgreSQL, its database.
#[derive(Clone, Debug)]
pub struct Db {
    pub data: PathBuf,
    pub url: Option<String>,
}

impl Db {
    /// The store of a harness gate's data directory (`Gate::data_dir`): PostgreSQL when the
    /// suite runs on it, else the embedded SQLite in `DIR/data`.
    pub fn of(data_dir: &Path) -> Self {
        Self {
            data: data_dir.join("data"),
            url: super::postgres_database_for(data_dir),
        }
    }

    /// The same flags `egressgate serve` was given for this store.
    pub fn flags(&self) -> Vec<String> {
        let mut f = vec!["--data-dir".to_owned(), self.data.display().to_string()];
        if let Some(u) = &self.url {
            f.extend(["--database-url".to_owned(), u.clone()]);
        }
        f
    }

    /// `egressgate ARGS… --data-dir … [--database-url …]` with a clean environment, the
    /// harness's seal key on PostgreSQL, then `env`.
    pub fn egressgate(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_egressgate"));
        for (k, _) in std::env::vars() {
            if k.starts_with("EGRESSGATE_") || k == "DATABASE_URL" {
                c.env_remove(k);
            }
        }
        if self.url.is_some() {
            c.env("EGRESSGATE_CA_SEAL_KEY", SEAL_KEY);
        }
        c.args(args).args(self.flags()).envs(env.iter().copied());
        c.output().unwrap()
    }

    /// One SQL answer (`psql -At`) on PostgreSQL.
    pub fn sql(&self, query: &str) -> String {
        let url = self.url.as_deref().expect("a PostgreSQL store");
        psql(url, query)
    }

    /// The signing CA's certificate and key as a thief would have them: the key file on
    /// SQLite, the row (opened with the harness's seal key) on PostgreSQL.
    pub fn signing_ca(&self) -> (String, String) {
        match &self.url {
            None => {
                let text = std::fs::read_to_string(self.data.join("ca-key.pem")).unwrap();
                let at = text.find("-----BEGIN PRIVATE KEY").unwrap();
                (text[..at].to_owned(), text[at..].to_owned())
            }
            Some(_) => {
                let row = self.sql(
                    "SELECT id, cert_pem, key_pem FROM deployment_ca \
                     WHERE trusted_until IS NULL ORDER BY id DESC LIMIT 1",
                );
                let mut parts = row.splitn(3, '|');
                let id: i64 = parts.next().unwrap().parse().unwrap();
                let cert = parts.next().unwrap().to_owned();
                let sealed = parts.next().unwrap().trim();
                let key = egressgate_store::ca::SealKey::from_base64(SEAL_KEY)
                    .unwrap()
                    .open(id, sealed)
                    .unwrap();
                (format!("{}\n", cert.trim_end()), key)
            }
        }
    }
}

/// One SQL answer (`psql -At`, `|` between columns) from the database at `url`.
pub fn psql(url: &str, query: &str) -> String {
    let out = Command::new("psql")
        .arg(url)
        .args(["-At", "-v", "ON_ERROR_STOP=1", "-c", query])
        .output()
        .unwrap();
    super::stdout_of(&out, query).trim_end().to_owned()
}

/// The certificates of a PEM bundle, in order.
pub fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .map(Result::unwrap)
        .collect()
}

/// A server leaf for `san`, signed with the CA whose certificate and key are given: what
/// anyone holding the CA's key could present.
pub fn mint_leaf(ca_cert: &str, ca_key: &str, san: rcgen::SanType) -> CertificateDer<'static> {
    let key = rcgen::KeyPair::from_pem(ca_key).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(ca_cert, key).unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.subject_alt_names = vec![san];
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    p.signed_by(&leaf_key, &issuer).unwrap().der().clone()
}

/// A DNS SAN for `name`.
pub fn dns(name: &str) -> rcgen::SanType {
    rcgen::SanType::DnsName(name.try_into().unwrap())
}

/// What rustls' webpki verifier says of `leaf` for `name` with only `ca_pem`'s certificates
/// as roots (as a client trusting the deployment bundle would).
pub fn webpki_verify(ca_pem: &str, leaf: &CertificateDer<'_>, name: &str) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca_pem) {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    verifier
        .verify_server_cert(leaf, &[], &name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// What `openssl verify` says of `leaf` against `ca_pem` (its exit status and output).
pub fn openssl_verify(ca_pem: &str, leaf: &CertificateDer<'_>) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = (dir.path().join("ca.pem"), dir.path().join("leaf.pem"));
    std::fs::write(&ca, ca_pem).unwrap();
    std::fs::write(&cert, super::pem_of(leaf)).unwrap();
    let out = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(&ca)
        .arg(&cert)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Whether `cert` is still valid `secs` seconds from now (`openssl x509 -checkend`).
pub fn valid_in(cert: &CertificateDer<'_>, secs: u64) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cert.pem");
    std::fs::write(&path, super::pem_of(cert)).unwrap();
    Command::new("openssl")
        .args(["x509", "-noout", "-checkend", &secs.to_string(), "-in"])
        .arg(&path)
        .output()
        .unwrap()
        .status
        .success()
}

/// The chain a TLS server presented (leaf first).
pub fn presented<S>(tls: &tokio_rustls::client::TlsStream<S>) -> Vec<CertificateDer<'static>> {
    tls.get_ref()
        .1
        .peer_certificates()
        .unwrap()
        .iter()
        .map(|c| c.clone().into_owned())
        .collect()
}

/// A refused start or subcommand: one line naming what was written, a non-zero exit, no panic.
pub fn one_line_failure(out: &Output) -> String {
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "must fail: {e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

/// Waits (bounded by `within`) for the deployment CA's successor: `GET /v1/ca.pem` then holds
/// two certificates or more, the new one first, and the gate has logged the renewal. Returns
/// that bundle.
pub async fn wait_for_successor(gate: &super::Gate, within: Duration) -> String {
    let started = Instant::now();
    loop {
        let bundle = gate
            .api()
            .call("GET", "/v1/ca.pem", None, None, None)
            .await
            .text();
        if certs(&bundle).len() >= 2 {
            let logged = gate.log_line(&["deployment CA", "renewed"]).await;
            assert!(logged.is_some(), "the renewal is logged");
            return bundle;
        }
        assert!(started.elapsed() < within, "no successor within {within:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
