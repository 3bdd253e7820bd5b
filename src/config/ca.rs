//! The deployment CA's settings: `ca-lifetime`, `ca-overlap`, `ca-name-constraints` (with the
//! names the configuration inspects) and the seal key of its PostgreSQL copy, from
//! `EGRESSGATE_CA_SEAL_KEY` or `ca-seal-key-file`.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_proxy::registry::Ecosystem;
use egressgate_store::ca::{CaPolicy, SealKey};
use egressgate_store::{Host, SitePattern};

use super::raw::RawConfig;
use super::values::duration;

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
    let lifetime = setting!(duration, raw.ca_lifetime, default = d.lifetime);
    let overlap = setting!(duration, raw.ca_overlap, default = d.overlap);
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
