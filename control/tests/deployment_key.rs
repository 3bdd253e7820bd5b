//! The deployment key store: generated once, then the same key for every caller (so every
//! control process of a deployment seals and opens the same MCP states), on both backends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use egressgate_store::Timestamp;
use support::TestApp;

#[tokio::test]
async fn generated_once_then_kept() {
    let app = TestApp::new().await;
    let first = app
        .store
        .deployment_key("mcp-state", || vec![1; 32], Timestamp::now())
        .await
        .unwrap();
    assert_eq!(first, vec![1; 32]);
    let again = app
        .store
        .deployment_key("mcp-state", || vec![2; 32], Timestamp::now())
        .await
        .unwrap();
    assert_eq!(again, first, "a later start keeps the stored key");
    let other = app
        .store
        .deployment_key("other", || vec![3; 32], Timestamp::now())
        .await
        .unwrap();
    assert_eq!(other, vec![3; 32]);
}
