//! `egressgate backup PATH` on the real binary: a copy taken while `serve` runs opens, as the
//! data directory's database of a second server, with the approvals, cards and lists it had
//! when taken (and not what came after); an existing file is never replaced; PostgreSQL is
//! told to use `pg_dump`. The restore is the documented one: the copy becomes the data
//! directory's `egressgate.db`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use support::*;

fn backup(path: &Path, data: &Path) -> std::process::Output {
    egressgate()
        .arg("backup")
        .arg(path)
        .arg("--data-dir")
        .arg(data)
        .env_remove("DATABASE_URL")
        .env_remove("EGRESSGATE_DATABASE_URL")
        .output()
        .unwrap()
}

/// What a person and the runtime see of the deployment: the chat's approvals, each card's
/// outcome, the administrators' site list.
async fn seen(api: &Api, cards: &[&str]) -> serde_json::Value {
    let mut outcomes = Vec::new();
    for id in cards {
        outcomes.push(api.outcome(id).await);
    }
    let sites = api.get("/v1/admin/sites", ADMIN).await;
    assert_eq!(sites.status, 200, "{}", sites.text());
    serde_json::json!({
        "approvals": api.chat_approvals("alice", "c1").await,
        "cards": outcomes,
        "sites": sites.json(),
    })
}

#[tokio::test]
async fn a_backup_taken_while_serving_restores_the_deployment_as_it_was() {
    let g = gate().database("sqlite-default").start();
    let api = g.api();
    api.admin_site("pypi.example").await;
    let turn = api.turn("alice", "c1", &[]).await;
    let (approved_id, _) = approved(&api, &turn, &["https://data.example/file.csv"]).await;
    let other = api.turn("alice", "c2", &[]).await;
    let (pending_id, _) = ask(&api, &other, &["https://pending.example/y"]).await;
    let cards = [approved_id.as_str(), pending_id.as_str()];
    let before = seen(&api, &cards).await;
    assert_eq!(
        before["approvals"]["approvals"].as_array().unwrap().len(),
        1,
        "{before}"
    );
    assert_eq!(before["cards"][1]["state"], "pending", "{before}");

    let out_dir = tempfile::tempdir().unwrap();
    let copy = out_dir.path().join("egressgate-backup.db");
    let data = g.data_dir.path().join("data");
    let out = backup(&copy, &data);
    let said = stdout_of(&out, "backup");
    assert!(
        said.starts_with("backed up the database (schema version ")
            && said.ends_with(&format!(" to {}\n", copy.display())),
        "{said}"
    );
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o600,
        "the copy holds token hashes and every decision"
    );

    // After the copy: a site it must not have.
    api.admin_site("later.example").await;

    // A second backup to the same file is refused and leaves the first one as it was.
    let first = std::fs::read(&copy).unwrap();
    let again = backup(&copy, &data);
    assert!(!again.status.success());
    let why = String::from_utf8_lossy(&again.stderr);
    assert!(
        why.contains("exists: a backup never replaces a file"),
        "{why}"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), first);
    drop(g);

    // Restore: the copy is the new data directory's database.
    let restored = tempfile::tempdir().unwrap();
    let restored_data = restored.path().join("data");
    std::fs::create_dir(&restored_data).unwrap();
    std::fs::copy(&copy, restored_data.join("egressgate.db")).unwrap();
    let second = gate().database("sqlite-default").data_dir(restored).start();
    let after = seen(&second.api(), &cards).await;
    assert_eq!(after, before);
    assert!(!after.to_string().contains("later.example"), "{after}");
}

#[test]
fn postgres_is_told_to_use_pg_dump_and_a_missing_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    let out = egressgate()
        .arg("backup")
        .arg(&copy)
        .args([
            "--database-url",
            "postgres://egressgate:s3cret@127.0.0.1:1/egressgate",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(why.contains("pg_dump"), "{why}");
    assert!(
        !why.contains("s3cret"),
        "the password is never printed: {why}"
    );
    assert!(!copy.exists());

    let out = backup(&copy, &dir.path().join("no-data-here"));
    assert!(!out.status.success());
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(why.contains("no egressgate database in"), "{why}");
    assert!(
        !copy.exists(),
        "nothing is created when there is nothing to copy"
    );
}
