//! The second step: the merged raw configuration validated into a [`Config`], each plane's
//! settings by its own module, any bad value one clear error line.

use std::path::PathBuf;

use anyhow::{Result, bail};
use egressgate_store::PoolOptions;

use super::raw::RawConfig;
use super::values::{duration, host, public_url, redact, socket};
use super::{Config, Database, Listen, LogFormat, ca, control, proxy};

/// Validates the merged raw configuration.
pub fn validate(raw: &RawConfig) -> Result<Config> {
    let l = |key: &str| raw.sources.label(key);
    let log_format = match raw.log_format.as_deref() {
        None | Some("text") => LogFormat::Text,
        Some("json") => LogFormat::Json,
        Some(other) => bail!("{} {other:?}: expected text or json", l("log-format")),
    };
    let data_dir = raw
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("egressgate-data"));
    let database = match raw.database_url.as_deref() {
        None | Some("") => Database::Sqlite,
        Some(u)
            if u.starts_with("postgres://")
                || u.starts_with("postgresql://")
                || u.starts_with("sqlite:") =>
        {
            Database::Url(u.to_owned())
        }
        Some(u) => bail!(
            "{}: unsupported URL scheme in {:?} (use postgres:// or sqlite://)",
            l("database-url"),
            redact(u)
        ),
    };
    let proxy_listen = socket(&l("proxy-listen"), &raw.proxy_listen, "127.0.0.1:3128")?;
    let control_listen = socket(&l("control-listen"), &raw.control_listen, "127.0.0.1:8080")?;
    let metrics_listen = raw
        .metrics_listen
        .as_ref()
        .map(|_| socket(&l("metrics-listen"), &raw.metrics_listen, ""))
        .transpose()?;
    let proxy_public_url = match &raw.proxy_public_url {
        Some(u) => public_url(&l("proxy-public-url"), u)?,
        None => proxy_listen.to_string(),
    };
    let internal_suffixes = raw
        .internal_suffix
        .iter()
        .map(|s| host(&l("internal-suffix"), s.trim_start_matches('.')))
        .collect::<Result<Vec<_>>>()?;
    let proxy = proxy::settings(raw, &internal_suffixes)?;
    let ca = ca::settings(raw, &proxy.inspect, &l)?;
    let control = control::settings(
        raw,
        proxy.inspect.clone(),
        internal_suffixes,
        proxy_public_url,
        control_listen,
    )?;
    let p = PoolOptions::default();
    let pool = PoolOptions {
        max_connections: raw.db_max_connections.unwrap_or(p.max_connections).max(1),
        statement_timeout: setting!(
            duration,
            raw.db_statement_timeout,
            default = p.statement_timeout
        ),
        ..p
    };
    Ok(Config {
        auto_migrate: raw.auto_migrate.unwrap_or(false),
        log_format,
        data_dir,
        database,
        pool,
        listen: Listen {
            proxy: proxy_listen,
            control: control_listen,
            metrics: metrics_listen,
        },
        control_addrs: crate::selfaddr::control_addrs(&l("control-addr"), &raw.control_addr)?,
        proxy_public_url_given: raw.proxy_public_url.is_some(),
        control_public_url_given: raw.control_public_url.is_some(),
        proxy,
        control,
        ca,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::merge;

    /// The settings file the Debian package ships.
    const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/debian/egressgate.toml");

    fn load_file(path: &std::path::Path) -> Result<Config> {
        validate(&merge(RawConfig {
            config: Some(path.to_owned()),
            ..RawConfig::default()
        })?)
    }

    /// The package's settings file loads as shipped, and so does every example it shows
    /// commented out (`# key = value`), all at once: every key in it is a real key with a
    /// valid value, however the file is edited.
    #[test]
    fn the_packaged_settings_file_and_each_of_its_examples_are_valid() {
        let shipped = load_file(SHIPPED.as_ref()).unwrap_or_else(|e| unreachable!("{e:#}"));
        assert_eq!(shipped.data_dir, PathBuf::from("/var/lib/egressgate"));
        assert_eq!(shipped.listen.control.to_string(), "127.0.0.1:8080");
        assert!(matches!(shipped.database, Database::Sqlite));

        let text = std::fs::read_to_string(SHIPPED).unwrap_or_else(|e| unreachable!("{e}"));
        let mut examples = 0;
        let uncommented: String = text
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest)
                    if rest.split_once(" = ").is_some_and(|(k, _)| {
                        !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    }) =>
                {
                    examples += 1;
                    format!("{rest}\n")
                }
                _ => format!("{l}\n"),
            })
            .collect();
        assert!(examples >= 15, "only {examples} examples found");
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let all = dir.path().join("all.toml");
        std::fs::write(&all, uncommented).unwrap_or_else(|e| unreachable!("{e}"));
        let cfg = load_file(&all).unwrap_or_else(|e| unreachable!("{e:#}"));
        assert!(matches!(cfg.database, Database::Url(_)));
        assert_eq!(cfg.log_format, LogFormat::Text);
    }

    #[test]
    fn a_state_key_given_by_flag_or_environment_survives_the_merge() {
        let raw = RawConfig {
            mcp_state_key: Some("k".repeat(40)),
            ..RawConfig::default()
        };
        let merged = merge(raw).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            merged.mcp_state_key.as_deref(),
            Some("k".repeat(40).as_str())
        );
        let cfg = validate(&merged).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(cfg.control.mcp_state_key.map(|k| k.0.len()), Some(40));
        let short = RawConfig {
            mcp_state_key: Some("short".into()),
            ..RawConfig::default()
        };
        assert!(validate(&merge(short).unwrap_or_else(|e| unreachable!("{e}"))).is_err());
    }
}
