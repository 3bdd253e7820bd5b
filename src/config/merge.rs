//! The first step: the raw layers merged into one [`RawConfig`], flags over environment over
//! the TOML file, each setting remembering where it came from.

use std::path::PathBuf;

use anyhow::{Context as _, Result};

use super::raw::RawConfig;
use super::sources::Sources;

/// Keys whose TOML value may be a number although the raw field is text.
const TEXT_KEYS: &[&str] = &[
    "turn-ttl",
    "interrupt-ttl",
    "webhook-timeout",
    "webhook-backoff",
    "interrupt-retention",
    "snapshot-retention",
    "snapshot-max-bytes",
    "item-max-bytes",
    "lease",
    "resume-deadline",
    "approval-ttl",
    "user-grant-ttl",
    "header-read-timeout",
    "connect-timeout",
    "idle-timeout",
    "drain-timeout",
    "max-header-bytes",
    "db-statement-timeout",
    "ca-lifetime",
    "ca-overlap",
];

/// Merges the file (if any) under the flags/environment layer. `DATABASE_URL` is an alias of
/// `EGRESSGATE_DATABASE_URL`, below it in precedence. The MCP state key and the Slack secrets
/// are never serialised (so they can never be printed with the settings), so their flag or
/// environment values are carried across the merge by hand.
pub fn merge(cli: RawConfig) -> Result<RawConfig> {
    let kept = cli.clone();
    let mut merged = merge_layers(cli)?;
    for (given, into) in [
        (kept.mcp_state_key, &mut merged.mcp_state_key),
        (kept.slack_signing_secret, &mut merged.slack_signing_secret),
        (kept.slack_webhook_url, &mut merged.slack_webhook_url),
        (kept.slack_bot_token, &mut merged.slack_bot_token),
    ] {
        if given.is_some() {
            *into = given;
        }
    }
    Ok(merged)
}

fn merge_layers(cli: RawConfig) -> Result<RawConfig> {
    let mut sources = cli.sources.clone();
    let mut top = serde_json::to_value(&cli).context("internal: config serialisation")?;
    if let Some(obj) = top.as_object_mut()
        && obj
            .get("database-url")
            .is_none_or(serde_json::Value::is_null)
        && let Ok(url) = std::env::var("DATABASE_URL")
    {
        obj.insert("database-url".into(), url.into());
        sources.set("database-url", "DATABASE_URL".into());
    }
    let Some(path) = &cli.config else {
        return cli_with(top, cli.config.clone(), sources);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let file: toml::Table =
        toml::from_str(&text).with_context(|| format!("invalid TOML in {}", path.display()))?;
    let mut base = serde_json::to_value(file).context("config file")?;
    if let Some(obj) = base.as_object() {
        for key in obj.keys() {
            sources.set(key, format!("{key} (in {})", path.display()));
        }
    }
    if let Some(obj) = base.as_object_mut() {
        for key in TEXT_KEYS {
            if let Some(v) = obj.get_mut(*key)
                && v.is_number()
            {
                *v = serde_json::Value::String(v.to_string());
            }
        }
        if let Some(serde_json::Value::Object(top)) = Some(&top) {
            for (k, v) in top {
                let unset = v.is_null() || v.as_array().is_some_and(Vec::is_empty);
                if !unset {
                    obj.insert(k.clone(), v.clone());
                    if let Some(l) = cli.sources.recorded(k) {
                        sources.set(k, l.clone());
                    }
                }
            }
        }
    }
    // Validate the file's keys through the same struct (unknown keys are errors).
    let merged: RawConfig = serde_json::from_value(base)
        .with_context(|| format!("invalid setting in {}", path.display()))?;
    Ok(RawConfig {
        config: cli.config,
        sources,
        ..merged
    })
}

fn cli_with(v: serde_json::Value, config: Option<PathBuf>, sources: Sources) -> Result<RawConfig> {
    let raw: RawConfig = serde_json::from_value(v).context("internal: config")?;
    Ok(RawConfig {
        config,
        sources,
        ..raw
    })
}
