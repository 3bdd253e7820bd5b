//! The sandbox and the deployment CA: the command gets one bundle (system roots + the CA),
//! the usual trust variables point at it, and when isolated it is mounted over the system
//! bundle; a bad CA stops the launcher before the command runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::inspect::*;

/// `egressgate sandbox run` with `extra` flags (the CA source), running `script` under `sh`
/// (on a blocking thread, so the gate keeps serving).
async fn sandbox(proxy_url: &str, extra: &[&str], script: &str) -> std::process::Output {
    let mut cmd = support::egressgate();
    cmd.args(["sandbox", "run", "--proxy-url", proxy_url])
        .args(extra)
        .args(["--", "sh", "-c", script])
        // The command runs as `nobody` under a root launcher: a directory it may enter.
        .current_dir("/")
        .env_remove("EGRESSGATE_CONTROL_URL")
        .env("SSL_CERT_FILE", "/nonexistent/overridden.pem");
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// [`HOST`] listed as inspected, and the proxy URL of a turn that may reach it.
async fn inspected_proxy_url(s: &Setup) -> String {
    let site = serde_json::json!({"pattern": HOST, "inspect": true});
    let turn = s.listed_turn(site).await;
    format!("http://{}@{}", turn.credential, s.gate.proxy())
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
    let proxy_url = inspected_proxy_url(&s).await;
    let control = format!("http://{}", s.gate.control.unwrap());
    let script = trust_script(s.origin.port(), true);
    let out = sandbox(&proxy_url, &["--control-url", &control], &script).await;
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
    let proxy_url = inspected_proxy_url(&s).await;
    let ca_file = s.gate.data_dir.path().join("deployment-ca.pem");
    std::fs::write(&ca_file, &s.ca_pem).unwrap();
    let script = trust_script(s.origin.port(), false);
    let f = ca_file.to_str().unwrap();
    let out = sandbox(&proxy_url, &["--no-isolate", "--ca-file", f], &script).await;
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
    let f = bad.to_str().unwrap();
    let out = sandbox(&proxy_url, &["--ca-file", f], "echo ran").await;
    assert_eq!(out.status.code(), Some(125));
    assert!(out.stdout.is_empty(), "the command did not run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a PEM certificate"), "{stderr}");
}
