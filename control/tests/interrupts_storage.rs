//! What a registration stores beside its row, and what happens when it cannot: a snapshot or
//! an audit row that cannot be written leaves no interrupt and the draft usable; a first
//! answer over the item limit moves whole to the blob store; and the janitor purges old rows
//! and orphaned blobs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use egressgate_control::Settings;
use egressgate_store::Timestamp;
use egressgate_store::blob::{BlobError, BlobFuture, BlobRef, BlobStore, DirBlobStore};
use serde_json::json;
use support::{TestApp, assert_error};

/// A blob store whose writes always fail.
struct BrokenBlobs;

impl BlobStore for BrokenBlobs {
    fn put(&self, _: Vec<u8>) -> BlobFuture<'_, BlobRef> {
        Box::pin(async { Err(BlobError::Io(std::io::Error::other("disk on fire"))) })
    }
    fn read<'a>(&'a self, _: &'a str) -> BlobFuture<'a, Vec<u8>> {
        Box::pin(async { Err(BlobError::NotFound) })
    }
    fn delete<'a>(&'a self, _: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn list_older_than(&self, _: Timestamp) -> BlobFuture<'_, Vec<String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// Why a registration cannot be written whole.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The blob store fails every write.
    BrokenBlobStore,
    /// The snapshot is one byte over `--snapshot-max-bytes` (16 here).
    SnapshotOverTheLimit,
    /// The snapshot is far over it: the body itself is over the read limit.
    SnapshotFarOverTheLimit,
    /// Every audit insert fails.
    BrokenAudit,
}

#[tokio::test]
async fn a_registration_that_cannot_be_written_whole_writes_nothing() {
    let insufficient = (StatusCode::INSUFFICIENT_STORAGE, "SNAPSHOT_FAILED");
    let audit_failed = (StatusCode::SERVICE_UNAVAILABLE, "AUDIT_FAILED");
    // (the fault, the registration's snapshot, the answer)
    for (fault, snapshot, want) in [
        (Fault::BrokenBlobStore, "c25hcA==".to_owned(), insufficient),
        (
            Fault::SnapshotOverTheLimit,
            base64_of(&[7u8; 17]),
            insufficient,
        ),
        (
            Fault::SnapshotFarOverTheLimit,
            base64_of(&[7u8; 200_000]),
            insufficient,
        ),
        (Fault::BrokenAudit, "AAEC".to_owned(), audit_failed),
    ] {
        let settings = Settings {
            snapshot_max_bytes: 16,
            ..Settings::default()
        };
        let blobs: Option<Arc<dyn BlobStore>> = match fault {
            Fault::BrokenBlobStore => Some(Arc::new(BrokenBlobs)),
            _ => None,
        };
        let app = TestApp::with_blobs(settings, blobs).await;
        let (_, d) = cards::draft(&app, "alice", "c1", &["files.example.com"], &[], None).await;
        if matches!(fault, Fault::BrokenAudit) {
            cards::break_audit(&app).await;
        }
        let (status, body) = cards::register_with(&app, &d, json!({"snapshot": snapshot})).await;
        assert_error(status, &body, want, &format!("{fault:?}"));
        assert_eq!(
            app.count("SELECT COUNT(*) FROM interrupts").await,
            0,
            "{fault:?}"
        );
        let unused = "SELECT COUNT(*) FROM drafts WHERE used_at IS NULL";
        assert_eq!(
            app.count(unused).await,
            1,
            "{fault:?}: the draft stays usable"
        );
        assert_eq!(app.audit_rows("approval_requested").await, 0, "{fault:?}");
        // Mended, the same draft registers: at the limit, the snapshot is accepted.
        if matches!(fault, Fault::SnapshotOverTheLimit) {
            let at_the_limit = base64_of(&[7u8; 16]);
            cards::register(&app, &d, json!({"snapshot": at_the_limit})).await;
        }
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn a_first_answer_over_the_item_limit_moves_whole_to_the_blob_store() {
    let settings = Settings {
        item_max_bytes: 4_000,
        ..Settings::default()
    };
    let (tmp, dir) = blob_dir();
    let app = TestApp::with_blobs(settings, Some(Arc::new(dir.clone()))).await;
    let (_, d) = cards::draft(&app, "alice", "c1", &["files.example.com"], &[], None).await;
    let long = "x".repeat(10_000);
    cards::register(&app, &d, json!({"first_answer": long})).await;
    let moved = "SELECT COUNT(*) FROM interrupts WHERE first_answer IS NULL AND first_answer_key IS NOT NULL";
    assert_eq!(app.count(moved).await, 1);
    // The blob holds the whole text.
    let p = app
        .store
        .chat_interrupt(&uid("alice"), &cid("c1"), Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    let blob = BlobRef::from_locator(p.first_answer.key.as_deref().unwrap()).unwrap();
    assert_eq!(dir.get(&blob).await.unwrap(), long.as_bytes());

    // A short one stays inline.
    let (_, d) = cards::draft(&app, "alice", "c2", &["files.example.com"], &[], None).await;
    cards::register(&app, &d, json!({"first_answer": "short"})).await;
    let inline =
        "SELECT COUNT(*) FROM interrupts WHERE first_answer = 'short' AND first_answer_key IS NULL";
    assert_eq!(app.count(inline).await, 1);
    drop(tmp);
}

/// A directory blob store the test can also read directly.
fn blob_dir() -> (tempfile::TempDir, DirBlobStore) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DirBlobStore::new(tmp.path().join("blobs")).unwrap();
    (tmp, dir)
}

fn uid(s: &str) -> egressgate_store::UserId {
    egressgate_store::UserId::parse(s).unwrap()
}

fn cid(s: &str) -> egressgate_store::ChatId {
    egressgate_store::ChatId::parse(s).unwrap()
}

#[tokio::test]
async fn the_janitor_purges_old_rows_and_orphaned_blobs() {
    let (_tmp, dir) = blob_dir();
    let app = TestApp::with_blobs(Settings::default(), Some(Arc::new(dir.clone()))).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let orphan = dir.put(b"orphan".to_vec()).await.unwrap();
    let now = Timestamp::now().plus(Duration::from_secs(2));
    let grace = Duration::from_secs(1);
    let retention = Duration::from_secs(3600);
    // Fresh rows stay; only the unreferenced blob goes.
    let counts =
        egressgate_store::db::janitor::janitor_pass(&app.store, &dir, now, retention, grace)
            .await
            .unwrap();
    assert_eq!((counts.interrupts, counts.blobs), (0, 1));
    assert!(dir.get(&orphan).await.is_err());
    // Past its purge time the row goes, and then its snapshot.
    app.exec_sql(&format!(
        "UPDATE interrupts SET purge_at = 1 WHERE interrupt_id = '{}'",
        r.id
    ))
    .await;
    let counts =
        egressgate_store::db::janitor::janitor_pass(&app.store, &dir, now, retention, grace)
            .await
            .unwrap();
    assert_eq!((counts.interrupts, counts.blobs), (1, 1));
    // A purged request is unknown.
    let (status, _) = cards::click(&app, &r).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
