//! `egressgate ca print|rotate`, where a deployment keeps its CA, and who makes it: a proxy
//! when it starts (`serve` and `proxy`), and `ca print`; the control plane only reads it.

use std::io::Write as _;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use egressgate_store::ca::{CaError, CaHome};
use egressgate_store::{Backend, Store, Timestamp};

use super::database::{Create, open_migrated};
use super::load;
use crate::config::{Config, RawConfig};

/// Where this deployment keeps its CA: a 0600 file in the data directory for SQLite, the
/// database (key sealed) for PostgreSQL, so every proxy sharing it mints under the same CA.
fn home(cfg: &Config, store: &Store) -> CaHome {
    let home = match store.backend() {
        Backend::Sqlite => CaHome::dir(cfg.data_dir.clone(), store.clone()),
        Backend::Postgres => CaHome::database(store.clone(), cfg.ca.seal.clone()),
    };
    home.with_policy(cfg.ca.policy.clone())
}

/// The CA of a server process: a proxy makes (or renews) it now, signs with it and re-reads
/// it every few seconds; the control plane only reads it. A proxy without the right seal key
/// on PostgreSQL inspects nothing and says so in one error line: grants that need inspection
/// then refuse what they cannot see.
pub(super) async fn start(cfg: &mut Config, store: &Store, with_proxy: bool) -> Result<()> {
    let home = home(cfg, store);
    if with_proxy {
        match home.signing(Timestamp::now()).await {
            Ok(ca) => {
                cfg.proxy.ca = Some(Arc::new(ca));
                cfg.proxy.ca_home = Some(home.clone());
            }
            Err(e) if e.is_sealing() => tracing::error!(
                "inspection is off (this proxy ends no host's TLS; grants that need inspection \
                 refuse): {e}"
            ),
            Err(e) => return Err(e).context("cannot read or create the deployment CA"),
        }
    }
    cfg.control.ca = Some(home);
    Ok(())
}

/// `egressgate ca print`: the certificates clients should trust on stdout, the CA made first
/// when there is none.
pub(super) async fn print(raw: RawConfig) -> Result<()> {
    let cfg = load(raw)?;
    let store = open_migrated(&cfg, Create::Yes).await?;
    let home = home(&cfg, &store);
    let now = Timestamp::now();
    let pem = match home.trusted_pem(now).await {
        Err(CaError::Missing) => {
            home.signing(now)
                .await
                .context("cannot create the deployment CA")?;
            home.trusted_pem(now).await
        }
        read => read,
    }
    .context("cannot read the deployment CA")?;
    let mut out = std::io::stdout().lock();
    out.write_all(pem.as_bytes())
        .context("cannot write to stdout")?;
    Ok(())
}

/// `egressgate ca rotate`: a new signing CA, fitted to what is inspected now; the old one stays
/// trusted for `overlap` (or until its own end, if sooner).
pub(super) async fn rotate(raw: RawConfig, overlap: &str) -> Result<()> {
    let overlap =
        humantime::parse_duration(overlap).map_err(|e| anyhow!("--overlap {overlap:?}: {e}"))?;
    let overlap_ms =
        i64::try_from(overlap.as_millis()).map_err(|_| anyhow!("--overlap: too long"))?;
    let cfg = load(raw)?;
    let store = open_migrated(&cfg, Create::No).await?;
    let until = home(&cfg, &store)
        .rotate(Timestamp::now(), overlap_ms)
        .await
        .context("cannot rotate the deployment CA")?;
    match until {
        Some(until) => eprintln!(
            "egressgate: a new deployment CA signs from now on (proxies pick it up within \
             seconds); the previous one stays in GET /v1/ca.pem and `ca print` until {}",
            until.rfc3339()
        ),
        None => {
            eprintln!("egressgate: there was no deployment CA; one was made and signs from now on")
        }
    }
    Ok(())
}
