//! The deployment key store: generated once, then the same key for every caller (so every
//! control process of a deployment seals and opens the same MCP states), on both backends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use egressgate_store::Timestamp;
use support::TestApp;

#[tokio::test]
async fn generated_once_then_kept() {
    let app = TestApp::new().await;
    let key = async |name: &str, fresh: u8| {
        let store = &app.store;
        let fresh = move || vec![fresh; 32];
        store
            .deployment_key(name, fresh, Timestamp::now())
            .await
            .unwrap()
    };
    let first = key("mcp-state", 1).await;
    assert_eq!(first, vec![1; 32]);
    let again = key("mcp-state", 2).await;
    assert_eq!(again, first, "a later start keeps the stored key");
    let other = key("other", 3).await;
    assert_eq!(other, vec![3; 32]);
}
