//! `egressgate admin sites|packages …` on the database (the token operations are
//! `admin_tokens`): values are normalised as the admin API normalises them, and every change
//! is audited as `admin-cli`.

use std::io::Write as _;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_store::db::admin::{AdminList, SiteRules};
use egressgate_store::{PackageSpec, SitePattern, Timestamp};

use super::database::{Create, open_migrated};
use super::load;
use crate::cli::{AdminListCmd, AdminOp, TokenOp};

/// `egressgate admin sites|packages|tokens …`, straight on the database.
pub(super) async fn run(cmd: AdminListCmd) -> Result<()> {
    let (list, op) = match cmd {
        AdminListCmd::Sites { op } => (AdminList::Sites, op),
        AdminListCmd::Packages { op } => (AdminList::Packages, op),
        AdminListCmd::Tokens { op } => {
            let raw = match &op {
                TokenOp::Add { db, .. } | TokenOp::List { db } | TokenOp::Remove { db, .. } => {
                    db.clone()
                }
            };
            let store = open_migrated(&load(raw)?, Create::No).await?;
            return crate::admin_tokens::run(&store, op).await;
        }
    };
    let raw = match &op {
        AdminOp::Add { db, .. } | AdminOp::List { db } | AdminOp::Remove { db, .. } => db.clone(),
    };
    let cfg = load(raw)?;
    let store = open_migrated(&cfg, Create::No).await?;
    let now = Timestamp::now();
    let canonical = |v: &str| -> Result<String> {
        match list {
            AdminList::Sites => SitePattern::parse_grant(
                v,
                &cfg.control.internal_suffixes,
                &cfg.control.allow_whole_host,
            )
            .map(|p| p.to_key())
            .map_err(|e| anyhow!("{v:?}: {e}")),
            AdminList::Packages => PackageSpec::parse(v)
                .map(|p| p.as_str().to_owned())
                .map_err(|e| anyhow!("{v:?}: {e}")),
        }
    };
    let mut out = String::new();
    match op {
        AdminOp::Add { value, note, .. } => {
            let key = canonical(&value)?;
            let added = store
                .admin_add(
                    list,
                    &key,
                    note.as_deref(),
                    SiteRules::default(),
                    "admin-cli",
                    now,
                )
                .await?;
            out.push_str(&format!(
                "{} {key}\n",
                if added { "added" } else { "already present" }
            ));
        }
        AdminOp::Remove { value, .. } => {
            let key = canonical(&value)?;
            if !store.admin_remove(list, &key, "admin-cli", now).await? {
                bail!("{key} is not on the list");
            }
            out.push_str(&format!("removed {key}\n"));
        }
        AdminOp::List { .. } => {
            for e in store.admin_list(list).await? {
                out.push_str(&e.value);
                if let Some(n) = e.note {
                    out.push('\t');
                    out.push_str(&n);
                }
                out.push('\n');
            }
        }
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .context("stdout")?;
    Ok(())
}
