//! The framework adapters (`egressgate.adapters.strands`, `.langgraph`, `.agui`,
//! `.openai_agents`, `.a2a`) through their runnable examples (`python -m egressgate.examples.NAME`),
//! each run as a separate process against the real binary, as a runtime and a person would: ask in one
//! process (a card waits; the batch rule kept the cancelled retry off the proxy); the person
//! approves with the card's secret; resume in a new process (the downloaded body is the final
//! text); resume again (nothing changes, the card is already done); unattended (the deny the
//! model got, no card); a resumed run refused again on another host (a chained card, then the
//! end); two resume processes at once (exactly one finishes).
//!
//! The pinned framework packages are installed by `.ci/run` outside the checkout
//! (`EGRESSGATE_TEST_PY_FRAMEWORKS`); without them the tests fail under `CI=true` and say they
//! skipped otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::adapters::{Example, answer, example_available, id, outcome, pending, read};
use support::examples::assert_one_claim_per_card;
use support::*;

const OTHER: &str = "other.example.net";
const BODY: &str = "origin says hi";

async fn the_whole_loop(name: &str) {
    if !example_available(name) {
        return;
    }
    let o = origin().await;
    let port = o.port();
    let g = gate()
        .loopback()
        .ports(&[port])
        .names(&[FILES, OTHER])
        .start();
    let ex = Example::of(name, &g, port);

    // Ask: a card waits, and the script was refused once (the retry beside the approval
    // call was cancelled by the batch rule before it reached the proxy).
    let card = ex.ask("alice", "c1", &[FILES]);
    assert!(
        card["secret"].as_str().is_some_and(|s| !s.is_empty()),
        "{card}"
    );
    let o1 = outcome(&g, &card).await;
    assert_eq!(o1["state"], "pending", "{o1}");
    assert_eq!(o1["card"]["sites"], json!([FILES]), "{o1}");
    let waiting = pending(&g, "alice").await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["interrupt_id"], card["interrupt_id"]);
    let refusals = g
        .api()
        .refusals(&support::Turn {
            id: waiting[0]["turn_id"].as_str().unwrap().to_owned(),
            credential: String::new(),
        })
        .await;
    assert_eq!(refusals["refusals"][0]["host"], FILES, "{refusals}");
    assert_eq!(refusals["refusals"][0]["count"], 1, "{refusals}");

    // The person approves; a new process takes the click over and finishes.
    answer(&g, &card, true).await;
    assert_eq!(ex.resume(&card), json!({"final": BODY}));
    assert_eq!(outcome(&g, &card).await["state"], "done");
    // Again: nothing runs, it says so.
    let again = ex.resume(&card);
    assert_eq!(again["already_done"], true, "{again}");
    assert_eq!(again["interrupt_id"], card["interrupt_id"], "{again}");
    assert!(pending(&g, "alice").await.is_empty());

    // Unattended: the deterministic deny, and no card.
    let url = ex.url(OTHER);
    let out = ex.ok(&[
        "ask",
        "--user",
        "bob",
        "--chat",
        "c2",
        "--url",
        &url,
        "--unattended",
    ]);
    let deny = out["deny"].as_str().unwrap();
    assert!(deny.starts_with("NO_HUMAN: "), "{out}");
    assert!(deny.contains(OTHER), "{out}");
    assert!(
        deny.ends_with("Continue without that data and say so."),
        "{out}"
    );
    assert!(out["final"].as_str().unwrap().contains(deny), "{out}");
    assert!(pending(&g, "bob").await.is_empty());

    // The resumed run is refused again on another host: a chained card, then the end.
    let first = ex.ask("carol", "c3", &[FILES, OTHER]);
    answer(&g, &first, true).await;
    let chained = ex.resume(&first);
    assert_ne!(id(&chained), id(&first), "{chained}");
    assert_ne!(chained["secret"], first["secret"], "{chained}");
    let oc = outcome(&g, &chained).await;
    assert_eq!(oc["state"], "pending", "{oc}");
    assert_eq!(oc["card"]["sites"], json!([OTHER]), "{oc}");
    answer(&g, &chained, true).await;
    assert_eq!(
        ex.resume(&chained),
        json!({"final": format!("{BODY}\n{BODY}")})
    );

    // A decline: the resumed run continues without the data and says so.
    let declined = ex.ask("erin", "c5", &[FILES]);
    answer(&g, &declined, false).await;
    let final_text = ex.resume(&declined)["final"].as_str().unwrap().to_owned();
    assert!(
        final_text.ends_with(
            "the person did not approve files.example.com; continue without that data and say so"
        ),
        "{final_text}"
    );

    // Two resume processes at once: exactly one finishes.
    let card = ex.ask("dave", "c4", &[FILES]);
    answer(&g, &card, true).await;
    let args = ["resume", "--interrupt-id", id(&card)];
    let racers = [ex.spawn(&args), ex.spawn(&args)];
    let results: Vec<(Value, i32)> = racers
        .into_iter()
        .map(|c| read(c.wait_with_output().unwrap(), &args))
        .collect();
    let finished: Vec<_> = results
        .iter()
        .filter(|(v, _)| v.get("final").is_some())
        .collect();
    assert_eq!(finished.len(), 1, "{results:?}");
    assert_eq!(finished[0], &(json!({"final": BODY}), 0));
    let (other, code) = results
        .iter()
        .find(|(v, _)| v.get("final").is_none())
        .unwrap();
    let lost = other["error"]["code"] == "CLAIM_LOST" && *code == 3;
    let done = other["already_done"] == true && *code == 0;
    assert!(lost || done, "{other} ({code})");
    assert_one_claim_per_card(&g, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strands_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("strands").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langgraph_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("langgraph").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("agui").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("a2a").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_agents_pauses_on_the_card_and_resumes_once_in_a_new_process() {
    the_whole_loop("openai_agents").await;
}
