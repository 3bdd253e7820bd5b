//! The OpenAI Agents SDK adapter (`egressgate.adapters.openai_agents`) beyond the whole loop
//! in `tests/framework_adapters.rs`, each step a separate process of its example against the
//! real binary: the paused call is approved or rejected inside the SDK from the person's stored
//! decision only, even when the world has changed since (a site the person declined is now
//! allowed for everybody: a run that asked again or downloaded again would succeed); the call
//! the batch rule cancelled beside the approval call runs neither in the first run nor on
//! resume; a resume before the person answered runs nothing; a second resume changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::adapters::{Example, answer, framework_bench, outcome};
use support::examples::assert_one_claim_per_card;
use support::*;

const NAME: &str = "openai_agents";
const BODY: &str = "origin says hi";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_decline_is_the_sdk_rejection_even_after_the_site_was_allowed() {
    let Some((o, g, port)) = framework_bench(NAME).await else {
        return;
    };
    let ex = Example::of(NAME, &g, port);
    let card = ex.ask("alice", "c1", &[FILES]);
    let args = [
        "resume",
        "--interrupt-id",
        card["interrupt_id"].as_str().unwrap(),
    ];

    // Before the person answers: nothing runs, the card still waits.
    let (early, code) = ex.run(&args);
    assert_eq!(
        (early["error"]["code"].as_str(), code),
        (Some("STILL_PENDING"), 2),
        "{early}"
    );
    assert_eq!(outcome(&g, &card).await["state"], "pending");

    // The person declines; then an administrator allows the site for everybody. Asking the
    // gate again would no longer find anything to ask, and a download would now work.
    answer(&g, &card, false).await;
    g.api().admin_site(FILES).await;

    let done = ex.resume(&card);
    let text = done["final"].as_str().unwrap().to_owned();
    assert!(
        text.ends_with(
            "the person did not approve files.example.com; continue without that data and say so"
        ),
        "{done}"
    );
    assert!(o.requests().is_empty(), "{:?}", o.requests());
    let stored = outcome(&g, &card).await;
    assert_eq!(stored["state"], "done", "{stored}");
    assert_eq!(stored["decision"]["outcome"], "declined", "{stored}");

    // Again: nothing runs, nothing changes.
    let again = ex.resume(&card);
    assert_eq!(again["already_done"], true, "{again}");
    assert_eq!(outcome(&g, &card).await, stored);
    assert!(o.requests().is_empty(), "{:?}", o.requests());
    assert_one_claim_per_card(&g, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_cancelled_beside_the_approval_call_never_runs_not_even_on_resume() {
    let Some((o, g, port)) = framework_bench(NAME).await else {
        return;
    };
    let ex = Example::of(NAME, &g, port);
    // The model's step holds the approval call and a retry of the download; the retry is
    // cancelled before it reaches the proxy (one refusal: the first download).
    let card = ex.ask("bob", "c2", &[FILES]);
    answer(&g, &card, true).await;
    assert_eq!(ex.resume(&card), json!({"final": BODY}));
    // Resumed, the SDK finishes the paused step: the approval call answers from the stored
    // decision, the cancelled retry keeps its cancel text, and only the model's next step
    // downloads. The origin saw that one request.
    assert_eq!(o.requests().len(), 1, "{:?}", o.requests());
    let stored = outcome(&g, &card).await;
    assert_eq!(stored["state"], "done", "{stored}");
    assert_eq!(ex.resume(&card)["already_done"], true);
    assert_eq!(o.requests().len(), 1, "{:?}", o.requests());
    assert_one_claim_per_card(&g, 1).await;
}
