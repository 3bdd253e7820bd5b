//! The sandbox launcher with the real proxy: a script in the sandbox downloads an approved
//! file through the proxy, gets the proxy's 403 for anything else (recorded on its turn), and
//! has no other way out.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;

use support::*;

const FILES: &str = "files.example.com";

fn sandbox(proxy_url: &str, script: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args([
            "sandbox",
            "run",
            "--proxy-url",
            proxy_url,
            "--",
            "sh",
            "-c",
            script,
        ])
        .env("EGRESSGATE_ADMIN_TOKEN", "must-not-leak-into-the-sandbox")
        .current_dir("/")
        .output()
        .unwrap()
}

#[tokio::test]
async fn scripts_in_the_sandbox_reach_only_what_the_proxy_allows() {
    let o = origin().await;
    let port = o.addr.port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve("evil.example.com", "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &port.to_string(),
        ])
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = api.turn("u", "c", &[]).await;
    let proxy_url = format!("http://{}@{}", turn.credential, g.proxy());

    // Approved download through the proxy works from inside.
    let out = tokio::task::spawn_blocking({
        let p = proxy_url.clone();
        move || {
            sandbox(
                &p,
                &format!("curl -sS --max-time 10 http://{FILES}:{port}/data.csv"),
            )
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "origin says hi");

    // Unapproved: the proxy's 403, recorded on this turn.
    let out = tokio::task::spawn_blocking({
        let p = proxy_url.clone();
        move || sandbox(&p, &format!("curl -s --max-time 10 -o /dev/null -w '%{{http_code}}' http://evil.example.com:{port}/"))
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "403");
    let rec = api.refusals(&turn).await;
    assert_eq!(rec["refusals"][0]["host"], "evil.example.com");

    // Ignoring the proxy gets nothing but the proxy: no route to the origin, names resolve
    // only to the sandbox's own pool (never the real address), no secrets inside.
    let before = o.connection_count();
    let out = tokio::task::spawn_blocking({
        let p = proxy_url.clone();
        move || {
            sandbox(
                &p,
                &format!(
                    "curl -s --noproxy '*' --max-time 5 http://127.0.0.1:{port}/ && exit 10; \
                     getent ahostsv4 {FILES} | grep -q 127.0.0.1 && exit 11; \
                     env | grep -q must-not-leak && exit 12; exit 0"
                ),
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout {} stderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        o.connection_count(),
        before,
        "the origin saw a connection that bypassed the proxy"
    );
}
