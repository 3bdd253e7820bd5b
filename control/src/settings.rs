//! The control plane's typed settings (built by the binary from flags, env and file).

use std::time::Duration;

use egressgate_store::Host;

/// Lifetimes, caps and limits from the design, with its defaults.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Hosts the proxy inspects deployment-wide (`--inspect`): a `read` site they cover can be
    /// enforced.
    pub inspect: Vec<egressgate_store::SitePattern>,
    /// Where the deployment CA is kept, for `GET /v1/ca.pem` (`None`: no CA, answered 404).
    pub ca: Option<egressgate_store::ca::CaHome>,
    /// `host:port` put into turns' `proxy_url`.
    pub proxy_public_url: String,
    /// Default credential lifetime of a turn.
    pub turn_ttl: Duration,
    /// Logical lifetime of an interrupt (clamped below `snapshot_retention`).
    pub interrupt_ttl: Duration,
    /// How long an expired interrupt row is kept before the janitor purges it.
    pub interrupt_retention: Duration,
    /// How long snapshots are kept.
    pub snapshot_retention: Duration,
    /// Largest accepted snapshot.
    pub snapshot_max_bytes: u64,
    /// Largest pointer record.
    pub item_max_bytes: u64,
    /// A claim's lease.
    pub lease: Duration,
    /// Hard deadline for a resume after its first claim.
    pub resume_deadline: Duration,
    /// Most claims of one card before it is denied and expired.
    pub claim_cap: u32,
    /// Lifetime of an approval row.
    pub approval_ttl: Duration,
    /// Whether a person may grant to every chat of theirs (`"scope": "user"`,
    /// `--allow-user-scope`): off unless the administrator turns it on.
    pub allow_user_scope: bool,
    /// The cap on a user-scope row's lifetime (`--user-grant-ttl`): a grant that reaches every
    /// chat should not outlive a working day unless the administrator says so.
    pub user_grant_ttl: Duration,
    /// Concurrent resumes per user.
    pub resume_slots_per_user: u32,
    /// Whether users without a row may approve.
    pub default_can_approve: bool,
    /// The most one card may ask for (`--card-max-sites`, `--card-max-urls`,
    /// `--card-max-packages`).
    pub card_caps: CardCaps,
    /// Operator-configured internal suffixes (in addition to the built-in ones).
    pub internal_suffixes: Vec<Host>,
    /// Path-style multi-tenant hosts the administrator opted in as whole-host grants
    /// (`--allow-whole-host`); the others on the kept list answer `422`.
    pub allow_whole_host: Vec<Host>,
    /// Failed resume attempts (unknown id, wrong secret, another user) one client address
    /// may make per window, then `429 TOO_MANY_ATTEMPTS` (`--resume-failures-per-client` per
    /// `--resume-failure-window`).
    pub resume_failures_per_client: Budget,
    /// Failed resume attempts on one card per window; past it only the card's right secret
    /// is still checked (`--resume-failures-per-card` per `--resume-failure-window`).
    pub resume_failures_per_card: Budget,
    /// Requests without a valid credential (a missing, unknown or expired bearer token, a
    /// dead console cookie, a wrong sign-in token) one client address may make per window,
    /// then `429 TOO_MANY_ATTEMPTS` before any database read (`--auth-failures-per-client`
    /// per `--auth-failure-window`).
    pub auth_failures_per_client: Budget,
    /// How long a card's rejected answers are counted in memory before they are written.
    pub rejection_flush_after: Duration,
    /// A card's rejected answers that are written at once, without waiting.
    pub rejection_flush_at: u32,
    /// Browser origins allowed to call the API (`--cors-origin`); empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// Where people reach this control plane (`--control-public-url`), for the card page
    /// links the MCP server hands out; default: `http://` + the control listener.
    pub control_public_url: String,
    /// Where people reach this control plane when the operator said so
    /// (`--control-public-url`): the base of the `card_url` and inbox links the API hands out.
    /// `None` when it was not set: the listener's own address is often not where a person can
    /// reach it, so the API guesses no link (`card_url` is left out; inbox links are
    /// path-only).
    pub link_base: Option<String>,
    /// How long an inbox link opens the person's inbox (`--inbox-link-ttl`).
    pub inbox_link_ttl: Duration,
    /// The key that seals MCP `requestState` (`--mcp-state-key`, else generated once and kept
    /// in the database). `None` in tests: the MCP server then makes one for the process.
    pub mcp_state_key: Option<StateKey>,
    /// Webhook delivery: timeouts, retries, the seal for secrets and the way out.
    pub webhooks: crate::notify::WebhookSettings,
    /// The Slack front end (`--slack-*`).
    pub slack: crate::notify::slack::settings::SlackSettings,
}

