//! The schema's upgrade path on the real binary: `egressgate migrate` says what it applied,
//! `--status` and `--dry-run` apply nothing, a server refuses a database that is behind until
//! it is migrated (or started with `--auto-migrate`), and every subcommand refuses a database
//! a newer binary migrated. The "previous release's database" is built from this repository's
//! own migration files minus the newest, recorded as sqlx records them (SHA-384 checksums), so
//! the test follows every new migration without a binary fixture. Behind and ahead are tried on
//! SQLite (the file is edited directly); the migrate command's reports on both stores. Beside
//! it, a database an older release made in real use (kept as an SQL fixture) must keep every row
//! through the migration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::*;

fn egressgate(args: &[&str], db: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(args)
        .args(db)
        .env_remove("DATABASE_URL")
        .env_remove("EGRESSGATE_DATABASE_URL")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The database settings of a fresh store: PostgreSQL in CI when given, else SQLite in `dir`.
fn store_args(dir: &Path) -> Vec<String> {
    match postgres_database_for(dir) {
        Some(url) => vec!["--database-url".into(), url],
        None => vec!["--data-dir".into(), dir.join("data").display().to_string()],
    }
}

/// The repository's SQLite migrations, oldest first: (version, SQL).
fn migrations() -> Vec<(i64, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    let mut all: Vec<(i64, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let version = name.split('_').next().unwrap().parse().unwrap();
            (version, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    all.sort();
    all
}

/// Runs a Python snippet against the SQLite file `db` (`DB` in the snippet).
fn sqlite(db: &Path, script: &str) {
    let status = Command::new("python3")
        .args(["-c", &format!("import sqlite3, hashlib, sys\nDB = sqlite3.connect(sys.argv[1])\n{script}\nDB.commit()")])
        .arg(db)
        .status()
        .unwrap();
    assert!(status.success(), "python3 sqlite3 failed");
}

/// Makes `dir/data/egressgate.db` as the previous release left it: every migration but the
/// newest applied and recorded.
fn previous_release_database(dir: &Path) -> i64 {
    let all = migrations();
    let (previous, newest) = all.split_at(all.len() - 1);
    schema_database(dir, previous, true);
    newest[0].0
}

/// Makes `dir/data/egressgate.db` with `applied` run in order, each recorded as sqlx records
/// it when `record` (else the caller brings the records).
fn schema_database(dir: &Path, applied: &[(i64, String)], record: bool) {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let mut script = String::from(
        "DB.execute('CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL, \
         checksum BLOB NOT NULL, execution_time BIGINT NOT NULL)')\n",
    );
    for (version, sql) in applied {
        let quoted = serde_json::to_string(sql).unwrap();
        script.push_str(&format!("s = {quoted}\nDB.executescript(s)\n"));
        if record {
            script.push_str(&format!(
                "DB.execute('INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (?, ?, 1, ?, 0)', ({version}, 'v{version}', hashlib.sha384(s.encode()).digest()))\n"
            ));
        }
    }
    sqlite(&dir.join("data/egressgate.db"), &script);
}

#[test]
fn migrate_says_what_it_applied_and_status_and_dry_run_apply_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_args(dir.path());
    let newest = migrations().last().unwrap().0;

    let dry = egressgate(&["migrate", "--dry-run"], &db);
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(
        text(&dry).contains("would apply 1 schema\n"),
        "{}",
        text(&dry)
    );
    let status = egressgate(&["migrate", "--status"], &db);
    assert!(status.status.success(), "{}", text(&status));
    let s = text(&status);
    assert!(
        s.starts_with("no schema yet\n"),
        "the dry run applied nothing: {s}"
    );
    assert!(s.contains("   1  pending  schema\n"), "{s}");

    let first = egressgate(&["migrate"], &db);
    assert!(first.status.success(), "{}", text(&first));
    let f = text(&first);
    assert!(f.contains("applied 1 schema\n"), "{f}");
    assert!(f.contains(&format!("applied {newest} ")), "{f}");
    assert!(
        f.ends_with(&format!("the schema is at version {newest}\n")),
        "{f}"
    );

    let again = egressgate(&["migrate"], &db);
    assert_eq!(
        text(&again),
        format!("nothing to apply: the schema is at version {newest}\n")
    );
    let s = text(&egressgate(&["migrate", "--status"], &db));
    assert!(s.contains("   1  applied  schema\n"), "{s}");
    assert!(!s.contains("pending"), "{s}");
    assert!(s.ends_with("the schema is current\n"), "{s}");
}

/// A server on the previous release's database refuses with what to do; `migrate` upgrades
/// it (saying so); a server started with `--auto-migrate` upgrades it itself.
#[test]
fn a_server_refuses_a_database_that_is_behind_until_it_is_migrated() {
    for auto in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let newest = previous_release_database(dir.path());
        let data = dir.path().join("data").display().to_string();
        let db = vec!["--data-dir".to_owned(), data.clone()];

        let status = text(&egressgate(&["migrate", "--status"], &db));
        assert!(
            status.contains(&format!("{newest:>4}  pending ")),
            "{status}"
        );
        let refused = egressgate(&["admin", "sites", "list"], &db);
        assert!(!refused.status.success());
        let why = text(&refused);
        assert!(
            why.contains(&format!("this egressgate needs {newest} (1 pending"))
                && why.contains("run `egressgate migrate`"),
            "{why}"
        );
        if auto {
            let g = gate()
                .database("sqlite-default")
                .data_dir(dir)
                .args(&["--auto-migrate", "true"])
                .start();
            assert_eq!(
                g.log_lines("database migrated at start").len(),
                1,
                "{:?}",
                g.log.lock().unwrap()
            );
            let listed = egressgate(&["admin", "sites", "list"], &db);
            assert!(listed.status.success(), "{}", text(&listed));
            continue;
        } else {
            let m = text(&egressgate(&["migrate"], &db));
            assert!(m.starts_with(&format!("applied {newest} ")), "{m}");
        }
        let listed = egressgate(&["admin", "sites", "list"], &db);
        assert!(listed.status.success(), "{}", text(&listed));
    }
}

/// A database a newer egressgate migrated is refused by every subcommand, `migrate` included
/// (it applies nothing), and `--status` names the unknown version.
#[test]
fn every_subcommand_refuses_a_database_a_newer_binary_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = vec!["--data-dir".to_owned(), data.display().to_string()];
    assert!(egressgate(&["migrate"], &db).status.success());
    sqlite(
        &data.join("egressgate.db"),
        "DB.execute(\"INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (9999, 'future', 1, x'00', 0)\")",
    );
    for args in [
        &["migrate"][..],
        &["admin", "sites", "list"],
        &["ca", "print"],
    ] {
        let o = egressgate(args, &db);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("at version 9999, newer than this egressgate knows"),
            "{args:?}: {}",
            text(&o)
        );
    }
    let s = text(&egressgate(&["migrate", "--status"], &db));
    assert!(s.contains("9999  unknown"), "{s}");
    assert!(
        s.ends_with("the database is newer than this egressgate: run the newer one\n"),
        "{s}"
    );
}

