//! Longer than a room of one job (~400 lines) on purpose: every case shares one receiver and
//! one gate setup, and the TLS and login cases need the receiver's certificate and settings
//! that only this suite uses.
//!
//! E-mail of pending cards against a real SMTP server on loopback (Python `aiosmtpd`, which
//! parses each accepted message with Python's email package): a card of a user with an
//! address arrives once, from `--smtp-from`, with a subject naming its site and text and HTML
//! parts carrying the question, the evidence and the card's link, never its secret; a user
//! without an address gets nothing; a relay that is down, or answers 451, gets the message
//! after a retry, once; a gate killed with mail pending sends each message once after a
//! restart (one Message-ID per card); STARTTLS and implicit TLS are verified against
//! `--smtp-ca` and carry the login from the environment, a relay that cannot be verified or
//! offers no STARTTLS gets nothing; bad settings are refused at start.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::logged::{Logged, wait_for};
use support::*;

const FROM: &str = "egressgate <gate@example.org>";
const LOGIN: (&str, &str) = ("gate-sender", "pw-Kx81-never-logged");

/// The receiver's way of speaking: plain, STARTTLS required, or implicit TLS (with the
/// certificate and key files), and whether it demands the login.
#[derive(Clone, Copy)]
enum Mode<'a> {
    Plain,
    StartTls(&'a Tls),
    Implicit(&'a Tls),
}

/// A CA, and a certificate for 127.0.0.1 that it signed, in files.
struct Tls {
    dir: tempfile::TempDir,
}

impl Tls {
    fn new() -> Self {
        let pki = pki(&["127.0.0.1"]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), pki.ca_pem()).unwrap();
        std::fs::write(dir.path().join("leaf.pem"), &pki.leaf_pem).unwrap();
        std::fs::write(dir.path().join("leaf.key"), &pki.key_pem).unwrap();
        Self { dir }
    }
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn ca(&self) -> String {
        self.file("ca.pem").display().to_string()
    }
}

/// The Python receiver: its log and down files, and its port.
struct Receiver {
    log: Logged,
    port: u16,
}

impl Receiver {
    fn start(mode: Mode<'_>, login: bool) -> Self {
        let mut rx = Self {
            log: Logged::new(),
            port: 0,
        };
        rx.listen(mode, login);
        rx
    }

    /// A receiver that is not listening yet on a port free a moment ago.
    fn not_yet() -> Self {
        Self {
            log: Logged::new(),
            port: free_port(),
        }
    }

    fn listen(&mut self, mode: Mode<'_>, login: bool) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/email/receiver.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .arg(self.log.file("log"))
            .arg(self.log.file("down"))
            .arg(self.port.to_string());
        let tls = |flag: &str, t: &Tls| [flag.into(), t.file("leaf.pem"), t.file("leaf.key")];
        match mode {
            Mode::Plain => {}
            Mode::StartTls(t) => {
                cmd.args(tls("--starttls", t));
            }
            Mode::Implicit(t) => {
                cmd.args(tls("--implicit", t));
            }
        }
        if login {
            cmd.args(["--login", LOGIN.0, LOGIN.1]);
        }
        // aiosmtpd's own warnings and session errors (a client refusing the certificate) go
        // to a file beside the log, not into the test's output.
        cmd.stderr(std::fs::File::create(self.log.file("stderr")).unwrap());
        let (child, port) = spawn_listening(&mut cmd, "is aiosmtpd installed?");
        self.port = port;
        self.log.child = Some(child);
    }

    fn url(&self, query: &str) -> String {
        format!("smtp://127.0.0.1:{}{query}", self.port)
    }

    /// The messages accepted so far (the log also has `{"refused": …}` lines while down).
    fn messages(&self) -> Vec<Value> {
        self.log
            .lines()
            .into_iter()
            .filter(|l| l.get("refused").is_none())
            .collect()
    }

    /// Waits (bounded) until `done` holds for the accepted messages; those messages.
    async fn wait(&self, secs: u64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_for(secs, || self.messages(), done).await
    }
}

/// A gate mailing through `url`, retrying fast, with card links under gate.example.
fn mail_gate(url: &str, extra: &[&str], data: Option<tempfile::TempDir>) -> Gate {
    mail_gate_on(gate(), url, extra, data)
}

fn mail_gate_on(
    g: GateBuilder,
    url: &str,
    extra: &[&str],
    data: Option<tempfile::TempDir>,
) -> Gate {
    let mut g = g
        .args(&["--smtp-url", url, "--smtp-from", FROM])
        .args(&["--webhook-backoff", "100ms", "--webhook-timeout", "5s"])
        .args(&["--control-public-url", "https://gate.example"])
        .args(extra);
    if let Some(d) = data {
        g = g.data_dir(d);
    }
    g.start()
}

