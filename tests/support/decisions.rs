//! The proxy's decision lines as the logging tests read them (`--log-format json`): every
//! `proxy decision` line so far, and a bounded wait for one.

use std::time::Duration;

use serde_json::Value;

use super::*;

/// The `proxy decision` lines logged so far, as JSON.
pub fn decisions(g: &Gate) -> Vec<Value> {
    g.log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "proxy decision")
        .collect()
}

/// Waits (bounded) for a decision line matching `pred`; allowed lines are written when the
/// response or tunnel ends, just after the client saw it.
pub async fn line(g: &Gate, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = decisions(g).into_iter().find(|v| pred(v)) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no decision line for {what}: {:#?}",
            decisions(g)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
