//! The control plane's settings from the merged raw configuration: lifetimes, size limits,
//! card caps, resume limits, browser origins and the MCP state key.

use std::net::SocketAddr;

use anyhow::Result;
use egressgate_control::settings::{Budget, CardCaps};
use egressgate_store::{Host, SitePattern};

use super::raw::RawConfig;
use super::values::{control_public_url, cors_origin, duration, host, mcp_state_key, size};

/// The control plane's settings. `inspect` and `internal_suffixes` are the deployment's (the
/// proxy validated them); `proxy_public_url` is what turns hand out; `control_listen` is the
/// default for card links.
pub(super) fn settings(
    raw: &RawConfig,
    inspect: Vec<SitePattern>,
    internal_suffixes: Vec<Host>,
    proxy_public_url: String,
    control_listen: SocketAddr,
) -> Result<egressgate_control::Settings> {
    let l = |key: &str| raw.sources.label(key);
    let c = egressgate_control::Settings::default();
    let public = raw
        .control_public_url
        .as_deref()
        .map(|u| control_public_url(&l("control-public-url"), u))
        .transpose()?;
    // A limit's count as given (else the default's), over its window.
    let budget = |per_window: Option<u32>, default: Budget, window| Budget {
        per_window: per_window.unwrap_or(default.per_window),
        window,
    };
    // One window for both resume limits, as one flag sets it.
    let resume_failure_window = setting!(
        duration,
        raw.resume_failure_window,
        default = c.resume_failures_per_client.window
    );
    Ok(egressgate_control::Settings {
        inspect,
        ca: None,
        proxy_public_url,
        turn_ttl: setting!(duration, raw.turn_ttl, c),
        interrupt_ttl: setting!(duration, raw.interrupt_ttl, c),
        interrupt_retention: setting!(duration, raw.interrupt_retention, c),
        snapshot_retention: setting!(duration, raw.snapshot_retention, c),
        snapshot_max_bytes: setting!(size, raw.snapshot_max_bytes, c),
        item_max_bytes: setting!(size, raw.item_max_bytes, c),
        lease: setting!(duration, raw.lease, c),
        resume_deadline: setting!(duration, raw.resume_deadline, c),
        claim_cap: setting!(raw.claim_cap, c),
        approval_ttl: setting!(duration, raw.approval_ttl, c),
        allow_user_scope: setting!(raw.allow_user_scope, c),
        user_grant_ttl: setting!(duration, raw.user_grant_ttl, c),
        resume_slots_per_user: setting!(raw.resume_slots_per_user, c),
        default_can_approve: setting!(raw.default_can_approve, c),
        card_caps: CardCaps {
            sites: raw.card_max_sites.unwrap_or(c.card_caps.sites),
            urls: raw.card_max_urls.unwrap_or(c.card_caps.urls),
            packages: raw.card_max_packages.unwrap_or(c.card_caps.packages),
        },
        internal_suffixes: internal_suffixes.clone(),
        allow_whole_host: setting!(each host, raw.allow_whole_host),
        resume_failures_per_client: budget(
            raw.resume_failures_per_client,
            c.resume_failures_per_client,
            resume_failure_window,
        ),
        resume_failures_per_card: budget(
            raw.resume_failures_per_card,
            c.resume_failures_per_card,
            resume_failure_window,
        ),
        auth_failures_per_client: budget(
            raw.auth_failures_per_client,
            c.auth_failures_per_client,
            setting!(
                duration,
                raw.auth_failure_window,
                default = c.auth_failures_per_client.window
            ),
        ),
        cors_origins: setting!(each cors_origin, raw.cors_origin),
        control_public_url: public
            .clone()
            .unwrap_or_else(|| format!("http://{control_listen}")),
        link_base: public.clone(),
        inbox_link_ttl: setting!(duration, raw.inbox_link_ttl, c),
        webhooks: egressgate_control::notify::WebhookSettings {
            timeout: setting!(duration, raw.webhook_timeout, default = c.webhooks.timeout),
            backoff: setting!(duration, raw.webhook_backoff, default = c.webhooks.backoff),
            max_attempts: raw.webhook_max_attempts.unwrap_or(c.webhooks.max_attempts),
            channels: super::email::channel(raw, public.clone())?
                .into_iter()
                .collect(),
            public_url: public,
            ..Default::default()
        },
        slack: super::slack::settings(raw, &internal_suffixes)?,
        mcp_state_key: raw
            .mcp_state_key
            .as_deref()
            .map(|k| mcp_state_key(&l("mcp-state-key"), k))
            .transpose()?,
        ..c
    })
}
