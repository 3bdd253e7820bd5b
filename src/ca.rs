//! The deployment CA in the binary: its settings (`ca-lifetime`, `ca-overlap`,
//! `ca-name-constraints`, the seal key from `EGRESSGATE_CA_SEAL_KEY` or `ca-seal-key-file`),
//! where a process keeps it, who makes it (a proxy when it starts, and `ca print`; the control
//! plane only reads it), and what `ca print` and `ca rotate` do.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_proxy::registry::Ecosystem;
use egressgate_store::ca::{CaError, CaHome, CaPolicy, SealKey};
use egressgate_store::{Backend, Host, SitePattern, Store, Timestamp};

use crate::cli::RawConfig;
use crate::config::{self, Config};

/// The environment variable holding the seal key itself (never a flag: it would show in the
/// process list).
const SEAL_KEY_VAR: &str = "EGRESSGATE_CA_SEAL_KEY";

/// The CA's validated settings.
#[derive(Clone, Debug, Default)]
pub struct CaSettings {
    /// How CAs are made and replaced.
    pub policy: CaPolicy,
    /// The key sealing the CA's key in PostgreSQL.
    pub seal: Option<SealKey>,
}

/// Validates the CA settings. `inspect` is the parsed `--inspect` list: with
/// `ca-name-constraints`, those patterns and the enabled registries' hosts are the names the
/// CA permits (with the administrators' entries marked `inspect`, read when it is made).
pub fn settings(
    raw: &RawConfig,
    inspect: &[SitePattern],
    l: &dyn Fn(&str) -> String,
) -> Result<CaSettings> {
    let d = CaPolicy::default();
    let lifetime = config::duration(&l("ca-lifetime"), &raw.ca_lifetime, d.lifetime)?;
    let overlap = config::duration(&l("ca-overlap"), &raw.ca_overlap, d.overlap)?;
    if overlap.is_zero() || overlap >= lifetime {
        bail!(
            "{} ({}) must be longer than zero and shorter than {} ({}): a CA with less than \
             the overlap left is replaced",
            l("ca-overlap"),
            humantime::format_duration(overlap),
            l("ca-lifetime"),
            humantime::format_duration(lifetime)
        );
    }
    let names = raw
        .ca_name_constraints
        .unwrap_or(false)
        .then(|| inspected_names(raw, inspect));
    Ok(CaSettings {
        policy: CaPolicy {
            lifetime,
            overlap,
            names,
        },
        seal: seal_key(raw, l)?,
    })
}

/// The names the configuration inspects: the `--inspect` patterns and every host of an
/// enabled registry (their requests are judged package by package, inside TLS). Addresses
/// are left out: a leaf is only ever minted for a name.
fn inspected_names(raw: &RawConfig, inspect: &[SitePattern]) -> Vec<SitePattern> {
    let builtin = raw
        .registry
        .iter()
        .filter_map(|r| Ecosystem::parse(r))
        .flat_map(|e| e.builtin_hosts().iter().copied());
    let mirrors = raw
        .registry_mirror
        .iter()
        .filter_map(|m| m.split_once('=').map(|(_, hosts)| hosts))
        .flat_map(|hosts| hosts.split(',').map(str::trim));
    let hosts = builtin
        .chain(mirrors)
        .filter_map(|h| Host::parse(h).ok())
        .filter(|h| !h.is_ip_literal())
        .map(SitePattern::Exact);
    inspect.iter().cloned().chain(hosts).collect()
}

/// The seal key from [`SEAL_KEY_VAR`] or `ca-seal-key-file` (an empty variable counts as
/// unset); the key itself never appears in an error.
fn seal_key(raw: &RawConfig, l: &dyn Fn(&str) -> String) -> Result<Option<SealKey>> {
    let var = std::env::var(SEAL_KEY_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty());
    match (var, &raw.ca_seal_key_file) {
        (Some(_), Some(_)) => bail!(
            "{SEAL_KEY_VAR} and {} both give the CA seal key: give one",
            l("ca-seal-key-file")
        ),
        (Some(key), None) => SealKey::from_base64(&key)
            .map(Some)
            .map_err(|e| anyhow!("{SEAL_KEY_VAR}: {e}")),
        (None, Some(path)) => read_seal_key(path, &l("ca-seal-key-file")).map(Some),
        (None, None) => Ok(None),
    }
}

fn read_seal_key(path: &Path, name: &str) -> Result<SealKey> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{name} {}", path.display()))?;
    SealKey::from_base64(&text).map_err(|e| anyhow!("{name} {}: {e}", path.display()))
}

/// Where this deployment keeps its CA: a 0600 file in the data directory for SQLite, the
/// database (key sealed) for PostgreSQL, so every proxy sharing it mints under the same CA.
pub fn home(cfg: &Config, store: &Store) -> CaHome {
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
pub async fn start(cfg: &mut Config, store: &Store, with_proxy: bool) -> Result<()> {
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
pub async fn print(cfg: &Config, store: &Store) -> Result<()> {
    let home = home(cfg, store);
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
pub async fn rotate(cfg: &Config, store: &Store, overlap: Duration) -> Result<()> {
    let overlap_ms =
        i64::try_from(overlap.as_millis()).map_err(|_| anyhow!("--overlap: too long"))?;
    let until = home(cfg, store)
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