/// The database a previous release left after real use (`tests/fixtures/schema14-rows.sql`:
/// schema version 14 with a pre-approved site, an approval and three cards, one approved, one
/// declined, one pending; `tests/fixtures/make_upgrade_fixture.py` says how it was made) is
/// migrated by this binary with every row kept, column for column, in every table. The
/// fixture holds the rows and the release's own migration records; the schema they sit in is
/// made from this repository's migrations up to 14, and `migrate` checks the release's
/// checksums against those files before it applies anything.
#[test]
fn the_previous_releases_database_keeps_every_approval_and_card() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let up_to_14: Vec<_> = migrations().into_iter().filter(|(v, _)| *v <= 14).collect();
    schema_database(dir.path(), &up_to_14, false);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema14-rows.sql");
    let load = format!(
        "DB.executescript(open({:?}).read())",
        fixture.display().to_string()
    );
    sqlite(&data.join("egressgate.db"), &load);
    let before = dir.path().join("before.db");
    std::fs::copy(data.join("egressgate.db"), &before).unwrap();
    let db = vec!["--data-dir".to_owned(), data.display().to_string()];

    let status = text(&egressgate(&["migrate", "--status"], &db));
    assert!(
        status.starts_with("the schema is at version 14\n"),
        "{status}"
    );
    let migrated = egressgate(&["migrate"], &db);
    assert!(migrated.status.success(), "{}", text(&migrated));
    assert!(
        text(&migrated).starts_with("applied 15 "),
        "{}",
        text(&migrated)
    );

    // Every row of every table of the fixture, looked up by all its columns in the migrated
    // database: {table: [rows found, rows in the fixture]}.
    let check = Command::new("python3")
        .args([
            "-c",
            "import json, sqlite3, sys\n\
             old = sqlite3.connect(sys.argv[1])\n\
             new = sqlite3.connect(sys.argv[2])\n\
             out = {}\n\
             for (t,) in old.execute(\"SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'\"):\n\
             \x20   cols = [r[1] for r in old.execute(f'PRAGMA table_info(\"{t}\")')]\n\
             \x20   rows = old.execute(f'SELECT * FROM \"{t}\"').fetchall()\n\
             \x20   cond = ' AND '.join(f'\"{c}\" IS ?' for c in cols)\n\
             \x20   found = sum(new.execute(f'SELECT COUNT(*) FROM \"{t}\" WHERE {cond}', r).fetchone()[0] == 1 for r in rows)\n\
             \x20   out[t] = [found, len(rows)]\n\
             print(json.dumps(out))",
        ])
        .arg(&before)
        .arg(data.join("egressgate.db"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let kept: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    for (table, counts) in kept.as_object().unwrap() {
        assert_eq!(
            counts[0], counts[1],
            "{table}: rows lost or changed: {kept}"
        );
    }
    assert_eq!(kept["approvals"][1], 1, "{kept}");
    assert_eq!(kept["interrupts"][1], 3, "{kept}");
    assert_eq!(kept["admin_sites"][1], 1, "{kept}");
    assert_eq!(kept["turns"][1], 3, "{kept}");

    let listed = egressgate(&["admin", "sites", "list"], &db);
    assert!(text(&listed).contains("pypi.example"), "{}", text(&listed));
}
