//! The person's side in a real browser: headless Chromium (Debian's package) driven by
//! Playwright's Python package (`tests/browser/ui_test.py`) against the real binary, with
//! axe-core for accessibility. Covers the card page (Approve and Deny with the proxy's very
//! next request, the secret gone from the address bar and the tab's history yet a reload still
//! working, unticking a package, the proxy's evidence with an upload said in words, a narrow
//! grant chosen by keyboard (once, downloads only, under a path) and used up, every
//! resume state, keyboard only, phone and 200 % zoom), the person's inbox (the link's secret
//! gone from the address bar, the pending card listed, a new one appearing live, one approved
//! on its card page leaving, keyboard only, invalid and expired links), the admin console
//! (sign in, add with a note, dry run, remove, users, audit, sign out), CSP honoured (no
//! console errors), and that no secret the browser or runtime saw ever reached a server log
//! line. Screenshots go to
//! `$EGRESSGATE_SCREENSHOT_DIR` (default `target/screenshots`), kept as CI artifacts.
//!
//! The tools are installed by `.ci/run`. Without them the test fails when `CI=true` and
//! otherwise prints a loud skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::json;
use support::*;

/// Where the evidence card's script tries to upload.
const UPLOAD: &str = "upload.example.net";

struct Tools {
    chromium: PathBuf,
    axe: PathBuf,
}

/// The browser, Playwright and axe-core, or why not.
fn tools() -> Result<Tools, String> {
    let chromium = PathBuf::from(
        std::env::var("EGRESSGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
    );
    if !chromium.exists() {
        return Err(format!(
            "{} not found (apt-get install chromium)",
            chromium.display()
        ));
    }
    let playwright = std::process::Command::new("python3")
        .args(["-c", "import playwright.sync_api"])
        .status()
        .is_ok_and(|s| s.success());
    if !playwright {
        return Err("python3 cannot import playwright (pip install playwright)".into());
    }
    let axe =
        PathBuf::from(std::env::var("EGRESSGATE_TEST_AXE").unwrap_or_else(|_| {
            "/var/tmp/egressgate-node/node_modules/axe-core/axe.min.js".into()
        }));
    if !axe.exists() {
        return Err(format!(
            "{} not found (npm install axe-core in /var/tmp/egressgate-node)",
            axe.display()
        ));
    }
    Ok(Tools { chromium, axe })
}

fn screenshot_dir() -> PathBuf {
    let dir = std::env::var("EGRESSGATE_SCREENSHOT_DIR").map_or_else(
        |_| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../screenshots"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start(origin: &Origin, extra: &[&str]) -> Gate {
    let port = origin.port().to_string();
    let mut args = vec!["--allow-cidr", "127.0.0.0/8", "--allow-port", &port];
    args.extend_from_slice(extra);
    gate()
        .resolve(FILES, "127.0.0.1")
        .resolve(UPLOAD, "127.0.0.1")
        .args(&args)
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_page_and_the_console_work_in_chromium() {
    let tools = match tools() {
        Ok(t) => t,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("browser tests need their tools in CI: {why}")
        }
        Err(why) => {
            eprintln!(
                "\n!!!!!!!! SKIPPED: the browser tests did not run: {why}. \
                 .ci/run installs chromium, playwright and axe-core. !!!!!!!!\n"
            );
            return;
        }
    };
    let o = origin().await;
    let g1 = start(&o, &[]);
    // Short lease, card and inbox link lifetimes, for the conflict and expiry states.
    let g2 = start(
        &o,
        &[
            "--lease",
            "1s",
            "--interrupt-ttl",
            "10s",
            "--inbox-link-ttl",
            "2s",
        ],
    );
    // Inspects FILES and allows user scope: the card page offers every narrowing choice.
    let g3 = start(&o, &["--inspect", FILES, "--allow-user-scope"]);
    let work = tempfile::tempdir().unwrap();
    let secrets_out = work.path().join("secrets.json");
    let shots = screenshot_dir();
    let cfg = json!({
        "base": format!("http://{}", g1.api().addr),
        "base2": format!("http://{}", g2.api().addr),
        "base3": format!("http://{}", g3.api().addr),
        "origin_port": o.port(),
        "files_host": FILES,
        "upload_host": UPLOAD,
        "runtime": RUNTIME,
        "admin": ADMIN,
        "chromium": tools.chromium,
        "axe": tools.axe,
        "shots": shots,
        "secrets_out": secrets_out,
    });
    let cfg_path = work.path().join("config.json");
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let out = tokio::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/ui_test.py"))
        .arg(&cfg_path)
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser script failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    eprintln!("{stdout}");
    for name in ["card.png", "card-phone.png", "admin.png", "inbox.png"] {
        let meta = std::fs::metadata(shots.join(name)).unwrap();
        assert!(meta.len() > 1000, "{name} is a real screenshot");
    }
    // No secret the person's link, the runtime or the claims carried is in any log line.
    let secrets: Vec<String> =
        serde_json::from_slice(&std::fs::read(&secrets_out).unwrap()).unwrap();
    assert!(secrets.len() > 20, "the script recorded what it saw");
    for g in [&g1, &g2, &g3] {
        let lines = g.log_lines("");
        assert!(!lines.is_empty());
        for s in &secrets {
            assert!(s.len() >= 16, "{s:?}");
            if let Some(l) = lines.iter().find(|l| l.contains(s.as_str())) {
                panic!("a secret reached the server log: {l}");
            }
        }
        assert!(
            !lines.iter().any(|l| l.contains(ADMIN)),
            "admin token logged"
        );
    }
}