/// The most sites, URLs and packages one card may name. They are checked together on every
/// approval request (one over its cap refuses the request) and a refusal list is fitted to
/// them, so they are one setting of three numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CardCaps {
    /// Sites (hosts or patterns) on one card.
    pub sites: usize,
    /// URLs the agent names on one card.
    pub urls: usize,
    /// Packages on one card.
    pub packages: usize,
}

/// A failure limit: so many failures per key (a client address, a card) within `window`,
/// refilled evenly over it. The two numbers only mean something together, and each limit's
/// token buckets are built from exactly this pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Failures a key may make at once, and per `window` on average.
    pub per_window: u32,
    /// The time over which a spent budget refills (zero: no limit).
    pub window: Duration,
}

/// A symmetric key: never printed, not even by `Debug`.
#[derive(Clone)]
pub struct StateKey(pub Vec<u8>);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl Default for Settings {
    fn default() -> Self {
        const HOUR: u64 = 3600;
        const MINUTE: Duration = Duration::from_secs(60);
        Self {
            inspect: Vec::new(),
            ca: None,
            proxy_public_url: "127.0.0.1:3128".into(),
            turn_ttl: Duration::from_secs(HOUR),
            interrupt_ttl: Duration::from_secs(HOUR),
            interrupt_retention: Duration::from_secs(7 * 24 * HOUR),
            snapshot_retention: Duration::from_secs(14 * 24 * HOUR),
            snapshot_max_bytes: 8 * 1024 * 1024,
            item_max_bytes: 400_000,
            lease: Duration::from_secs(30),
            resume_deadline: Duration::from_secs(15 * 60),
            claim_cap: 3,
            approval_ttl: Duration::from_secs(24 * HOUR),
            allow_user_scope: false,
            user_grant_ttl: Duration::from_secs(8 * HOUR),
            resume_slots_per_user: 2,
            default_can_approve: true,
            card_caps: CardCaps {
                sites: 20,
                urls: 20,
                packages: 50,
            },
            internal_suffixes: Vec::new(),
            allow_whole_host: Vec::new(),
            resume_failures_per_client: Budget {
                per_window: 30,
                window: MINUTE,
            },
            resume_failures_per_card: Budget {
                per_window: 10,
                window: MINUTE,
            },
            auth_failures_per_client: Budget {
                per_window: 300,
                window: MINUTE,
            },
            rejection_flush_after: Duration::from_secs(5),
            rejection_flush_at: 100,
            cors_origins: Vec::new(),
            control_public_url: "http://127.0.0.1:8080".into(),
            link_base: None,
            inbox_link_ttl: Duration::from_secs(15 * 60),
            mcp_state_key: None,
            webhooks: crate::notify::WebhookSettings::default(),
            slack: crate::notify::slack::settings::SlackSettings::default(),
        }
    }
}

impl Settings {
    /// Whether a person can approve `host` as a whole here (the store's one answer, with this
    /// deployment's internal suffixes and whole-host opt-ins).
    pub(crate) fn approvable(&self, host: &Host) -> Result<(), egressgate_store::PatternError> {
        egressgate_store::approvable_host(host, &self.internal_suffixes, &self.allow_whole_host)
    }
}
