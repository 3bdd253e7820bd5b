//! Refusals a captured client can read, with the real gate and real clients inside the
//! sandbox: plain HTTP gets the proxy's `403` (curl shows its reason phrase), and with the
//! deployment CA trusted a refused HTTPS connection gets the same `403` inside TLS (curl,
//! Node's fetch, Python's urllib, Java's HttpClient, pip and npm print the status and the next
//! step). Nothing refused is ever dialled; a ClientHello naming another host gets no leaf.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Output;

use support::capture::*;
use support::*;

const ASK: &str = "Forbidden by egressgate: not approved, ask with request_egress_approval";
const ASKED: &str = "asked.example.com";
/// Runs a command without the proxy settings the sandbox gives it.
const UNPROXIED: &str = "env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy \
                         -u ALL_PROXY -u all_proxy -u PIP_PROXY -u npm_config_proxy \
                         -u npm_config_https_proxy";

/// Everything a client printed.
fn printed(o: &Output) -> String {
    format!("{}{}", out(o), String::from_utf8_lossy(&o.stderr))
}

/// `sh -c script` in the sandbox with `flags`.
async fn sh(proxy_url: &str, flags: &[&str], script: &str) -> Output {
    let argv = ["sh".into(), "-c".into(), script.to_owned()];
    sandbox(proxy_url, flags, &argv).await
}

#[tokio::test]
async fn captured_plain_http_gets_the_403_and_curl_shows_the_next_step() {
    let Some((o, g)) = capture_bench("curl", &[ASKED]).await else {
        return;
    };
    let port = o.port();
    let turn = g.api().turn("u-curl", "c1", &[]).await;
    let proxy_url = g.proxy_url(&turn);
    let script = format!(
        "curl --noproxy '*' -sS -v --max-time 20 -w 'code=%{{http_code}}' http://{ASKED}:{port}/data.csv"
    );
    let got = sh(&proxy_url, &[], &script).await;
    let text = printed(&got);
    assert!(
        text.contains(&format!("< HTTP/1.1 403 {ASK}\r\n")),
        "{}",
        explain(&got)
    );
    assert!(
        out(&got).starts_with(&format!("egressgate refused {ASKED}:{port}\n"))
            && out(&got).ends_with("code=403"),
        "{}",
        explain(&got)
    );
    assert_eq!(o.connection_count(), 0, "the refused host was dialled");
}

#[tokio::test]
async fn with_the_deployment_ca_trusted_refused_https_gets_the_403_inside_tls() {
    let pki = pki(&[ASKED]);
    let o = tls_origin(&pki).await;
    let port = o.addr.port();
    let g = gate_for(&[ASKED], &[port], &[]);
    let turn = g.api().turn("u-tls", "c1", &[]).await;
    let proxy_url = g.proxy_url(&turn);
    // The launcher fetches the deployment CA and the command trusts it (see docs/sandbox.md).
    let control = format!("http://{}", g.control.unwrap());
    let flags = ["--control-url", control.as_str()];
    let url = format!("https://{ASKED}:{port}/data.csv");
    let (_node_dir, node) = client_script("get.mjs");
    let (_py_dir, python) = client_script("get.py");
    let (_java_dir, java) = client_script("Get.java");
    // Every proxy setting dropped, so each client connects straight to the name and is
    // captured (through the proxy settings they get the `CONNECT` refusal instead: see
    // tests/legible_refusals.rs).
    let npm = format!(
        "npm view left-pad version --registry https://{ASKED}:{port}/ --cache \"$d\" \
         --fetch-retries 0 --update-notifier false"
    );
    let pip = format!(
        "python3 -m pip download --no-deps --no-cache-dir --retries 0 \
         --disable-pip-version-check -d \"$d\" https://{ASKED}:{port}/files/sample-1.0-py3-none-any.whl"
    );
    let rows: [(&str, String, &str); 6] = [
        (
            "curl",
            format!("curl -sS -v --fail-with-body --max-time 20 {url}"),
            "< HTTP/1.1 403 ",
        ),
        ("node", format!("node {node} {url}"), "node: status 403 "),
        (
            "python3",
            format!("python3 {python} {url}"),
            "HTTPError 403: '",
        ),
        (
            "java",
            format!("java -XX:-UsePerfData {java} {url}"),
            "java: status 403",
        ),
        ("npm", npm, "npm error 403 403 "),
        ("python3", pip, "403 Client Error: "),
    ];
    for (tool, script, status) in rows {
        if !have(tool) {
            continue;
        }
        let script = format!("d=$(mktemp -d); {UNPROXIED} {script}");
        let got = sh(&proxy_url, &flags, &script).await;
        let text = printed(&got);
        assert_ne!(got.status.code(), Some(0), "{tool}: {}", explain(&got));
        assert!(text.contains(status), "{tool}: {}", explain(&got));
        // Java's HttpClient keeps no reason phrase: it shows the explanation's text.
        let next_step = if tool == "java" {
            format!("egressgate refused {ASKED}:{port}")
        } else {
            ASK.to_owned()
        };
        assert!(text.contains(&next_step), "{tool}: {}", explain(&got));
    }
    // A ClientHello naming another host than the one connected to: no leaf, a reset.
    if have("python3") {
        let script = format!(
            r#"
import socket, ssl
ctx = ssl.create_default_context()
{fronted}"#,
            fronted = fronting_probe(ASKED, port, "other.example.com")
        );
        let argv = ["python3".into(), "-c".into(), script];
        let got = sandbox(&proxy_url, &flags, &argv).await;
        assert_eq!(out(&got), "fronted: refused\n", "{}", explain(&got));
    }
    assert_eq!(o.connection_count(), 0, "the refused host was dialled");
    let rec = g.api().refusals(&turn).await;
    assert_eq!(rec["refusals"][0]["host"], ASKED, "{rec}");
    assert_eq!(rec["refusals"][0]["reason"], "not_approved", "{rec}");
}