async fn set_email(api: &Api, user: &str, email: &str) {
    let body = json!({ "email": email }).to_string();
    let path = format!("/v1/admin/users/{user}");
    let r = api.call("PUT", &path, Some(ADMIN), None, Some(&body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// A card for `user` in `chat` naming `url`: (interrupt id, resume secret).
async fn card(api: &Api, user: &str, chat: &str, url: &str) -> (String, String) {
    let turn = api.turn(user, chat, &[]).await;
    ask(api, &turn, &[url]).await
}

/// The counter of e-mail attempts with `outcome`, as /metrics says.
async fn attempts(api: &Api, outcome: &str) -> u64 {
    let text = api.get("/metrics", ADMIN).await.text();
    let series = format!("egressgate_email_deliveries_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().unwrap())
}

async fn wait_attempts(api: &Api, outcome: &str, at_least: u64) {
    let seen = eventually(Duration::from_secs(20), async || {
        attempts(api, outcome).await >= at_least
    })
    .await;
    assert!(seen, "fewer than {at_least} {outcome} attempts");
}

fn message_ids(messages: &[Value]) -> BTreeSet<String> {
    messages
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_pending_card_is_mailed_to_its_person_and_to_no_one_else() {
    let rx = Receiver::start(Mode::Plain, false);
    let g = mail_gate(&rx.url("?tls=none"), &[], None);
    let api = g.api();
    set_email(&api, "alice", "alice@example.com").await;
    // Bob has no address; his card comes first, so once Alice's message is in, his event was
    // fanned out too.
    card(&api, "bob", "b1", "https://bob.example.com/b.csv").await;
    let (id, secret) = card(&api, "alice", "c1", "https://data.example.com/x.csv").await;
    let got = rx.wait(20, |m| !m.is_empty()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let m = &got[0];
    assert_eq!(m["rcpt_tos"], json!(["alice@example.com"]), "{m}");
    assert_eq!(m["mail_from"], "gate@example.org", "{m}");
    assert_eq!(m["from"], FROM, "{m}");
    assert_eq!(m["to"], "alice@example.com", "{m}");
    assert_eq!(m["subject"], "Approval needed: data.example.com", "{m}");
    assert_eq!(m["content_type"], "multipart/alternative", "{m}");
    let link = format!("https://gate.example/ui/cards/{id}");
    for part in ["text", "html"] {
        let body = m[part]
            .as_str()
            .unwrap_or_else(|| panic!("no {part} part: {m}"));
        for needle in [
            "Allow connections",
            "https://data.example.com/x.csv",
            "the analysis needs the data file",
            &link,
        ] {
            assert!(body.contains(needle), "{part} lacks {needle}: {body}");
        }
        assert!(
            !body.contains(&secret),
            "no resume secret in the {part} part"
        );
    }
    assert!(
        m["html"]
            .as_str()
            .unwrap()
            .contains(&format!("href=\"{link}\""))
    );
    let message_id = m["message_id"].as_str().unwrap();
    assert!(
        message_id.starts_with('<') && message_id.ends_with("@example.org>"),
        "{message_id}"
    );

    // Nothing more comes: not Bob's card, not Alice's again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.log.lines().len(), 1, "{:?}", rx.log.lines());
    assert_eq!(attempts(&api, "delivered").await, 1);
}

#[tokio::test]
async fn a_relay_that_is_down_gets_the_message_once_it_is_up() {
    let mut rx = Receiver::not_yet();
    let g = mail_gate(&rx.url("?tls=none"), &[], None);
    let api = g.api();
    set_email(&api, "alice", "alice@example.com").await;
    card(&api, "alice", "c1", "https://data.example.com/x.csv").await;
    // Nothing listens: the connection is refused, and refused again.
    wait_attempts(&api, "retry", 2).await;
    rx.listen(Mode::Plain, false);
    let got = rx.wait(20, |m| !m.is_empty()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        rx.messages().len(),
        1,
        "delivered once: {:?}",
        rx.log.lines()
    );
    assert_eq!(attempts(&api, "delivered").await, 1);
}

#[tokio::test]
async fn a_gate_killed_with_mail_pending_sends_each_message_once_after_restart() {
    let rx = Receiver::start(Mode::Plain, false);
    rx.log.go_down();
    let url = rx.url("?tls=none");
    let g = mail_gate(&url, &[], None);
    let api = g.api();
    set_email(&api, "carol", "carol@example.com").await;
    let mut cards = Vec::new();
    for chat in ["c1", "c2", "c3"] {
        cards.push(
            card(&api, "carol", chat, "https://data.example.com/x.csv")
                .await
                .0,
        );
    }
    // Each message was offered and answered 451 at least once.
    wait_attempts(&api, "retry", 3).await;
    let data = g.kill();
    assert!(rx.messages().is_empty(), "{:?}", rx.log.lines());
    assert!(!rx.log.lines().is_empty());
    rx.log.come_up();
    let g = mail_gate(&url, &[], Some(data));
    let got = rx.wait(30, |m| m.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let got_all = rx.messages();
    assert_eq!(got_all.len(), 3, "each exactly once: {got:?}");
    assert_eq!(message_ids(&got_all).len(), 3, "{got_all:?}");
    let mut linked: Vec<String> = cards
        .iter()
        .filter(|id| {
            got_all
                .iter()
                .any(|m| m["text"].as_str().unwrap().contains(id.as_str()))
        })
        .cloned()
        .collect();
    linked.sort();
    cards.sort();
    assert_eq!(linked, cards, "one message per card");
    drop(g);
}

#[tokio::test]
async fn tls_is_verified_and_carries_the_login_from_the_environment() {
    let tls = Tls::new();
    let login = [
        ("EGRESSGATE_SMTP_USERNAME", LOGIN.0),
        ("EGRESSGATE_SMTP_PASSWORD", LOGIN.1),
    ];
    for (mode, url) in [
        (Mode::StartTls(&tls), "smtp://127.0.0.1:{}"),
        (Mode::Implicit(&tls), "smtps://127.0.0.1:{}"),
    ] {
        let rx = Receiver::start(mode, true);
        let url = url.replace("{}", &rx.port.to_string());
        let mut b = gate();
        for (k, v) in login {
            b = b.env(k, v);
        }
        let g = mail_gate_on(b, &url, &["--smtp-ca", &tls.ca()], None);
        let api = g.api();
        set_email(&api, "alice", "alice@example.com").await;
        card(&api, "alice", "c1", "https://data.example.com/x.csv").await;
        let got = rx.wait(20, |m| !m.is_empty()).await;
        assert_eq!(got.len(), 1, "{url}: {got:?}");
        assert_eq!(got[0]["tls"], true, "{url}");
        assert_eq!(got[0]["login"], LOGIN.0, "{url}");
        assert!(
            g.log_lines(LOGIN.1).is_empty(),
            "the password is never logged"
        );
    }
}

#[tokio::test]
async fn a_relay_that_cannot_be_verified_or_offers_no_starttls_gets_nothing() {
    let tls = Tls::new();
    let verified = Receiver::start(Mode::StartTls(&tls), false);
    let plain = Receiver::start(Mode::Plain, false);
    // No --smtp-ca: the receiver's certificate chains to no root the gate trusts. And a
    // receiver that offers no STARTTLS while the URL demands it.
    for rx in [&verified, &plain] {
        let g = mail_gate(&rx.url(""), &[], None);
        let api = g.api();
        set_email(&api, "alice", "alice@example.com").await;
        card(&api, "alice", "c1", "https://data.example.com/x.csv").await;
        wait_attempts(&api, "retry", 2).await;
        assert!(rx.log.lines().is_empty(), "{:?}", rx.log.lines());
        assert_eq!(attempts(&api, "delivered").await, 0);
    }
}

#[test]
fn bad_smtp_settings_are_refused_at_start() {
    let data = tempfile::tempdir().unwrap();
    let d = data.path();
    for (args, says) in [
        (
            vec!["--smtp-url", "smtp://mail.example.com"],
            "needs --smtp-from",
        ),
        (vec!["--smtp-from", "gate@example.org"], "needs --smtp-url"),
        (
            vec![
                "--smtp-url",
                "smtp://u:pw@mail.example.com",
                "--smtp-from",
                "g@example.org",
            ],
            "credentials are not accepted in the URL",
        ),
        (
            vec![
                "--smtp-url",
                "smtp://mail.example.com?tls=opportunistic",
                "--smtp-from",
                "g@example.org",
            ],
            "stripped",
        ),
        (
            vec![
                "--smtp-url",
                "smtps://mail.example.com",
                "--smtp-from",
                "not an address",
            ],
            "--smtp-from",
        ),
        (
            vec![
                "--smtp-url",
                "smtps://mail.example.com",
                "--smtp-from",
                "g@example.org",
                "--smtp-ca",
                "/nonexistent/ca.pem",
            ],
            "--smtp-ca",
        ),
    ] {
        let e = serve_failure(&args, d);
        assert!(e.contains(says), "{args:?}: {e}");
    }
    // The password travels only encrypted, and never without a relay.
    let mut cmd = egressgate();
    cmd.env("EGRESSGATE_SMTP_USERNAME", LOGIN.0)
        .env("EGRESSGATE_SMTP_PASSWORD", LOGIN.1);
    let e = cli_failure(
        cmd.args([
            "serve",
            "--smtp-url",
            "smtp://mail.example.com?tls=none",
            "--smtp-from",
            "g@example.org",
            "--data-dir",
        ])
        .arg(d),
    );
    assert!(e.contains("unencrypted") && !e.contains(LOGIN.1), "{e}");
}
