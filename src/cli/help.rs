//! What each subcommand's `--help` shows: every server subcommand accepts every setting (one
//! config file serves every process), but lists only those it reads.

use clap::{Args as _, CommandFactory as _};

use super::Cli;
use crate::config::RawConfig;

/// Settings only a database needs: what `migrate`, `backup` and `admin` show in `--help`.
const DB_KEYS: &[&str] = &[
    "config",
    "data_dir",
    "database_url",
    "db_max_connections",
    "db_statement_timeout",
    "internal_suffix",
];

/// Settings only the control plane reads: hidden from `proxy --help`.
const CONTROL_ONLY: &[&str] = &[
    "control_listen",
    "proxy_public_url",
    "turn_ttl",
    "interrupt_ttl",
    "webhook_timeout",
    "webhook_backoff",
    "webhook_max_attempts",
    "smtp_url",
    "smtp_from",
    "smtp_ca",
    "slack_signing_secret",
    "slack_webhook_url",
    "slack_bot_token",
    "slack_api_url",
    "interrupt_retention",
    "snapshot_retention",
    "snapshot_max_bytes",
    "item_max_bytes",
    "lease",
    "resume_deadline",
    "claim_cap",
    "approval_ttl",
    "allow_user_scope",
    "user_grant_ttl",
    "resume_slots_per_user",
    "default_can_approve",
    "card_max_sites",
    "card_max_urls",
    "card_max_packages",
    "resume_failures_per_client",
    "resume_failures_per_card",
    "resume_failure_window",
    "auth_failures_per_client",
    "auth_failure_window",
    "cors_origin",
    "control_public_url",
    "inbox_link_ttl",
    "mcp_state_key",
];

/// Settings only the proxy reads: hidden from `control --help`.
const PROXY_ONLY: &[&str] = &[
    "proxy_listen",
    "control_addr",
    "resolve",
    "registry",
    "registry_mirror",
    "dns_server",
    "allow_cidr",
    "allow_port",
    "tls_cert",
    "tls_key",
    "upstream_ca",
    "ca_lifetime",
    "ca_overlap",
    "ca_name_constraints",
    "ca_seal_key_file",
    "metrics_listen",
    "mode",
    "log_allowed",
    "require_sni",
    "max_refusals_per_turn",
    "header_read_timeout",
    "connect_timeout",
    "client_hello_timeout",
    "idle_timeout",
    "max_header_bytes",
    "max_connections",
    "max_connections_per_turn",
    "epoch_poll",
];

/// The command line with each subcommand's `--help` showing only the settings that
/// subcommand reads (all are still accepted, so one config file serves every process).
pub fn command() -> clap::Command {
    fn hide(cmd: clap::Command, keep: &dyn Fn(&str) -> bool) -> clap::Command {
        let cmd = cmd.mut_args(|a| {
            let id = a.get_id().as_str().to_owned();
            if keep(&id) { a } else { a.hide(true) }
        });
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        names
            .iter()
            .fold(cmd, |c, n| c.mut_subcommand(n, |sub| hide(sub, keep)))
    }
    let settings: Vec<String> = RawConfig::augment_args(clap::Command::new("settings"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_owned())
        .collect();
    let db_only = move |id: &str| !settings.iter().any(|s| s == id) || DB_KEYS.contains(&id);
    let not = |list: &'static [&'static str]| move |id: &str| !list.contains(&id);
    Cli::command()
        .mut_subcommand("migrate", |c| hide(c, &db_only))
        .mut_subcommand("backup", |c| hide(c, &db_only))
        .mut_subcommand("admin", |c| hide(c, &db_only))
        .mut_subcommand("proxy", |c| hide(c, &not(CONTROL_ONLY)))
        .mut_subcommand("control", |c| hide(c, &not(PROXY_ONLY)))
}
