//! API bearer tokens: from `EGRESSGATE_ADMIN_TOKEN` / `EGRESSGATE_RUNTIME_TOKEN`, or generated
//! on first start. Only SHA-256 hashes are kept in the database; generated tokens are written
//! to `DATA_DIR/tokens` (mode 0600) and, with text logs, printed once on stderr, never through
//! the logger. With JSON logs stderr carries JSON only, and a log collector must not receive
//! secrets: one JSON line then says where the tokens were written, without them.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use anyhow::{Context as _, Result, anyhow};
use egressgate_control::Tokens;
use egressgate_store::db::admin::Role;
use egressgate_store::{Secret, Store, Timestamp};

use crate::config::LogFormat;

/// Resolves both roles' token hashes, generating missing ones when `may_generate`.
pub async fn load(
    store: &Store,
    data_dir: &Path,
    may_generate: bool,
    format: LogFormat,
) -> Result<Tokens> {
    let mut generated = Vec::new();
    let admin = one(
        store,
        Role::Admin,
        "EGRESSGATE_ADMIN_TOKEN",
        may_generate,
        &mut generated,
    )
    .await?;
    let runtime = one(
        store,
        Role::Runtime,
        "EGRESSGATE_RUNTIME_TOKEN",
        may_generate,
        &mut generated,
    )
    .await?;
    if !generated.is_empty() {
        // On PostgreSQL nothing else has made the data directory.
        crate::data_dir::create_private(data_dir)?;
        let path = data_dir.join("tokens");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut text = String::new();
        for (role, secret) in &generated {
            text.push_str(&format!(
                "EGRESSGATE_{}_TOKEN={}\n",
                role.as_str().to_uppercase(),
                secret.expose()
            ));
        }
        f.write_all(text.as_bytes())?;
        match format {
            #[allow(clippy::print_stderr)]
            LogFormat::Text => eprintln!(
                "egressgate: generated API tokens (shown once; also saved to {} with mode 0600):\n{text}",
                path.display()
            ),
            LogFormat::Json => tracing::warn!(
                tokens_file = %path.display(),
                roles = %generated.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>().join(","),
                "generated API tokens: written to tokens_file (mode 0600), not to the log"
            ),
        }
    }
    Ok(Tokens { admin, runtime })
}

async fn one(
    store: &Store,
    role: Role,
    env: &str,
    may_generate: bool,
    generated: &mut Vec<(Role, Secret)>,
) -> Result<egressgate_store::SecretHash> {
    if let Ok(v) = std::env::var(env)
        && !v.is_empty()
    {
        if v.len() < 16 {
            return Err(anyhow!("{env} is too short: use at least 16 characters"));
        }
        return Ok(Secret::from_presented(&v).hash());
    }
    if let Some(h) = store.token_hash(role).await? {
        return Ok(h);
    }
    if !may_generate {
        return Err(anyhow!(
            "{env} is not set and no {} token was generated yet (run `egressgate serve` once, or set it)",
            role.as_str()
        ));
    }
    let secret = Secret::generate();
    if store
        .init_token_hash(role, &secret.hash(), Timestamp::now())
        .await?
    {
        let hash = secret.hash();
        generated.push((role, secret));
        return Ok(hash);
    }
    // Another process generated it first.
    store
        .token_hash(role)
        .await?
        .ok_or_else(|| anyhow!("token for {} vanished", role.as_str()))
}
