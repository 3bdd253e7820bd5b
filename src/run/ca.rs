//! `egressgate ca print|rotate`, and where a deployment keeps its CA (which `serve` loads).

use std::io::Write as _;

use anyhow::{Context as _, Result, anyhow};
use egressgate_store::ca::CaHome;
use egressgate_store::{Backend, Store, Timestamp};

use super::database::{Create, open_migrated};
use super::load;
use crate::config::{Config, RawConfig};

/// Where this deployment keeps its CA: a 0600 file in the data directory for SQLite, the
/// database for PostgreSQL (so every proxy sharing it mints under the same CA).
pub(super) fn ca_home(cfg: &Config, store: &Store) -> CaHome {
    match store.backend() {
        Backend::Sqlite => CaHome::Dir(cfg.data_dir.clone()),
        Backend::Postgres => CaHome::Database(store.clone()),
    }
}

/// `egressgate ca print`: the CA certificate on stdout (the CA is made first if there is none).
pub(super) async fn print(raw: RawConfig) -> Result<()> {
    let cfg = load(raw)?;
    let store = open_migrated(&cfg, Create::Yes).await?;
    let pem = ca_home(&cfg, &store)
        .trusted_pem(Timestamp::now())
        .await
        .context("cannot read or create the deployment CA")?;
    let mut out = std::io::stdout().lock();
    out.write_all(pem.as_bytes())
        .context("cannot write to stdout")?;
    Ok(())
}

/// `egressgate ca rotate`: a new signing CA; the old one stays trusted for `overlap`.
pub(super) async fn rotate(raw: RawConfig, overlap: &str) -> Result<()> {
    let overlap =
        humantime::parse_duration(overlap).map_err(|e| anyhow!("--overlap {overlap:?}: {e}"))?;
    let overlap_ms =
        i64::try_from(overlap.as_millis()).map_err(|_| anyhow!("--overlap: too long"))?;
    let cfg = load(raw)?;
    let store = open_migrated(&cfg, Create::No).await?;
    let until = ca_home(&cfg, &store)
        .rotate(Timestamp::now(), overlap_ms)
        .await
        .context("cannot rotate the deployment CA")?;
    eprintln!(
        "egressgate: a new deployment CA signs from now on (proxies pick it up within seconds); \
         the previous one stays in GET /v1/ca.pem and `ca print` until {}",
        until.rfc3339()
    );
    Ok(())
}
