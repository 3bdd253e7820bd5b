//! Many callers at once: one kind of request sent concurrently, each on its own task, and the
//! check the design's "exactly once" rows make on the answers — one caller wins, every other
//! gets one of the refusals the design names for losing the race.

use std::collections::BTreeMap;
use std::future::Future;

use axum::http::StatusCode;
use serde_json::Value;

use super::{Answer, code};

/// Sends every request at once, each on its own task, and returns the answers in the order
/// the requests were given.
pub async fn at_once<F>(requests: impl IntoIterator<Item = F>) -> Vec<Answer>
where
    F: Future<Output = Answer> + Send + 'static,
{
    let tasks: Vec<_> = requests.into_iter().map(tokio::spawn).collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.expect("request task"));
    }
    answers
}

/// Asserts that exactly one answer has the status `win` and that every other one is one of
/// `lose` (status and `error.code`); returns the winner's body for the row's own checks.
#[track_caller]
pub fn one_winner<'a>(
    answers: &'a [Answer],
    win: StatusCode,
    lose: &[(StatusCode, &str)],
) -> &'a Value {
    let mut winners = Vec::new();
    let mut lost: BTreeMap<(StatusCode, &str), usize> = BTreeMap::new();
    for (status, body) in answers {
        if *status == win {
            winners.push(body);
            continue;
        }
        let answer = (*status, code(body));
        assert!(lose.contains(&answer), "unexpected {answer:?}: {body}");
        *lost.entry(answer).or_default() += 1;
    }
    assert_eq!(winners.len(), 1, "exactly one {win} (the others: {lost:?})");
    winners[0]
}
