//! `egressgate admin tokens add|list|remove`: the admin API's token operations, straight on
//! the database (for bootstrapping before any admin token is handed out). The secret of an
//! added token is printed once on stdout, alone, so `TOKEN=$(egressgate admin tokens add …)`
//! captures it; what was added goes to stderr.

use std::io::Write as _;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_store::db::tokens::{NAME_MAX, NewToken, Scope, Scopes, TTL_MAX, valid_name};
use egressgate_store::{Secret, Store, Timestamp};

use crate::cli::TokenOp;
use crate::config;

/// Who the audit log names for changes made here.
const ACTOR: &str = "admin-cli";

/// Runs one token operation on an opened, migrated store.
pub async fn run(store: &Store, op: TokenOp) -> Result<()> {
    let now = Timestamp::now();
    let mut out = String::new();
    match op {
        TokenOp::Add {
            name, scopes, ttl, ..
        } => {
            if !valid_name(&name) {
                bail!("token name must be 1 to {NAME_MAX} letters, digits, '.', '_' or '-'");
            }
            let scopes = scopes
                .iter()
                .map(|s| {
                    Scope::parse(s).ok_or_else(|| {
                        let known: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
                        anyhow!("unknown scope {s:?}; known: {}", known.join(", "))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let expires_at = match ttl {
                None => None,
                Some(t) => {
                    let d = config::duration("ttl", &Some(t), TTL_MAX)?;
                    if d.is_zero() || d > TTL_MAX {
                        bail!(
                            "--ttl must be between 1s and {}d",
                            TTL_MAX.as_secs() / 86_400
                        );
                    }
                    Some(now.plus(d))
                }
            };
            let secret = Secret::generate();
            let new = NewToken {
                name: &name,
                hash: &secret.hash(),
                scopes: Scopes::of(scopes),
                expires_at,
            };
            if !store.add_token(&new, ACTOR, now).await? {
                bail!("a token named {name:?} exists; remove it first");
            }
            out.push_str(secret.expose());
            out.push('\n');
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "added token {name} ({}), {}; the secret above is shown once",
                    scope_list(new.scopes),
                    expiry(expires_at)
                );
            }
        }
        TokenOp::List { .. } => {
            for t in store.list_tokens().await? {
                out.push_str(&format!(
                    "{}\t{}\t{}\n",
                    t.name,
                    scope_list(t.scopes),
                    expiry(t.expires_at)
                ));
            }
        }
        TokenOp::Remove { name, .. } => {
            if !store.remove_token(&name, ACTOR, now).await? {
                bail!("no token named {name:?}");
            }
            out.push_str(&format!("removed {name}\n"));
        }
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .context("stdout")
}

fn scope_list(s: Scopes) -> String {
    s.iter().map(Scope::as_str).collect::<Vec<_>>().join(",")
}

fn expiry(at: Option<Timestamp>) -> String {
    at.map_or_else(
        || "never expires".to_owned(),
        |t| {
            let text = serde_json::to_value(t)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("expires {text}")
        },
    )
}
