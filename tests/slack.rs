//! The Slack front end against a loopback server speaking Slack's Web API
//! (`tests/slack/fake_slack.py`): a pending card is posted as Block Kit (a DM through
//! `chat.postMessage` and the incoming webhook's channel) with the card's id on its buttons
//! and never its secret; a correctly signed Approve click resumes the card like the card page
//! (the proxy then admits the host) and replaces the message through `response_url`; badly
//! signed, stale, unsigned, replayed, unknown-user, other-user and cannot-approve clicks change
//! nothing; a second click says what already happened; Deny denies. On PostgreSQL, the same
//! signed click sent to two control processes is taken once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::logged::{FAST_DELIVERY, Logged, wait_for};
use support::*;

const SIGNING: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const BOT: &str = "xoxb-test-bot-token";

/// The fake Slack, its log, and its port.
struct Slack {
    log: Logged,
    port: u16,
}

impl Slack {
    fn start() -> Self {
        let mut log = Logged::new();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/slack/fake_slack.py");
        let (child, port) = spawn_listening(
            Command::new("python3")
                .arg(script)
                .args([SIGNING, BOT])
                .arg(log.file("log")),
            "python3 runs the fake Slack",
        );
        log.child = Some(child);
        Self { log, port }
    }

    fn records(&self, kind: &str) -> Vec<Value> {
        let mut all = self.log.lines();
        all.retain(|r| r["kind"] == kind);
        all
    }

    /// Waits (bounded) until `n` records of `kind` came; those records.
    async fn wait(&self, kind: &str, n: usize) -> Vec<Value> {
        wait_for(15, || self.records(kind), |r| r.len() >= n).await
    }

    /// Plays Slack sending a click to `gate` `times` times: the gate's answers.
    async fn click(
        &self,
        gates: &[&Gate],
        user: &str,
        action: &str,
        id: &str,
        sign: &str,
        times: u32,
    ) -> Vec<Value> {
        let urls: Vec<String> = gates
            .iter()
            .map(|g| format!("http://{}", g.control.unwrap()))
            .collect();
        let body = json!({
            "gate": urls, "user": user,
            "action_id": action, "value": id, "sign": sign, "times": times,
        })
        .to_string();
        let port = self.port;
        tokio::task::spawn_blocking(move || {
            let out = Command::new("curl")
                .args(["-s", "-XPOST", "--data-binary", &body])
                .arg(format!("http://127.0.0.1:{port}/click"))
                .output()
                .unwrap();
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        })
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
    }
}

fn slack_gate(b: GateBuilder, slack: &Slack, o: &Origin) -> Gate {
    let base = format!("http://slack.test:{}", slack.port);
    b.reach_as(o, &[FILES, "slack.test"])
        .ports(&[slack.port])
        .args(&[
            "--slack-signing-secret",
            SIGNING,
            "--slack-bot-token",
            BOT,
            "--slack-api-url",
            &format!("{base}/api"),
            "--slack-webhook-url",
            &format!("{base}/services/hook"),
        ])
        .args(&FAST_DELIVERY)
        .start()
}

async fn set_user(api: &Api, user: &str, body: Value) -> Resp {
    let path = format!("/v1/admin/users/{user}");
    api.call("PUT", &path, Some(ADMIN), None, Some(&body.to_string()))
        .await
}

/// The one answer of a click sent once.
async fn once(slack: &Slack, g: &Gate, user: &str, action: &str, id: &str, sign: &str) -> Value {
    slack.click(&[g], user, action, id, sign, 1).await.remove(0)
}

