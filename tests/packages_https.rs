//! Packages over HTTPS, as installers really fetch them: `pip` against `pypiserver` behind a
//! TLS front, through a tunnel the proxy inspects because the host belongs to an enabled
//! registry. pip trusts only the deployment CA (from `/v1/ca.pem`), the proxy verifies the
//! front against `--upstream-ca`, and every request inside TLS is judged by its package, a
//! refused wheel's own dependencies included, so one card still covers one install.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use support::registry::{self, Server};
use support::tls_front::{TlsFront, tls_front};
use support::{Api, Gate, Turn, assert_field_starts};

const INDEX: &str = "pypi.test";

/// pypiserver with the test's wheels behind a TLS front for [`INDEX`], a gate that knows it
/// as a PyPI mirror and trusts the front's CA upstream, the deployment CA's PEM file, and the
/// directory they and every install work in. Fields drop in order: the directory last.
struct Setup {
    _server: Server,
    front: TlsFront,
    gate: Gate,
    deployment_ca: PathBuf,
    dir: TempDir,
}

/// The [`Setup`], its control API, and a fresh turn (`u`, `c`) that every row installs in.
async fn setup() -> Option<(Setup, Api, Turn)> {
    if !registry::pip_tools() {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    registry::write_wheel(&wheels, "alpha", "1.0", &["beta>=1.0"]);
    registry::write_wheel(&wheels, "beta", "1.0", &[]);
    registry::write_wheel(&wheels, "secret-thing", "1.0", &[]);
    let server = registry::pypiserver(&wheels);
    let front = tls_front(&[INDEX], server.port, dir);
    let gate = registry::mirror_gate("pypi", INDEX, front.port)
        .args(&["--upstream-ca", front.ca_file.to_str().unwrap()])
        .start();
    let api = gate.api();
    let r = api.call("GET", "/v1/ca.pem", None, None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let deployment_ca = dir.join("deployment-ca.pem");
    std::fs::write(&deployment_ca, r.text()).unwrap();
    let turn = api.turn("u", "c", &[]).await;
    let s = Setup {
        _server: server,
        front,
        gate,
        deployment_ca,
        dir: tmp,
    };
    Some((s, api, turn))
}

impl Setup {
    /// `pip install` through the gate, trusting the deployment CA (as a sandbox does).
    fn pip(&self, turn: &Turn, specs: &[&str]) -> std::process::Output {
        self.pip_trusting(&self.deployment_ca, turn, specs)
    }

    /// `pip install` through the gate, trusting only the CA in `cert`.
    fn pip_trusting(&self, cert: &Path, turn: &Turn, specs: &[&str]) -> std::process::Output {
        let index = registry::Index {
            url: format!("https://{INDEX}:{}/simple/", self.front.port),
            host: INDEX,
            cert: Some(cert.to_owned()),
        };
        registry::pip_install_from(self.gate.proxy(), turn, &index, self.dir.path(), specs)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn over_https_a_package_and_its_dependency_install_after_one_card_and_nothing_else_does() {
    let Some((s, api, turn)) = setup().await else {
        return;
    };

    let out = s.pip(&turn, &["alpha"]);
    assert!(!out.status.success(), "alpha is not approved");
    // Inside TLS the proxy saw the wheel request, refused it by package, and read the refused
    // wheel's METADATA over verified TLS to name its dependency.
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        ["alpha", "beta"]
    );
    let rec = api.refusals(&turn).await;
    let rows = rec["refusals"].as_array().unwrap();
    let alpha = rows.iter().find(|r| r["package"] == "alpha").unwrap();
    assert_eq!(alpha["host"], INDEX);
    assert_field_starts(alpha, "url", &format!("https://{INDEX}:"));
    assert!(
        rows.iter().all(|r| r["reason"] == "package_not_approved"),
        "the index host needs no site approval: {rec}"
    );

    let (card, id, secret) = registry::ask_packages(&api, &turn, &[]).await;
    assert_eq!(
        card["packages"],
        serde_json::json!(["alpha", "beta"]),
        "{card}"
    );
    support::approve_card(&api, &id, &secret).await;

    let out = s.pip(&turn, &["alpha"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("alpha-1.0") && text.contains("beta-1.0"),
        "{text}"
    );

    // What the card did not name stays shut, inside the same approved index.
    let out = s.pip(&turn, &["secret-thing"]);
    assert!(!out.status.success(), "secret-thing was on no card");
    assert!(registry::was_refused(&api, &turn, "secret-thing").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn over_https_an_installer_that_does_not_trust_the_deployment_ca_gets_nothing() {
    let Some((s, api, turn)) = setup().await else {
        return;
    };
    // pip trusting only the front's own CA: the proxy's leaf does not verify, so nothing
    // installs and no request inside TLS was ever judged (nothing recorded as a package).
    let out = s.pip_trusting(&s.front.ca_file, &turn, &["beta"]);
    assert!(!out.status.success());
    assert_eq!(
        registry::refused_packages(&api, &turn).await,
        Vec::<String>::new()
    );
}
