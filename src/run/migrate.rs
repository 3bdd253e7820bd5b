//! `egressgate migrate`: the schema's one upgrade path. It says what it applied (or, with
//! `--dry-run`, what it would), and `--status` lists every version this binary knows as
//! applied or pending, so an operator can check a database before and after an upgrade.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::{Context as _, Result, bail};
use egressgate_store::db::schema::{self, SchemaState};

use super::database::{Create, open};
use super::load;
use crate::cli::MigrateArgs;

/// Runs `migrate` with its flags; what it says goes to stdout.
pub(super) async fn run(args: MigrateArgs) -> Result<()> {
    let cfg = load(args.db)?;
    let store = open(&cfg, Create::Yes).await?;
    let applied = store
        .applied_versions()
        .await
        .context("cannot read the database's schema version")?;
    let state = SchemaState::of(&applied);
    let mut out = String::new();
    if args.status {
        status(&mut out, &applied, &state);
    } else if let SchemaState::Ahead { at, known } = state {
        bail!(
            "the database's schema is at version {at}, newer than this egressgate knows (up to \
             {known}): nothing was applied; run the newer egressgate"
        );
    } else if args.dry_run {
        let pending: Vec<_> = schema::known()
            .filter(|v| !applied.contains(&v.number))
            .collect();
        for v in &pending {
            let _ = writeln!(out, "would apply {} {}", v.number, v.description);
        }
        if pending.is_empty() {
            let _ = writeln!(out, "nothing to apply: {}", at_version(&applied));
        }
    } else {
        let done = store.migrate().await.context("migration failed")?;
        for v in &done {
            let _ = writeln!(out, "applied {} {}", v.number, v.description);
        }
        let now = store.applied_versions().await?;
        match done.is_empty() {
            true => writeln!(out, "nothing to apply: {}", at_version(&now)),
            false => writeln!(out, "{}", at_version(&now)),
        }
        .ok();
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .context("cannot write to stdout")
}

/// `--status`: the database's version and every version this binary knows, applied or not,
/// then any the database has that this binary does not know.
fn status(out: &mut String, applied: &[i64], state: &SchemaState) {
    let _ = writeln!(out, "{}", at_version(applied));
    for v in schema::known() {
        let mark = if applied.contains(&v.number) {
            "applied"
        } else {
            "pending"
        };
        let _ = writeln!(out, "{:>4}  {mark:<8} {}", v.number, v.description);
    }
    for unknown in applied
        .iter()
        .filter(|a| !schema::known().any(|v| v.number == **a))
    {
        let _ = writeln!(
            out,
            "{unknown:>4}  unknown  (applied by a newer egressgate)"
        );
    }
    let _ = writeln!(
        out,
        "{}",
        match state {
            SchemaState::Empty => "the database is new: `egressgate migrate` creates the schema",
            SchemaState::Current => "the schema is current",
            SchemaState::Behind { .. } =>
                "migrations are pending: back up, then run `egressgate migrate`",
            SchemaState::Ahead { .. } =>
                "the database is newer than this egressgate: run the newer one",
        }
    );
}

/// "the schema is at version N" (or that none is applied).
fn at_version(applied: &[i64]) -> String {
    match applied.iter().max() {
        Some(v) => format!("the schema is at version {v}"),
        None => "no schema yet".to_owned(),
    }
}