#[tokio::test]
async fn a_card_reaches_slack_and_only_a_signed_click_of_its_user_answers_it() {
    let slack = Slack::start();
    let o = origin().await;
    let g = slack_gate(gate(), &slack, &o);
    let api = g.api();
    for (user, id) in [("alice", "U0ALICE"), ("bob", "U0BOB")] {
        let r = set_user(&api, user, json!({"slack_user_id": id})).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // Contacts are shown, checked, and a Slack id has one owner.
    let shown = api.get("/v1/admin/users/alice", ADMIN).await.json();
    assert_eq!(shown["slack_user_id"], "U0ALICE");
    let taken = set_user(&api, "carol", json!({"slack_user_id": "U0ALICE"})).await;
    assert_eq!(taken.status, 409, "{}", taken.text());
    for bad in [
        json!({"slack_user_id": "alice"}),
        json!({"email": "a@b"}),
        json!({}),
    ] {
        assert_eq!(set_user(&api, "carol", bad).await.status, 422);
    }

    let turn = g.turn("alice", "c1").await;
    let url = o.url(FILES, "/data.csv");
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let (id, secret) = person::card(&api, &turn, &[]).await;

    // Posted twice: a DM to alice through the bot, and the incoming webhook's channel.
    let dms = slack.wait("dm", 1).await;
    let hooks = slack.wait("webhook", 1).await;
    assert_eq!((dms.len(), hooks.len()), (1, 1), "{dms:?} {hooks:?}");
    assert_eq!(dms[0]["body"]["channel"], "U0ALICE");
    let blocks = dms[0]["body"]["blocks"].as_array().unwrap().clone();
    let actions = blocks.iter().find(|b| b["type"] == "actions").unwrap();
    let buttons = actions["elements"].as_array().unwrap();
    let ids: Vec<&str> = buttons
        .iter()
        .map(|b| b["action_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"egressgate.approve") && ids.contains(&"egressgate.deny"),
        "{ids:?}"
    );
    assert!(ids.contains(&"egressgate.approve_once") && !ids.contains(&"egressgate.approve_user"));
    assert!(buttons.iter().all(|b| b["value"] == id.as_str()));
    let text = dms[0].to_string() + &hooks[0].to_string();
    assert!(text.contains(FILES) && text.contains("the analysis needs the data file"));
    assert!(text.contains("https://gate.example/ui/cards/"), "{text}");
    assert!(
        !text.contains(&secret),
        "the resume secret never leaves in a message"
    );

    // Nothing that is not a signed click of alice, who may approve, changes anything.
    let approve = "egressgate.approve";
    for sign in ["bad", "stale", "none"] {
        let a = once(&slack, &g, "U0ALICE", approve, &id, sign).await;
        assert_eq!(a["status"], 401, "{sign}: {a}");
        assert_eq!(a["body"]["error"]["code"], "SLACK_UNVERIFIED");
    }
    let a = once(&slack, &g, "U0NOBODY", approve, &id, "good").await;
    assert_eq!(a["body"]["outcome"], "unknown_user", "{a}");
    let a = once(&slack, &g, "U0BOB", approve, &id, "good").await;
    assert_eq!(a["body"]["outcome"], "other_user", "{a}");
    set_user(&api, "alice", json!({"can_approve": false})).await;
    let a = once(&slack, &g, "U0ALICE", approve, &id, "good").await;
    assert_eq!(a["body"]["outcome"], "cannot_approve", "{a}");
    set_user(&api, "alice", json!({"can_approve": true})).await;
    assert_eq!(api.outcome(&id).await["state"], "pending");
    assert_eq!(g.get(&turn, &url).await.status, 403);
    let refusals = slack.wait("response", 3).await;
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert!(
        refusals
            .iter()
            .all(|r| r["body"]["response_type"] == "ephemeral")
    );

    // The signed click approves once; the same request again is a replay.
    let answers = slack.click(&[&g], "U0ALICE", approve, &id, "good", 2).await;
    assert_eq!(answers[0]["body"]["outcome"], "approved", "{answers:?}");
    assert_eq!(answers[1]["status"], 409);
    assert_eq!(answers[1]["body"]["error"]["code"], "SLACK_REPLAYED");
    let out = api.outcome(&id).await;
    assert_eq!(
        (out["state"].as_str(), out["handoff"].as_bool()),
        (Some("claimed"), Some(true)),
        "{out}"
    );
    assert_eq!(out["decision"]["outcome"], "approved");
    assert_eq!(
        g.get(&turn, &url).await.status,
        200,
        "the proxy admits the host"
    );
    let replaced = slack.wait("response", 4).await;
    let r = &replaced[3]["body"];
    assert_eq!(r["replace_original"], true, "{r}");
    assert!(
        r["text"].as_str().unwrap().contains("Approved")
            && r["text"].as_str().unwrap().contains("<@U0ALICE>")
    );

    // A second click says what already happened.
    let a = once(&slack, &g, "U0ALICE", "egressgate.deny", &id, "good").await;
    assert_eq!(a["body"]["outcome"], "already_answered", "{a}");
    assert!(a["body"]["text"].as_str().unwrap().contains("approved"));
    assert_eq!(api.outcome(&id).await["decision"]["outcome"], "approved");

    // Deny denies.
    let turn2 = g.turn("alice", "c2").await;
    assert_eq!(g.get(&turn2, &url).await.status, 403);
    let (id2, _) = person::card(&api, &turn2, &[]).await;
    let a = once(&slack, &g, "U0ALICE", "egressgate.deny", &id2, "good").await;
    assert_eq!(a["body"]["outcome"], "denied", "{a}");
    assert_eq!(api.outcome(&id2).await["decision"]["outcome"], "declined");
    assert_eq!(g.get(&turn2, &url).await.status, 403);
    let replaced = slack.wait("response", 6).await;
    assert!(replaced.iter().any(|r| {
        r["body"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Denied"))
    }));
    let metrics = api.get("/metrics", ADMIN).await.text();
    assert!(
        metrics.contains(r#"egressgate_slack_deliveries_total{outcome="delivered"} 4"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn on_postgresql_one_signed_click_sent_to_two_control_processes_is_taken_once() {
    let pg = support::pg::PgCluster::start();
    let slack = Slack::start();
    let o = origin().await;
    let g1 = slack_gate(gate().database(&pg.url()), &slack, &o);
    let g2 = slack_gate(gate().database(&pg.url()), &slack, &o);
    let api = g1.api();
    set_user(&api, "alice", json!({"slack_user_id": "U0ALICE"})).await;
    let turn = g1.turn("alice", "c1").await;
    let url = o.url(FILES, "/data.csv");
    assert_eq!(g1.get(&turn, &url).await.status, 403);
    let (id, _) = person::card(&api, &turn, &[]).await;
    // Two processes run the outbox; the card is posted once per recipient.
    slack.wait("dm", 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(slack.records("dm").len(), 1);
    assert_eq!(slack.records("webhook").len(), 1);
    // The same signed request reaches both processes: one takes it, the other refuses it.
    let both = slack
        .click(&[&g1, &g2], "U0ALICE", "egressgate.approve", &id, "good", 1)
        .await;
    assert_eq!(both[0]["body"]["outcome"], "approved", "{both:?}");
    assert_eq!(both[1]["status"], 409, "{both:?}");
    assert_eq!(both[1]["body"]["error"]["code"], "SLACK_REPLAYED");
    // A new click (a fresh signature) on the other process says what already happened.
    let again = once(&slack, &g2, "U0ALICE", "egressgate.approve", &id, "good").await;
    assert_eq!(again["body"]["outcome"], "already_answered", "{again}");
    let out = api.outcome(&id).await;
    assert_eq!(out["decision"]["outcome"], "approved");
    assert_eq!(g2.get(&turn, &url).await.status, 200);
}
