//! The approval flow's answers: the tool's answer and the card, the AG-UI interrupt, the
//! outcome, the resume and the claim holder's calls, the batch rule.

#![allow(dead_code)] // The describing types are read by the schema derive only.

pub(crate) use crate::approval::text::DenyCode;
use egressgate_store::Timestamp;
use egressgate_store::db::interrupts::InterruptState as StoredState;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{Time, string_enum};

/// The card a person is shown: computed by the server, never altered by the runtime.
#[derive(ToSchema)]
pub struct Card {
    sites: Vec<String>,
    urls: Vec<String>,
    packages: Vec<String>,
    reason: String,
    /// Blocked sites left off a full card (absent when none): not shown, not granted.
    sites_not_shown: Option<u32>,
    /// What the sandbox really tried this turn for the card's sites and packages, from the
    /// proxy's own record (at most 64 lines, the most recently seen, sorted by host), then
    /// one entry `tried: false` per named URL no request tried. `[]` on a card drafted
    /// before evidence was kept.
    evidence: Vec<Evidence>,
}

/// One line of a card's evidence: refused requests of one kind (host, port, method, URL
/// without query, package, reason), or a site or URL the agent named that nothing tried.
#[derive(ToSchema)]
pub struct Evidence {
    host: String,
    #[schema(minimum = 0, maximum = 65535)]
    port: u16,
    /// The request method; `null` when the proxy could not see it (a tunnel to a host it
    /// does not inspect) and on an entry nothing tried.
    method: Option<String>,
    /// The URL without query or fragment as recorded (`null` when the proxy could not see
    /// it); on an entry nothing tried, the URL the agent named.
    url: Option<String>,
    /// The package of a `package_not_approved` refusal (canonical spelling), else `null`.
    package: Option<String>,
    /// The refusal reason; `null` on an entry nothing tried.
    reason: Option<super::turns::RefusalReason>,
    /// How many such requests were refused (0 on an entry nothing tried).
    count: i64,
    /// The first such request; `null` on an entry nothing tried.
    first_at: Option<Time>,
    /// The latest such request; `null` on an entry nothing tried.
    last_at: Option<Time>,
    /// `true` when such a request carried data out (POST, PUT, PATCH, or a body on any
    /// method); absent otherwise.
    upload: Option<bool>,
    /// `false` on a site or URL the agent named that no request of the turn tried; absent
    /// on what was tried.
    tried: Option<bool>,
    /// The command (program and first arguments, at most 200 printable ASCII bytes) the
    /// sandbox reported as having opened such a captured connection, the first reported:
    /// the sandbox's claim, not the proxy's fact. Absent when none was reported.
    command: Option<String>,
}

/// The code of a `pending` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PendingCode {
    /// The chat's card waits for the person.
    InterruptPending,
}

/// `200` of the approval tool, by `outcome`: each kind carries exactly its fields.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ToolAnswer {
    /// Nobody will be asked; the message says what stays blocked and what to do.
    Denied {
        /// Which template.
        code: DenyCode,
        /// For the model.
        message: String,
    },
    /// Everything is already allowed: run the step.
    AlreadyApproved {
        /// For the model.
        message: &'static str,
    },
    /// The chat's card still waits for the person: pause on it instead of asking again.
    Pending {
        /// Always `INTERRUPT_PENDING`.
        code: PendingCode,
        /// The waiting card's interrupt id.
        #[schema(value_type = String)]
        interrupt_id: egressgate_store::InterruptId,
        /// Always `pending`.
        #[schema(value_type = InterruptState)]
        state: StoredState,
        /// The waiting card.
        #[schema(value_type = Card)]
        card: egressgate_store::Card,
        /// For the model.
        message: &'static str,
    },
    /// A single-use draft card to register with `POST /v1/interrupts`.
    Ask {
        /// The draft.
        #[schema(value_type = String)]
        draft_id: egressgate_store::DraftId,
        /// What the person will see.
        #[schema(value_type = Card)]
        card: egressgate_store::Card,
    },
}

/// An AG-UI 1.0 `Interrupt`: goes straight into `RUN_FINISHED.outcome.interrupts`.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Interrupt {
    id: String,
    /// `tool_call` (with `toolCallId`) or `egressgate:approval`.
    reason: String,
    tool_call_id: Option<String>,
    message: String,
    #[schema(value_type = Object)]
    response_schema: Value,
    expires_at: Time,
}

/// `201` of `POST /v1/interrupts` and `200` of the reissue: the only time the secret is shown.
#[derive(ToSchema)]
pub struct InterruptIssued {
    interrupt: Interrupt,
    card: Card,
    resume_secret: String,
    /// The card page's link, with the resume secret in its fragment: only when the operator
    /// set `--control-public-url` (the same link the MCP tool hands out).
    card_url: Option<String>,
}

/// `201` of `POST /v1/users/{user_id}/inbox-link`: the only time the link is shown.
#[derive(ToSchema)]
pub struct InboxLink {
    /// The person's inbox page with the link's secret as its fragment (`…/ui/inbox#<secret>`):
    /// absolute when `--control-public-url` is set, else the path alone.
    url: String,
    /// When the link stops opening the inbox (`--inbox-link-ttl` after it was issued).
    expires_at: Time,
}

string_enum!(
    /// A card's state, in the store's spelling.
    InterruptState,
    "Where a request is in its life.",
    StoredState::ALL.map(|s| s.as_str())
);

/// How the person answered.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum DecisionOutcome {
    Approved,
    Declined,
    Cancelled,
}

/// The decision fixed by the first claim; `sites` and `packages` are empty unless approved.
#[derive(ToSchema)]
pub struct Decision {
    outcome: DecisionOutcome,
    sites: Vec<String>,
    packages: Vec<String>,
    /// Present (`read`) only when the person narrowed the card's `full` with
    /// `payload.access`; absent means `full`.
    #[schema(value_type = Option<String>, pattern = "^read$")]
    access: Option<String>,
    /// Present (`turn` or `user`) only when the person chose it with `payload.scope`;
    /// absent means `chat`.
    #[schema(value_type = Option<String>, pattern = "^(turn|user)$")]
    scope: Option<String>,
    /// Present when the person counted the uses (`payload.max_uses`): connections each
    /// approved site admits.
    max_uses: Option<i64>,
    /// Present when the person narrowed the sites to path prefixes (`payload.paths`).
    paths: Option<Vec<String>>,
}

/// `GET /v1/interrupts/{id}/outcome`.
#[derive(ToSchema)]
pub struct OutcomeAnswer {
    /// Whose card it is: what a takeover must name in `X-Egressgate-User`, so a runtime
    /// process that knows only the interrupt id (a new process after a restart) can resume.
    user_id: String,
    state: InterruptState,
    card: Card,
    decision: Option<Decision>,
    /// True while the claim is the card page's, for the runtime to take over
    /// (`POST /v1/interrupts/{id}/takeover`).
    handoff: Option<bool>,
}

/// The claim the winning resume holds.
#[derive(ToSchema)]
pub struct Claim {
    claim_id: String,
    lease_expires_at: Time,
    deadline: Time,
}

/// `200` of a resume: `claimed` (the first), or `done` with `replayed: true` (a replay that
/// runs nothing).
#[derive(ToSchema)]
pub struct ResumeAnswer {
    #[schema(value_type = String, pattern = "^(claimed|done)$")]
    state: String,
    claim: Option<Claim>,
    decision: Option<Decision>,
    /// Base64 snapshot, with `claimed` (null when none was stored).
    snapshot: Option<String>,
    replayed: Option<bool>,
    /// The completed run's answer, with `done`.
    answer: Option<Value>,
}

/// `POST /v1/interrupts/{id}/heartbeat`.
#[derive(Serialize, ToSchema)]
pub struct Heartbeat {
    #[schema(value_type = Time)]
    pub(crate) lease_expires_at: Timestamp,
}

/// `POST /v1/interrupts/{id}/complete`: always `done`.
#[derive(Serialize, ToSchema)]
pub struct Completed {
    #[schema(value_type = String, pattern = "^done$")]
    pub(crate) state: &'static str,
}

impl Completed {
    /// The one answer.
    pub(crate) const DONE: Self = Self { state: "done" };
}

/// `POST /v1/batches/decide`: tool use id → text of the cancelled result.
#[derive(ToSchema)]
pub struct BatchAnswer {
    cancel: std::collections::BTreeMap<String, String>,
}

/// `POST /v1/interrupts/{id}/view`: what the holder of a card's secret sees (the card page).
#[derive(ToSchema)]
pub struct CardView {
    interrupt_id: String,
    /// `pending`, `claimed` or `done` (an expired card answers `410` instead).
    state: InterruptState,
    /// The consequence sentence.
    message: String,
    card: Card,
    /// When the card stops being answerable.
    expires_at: Time,
    /// The decision, once a resume claimed the card.
    decision: Option<Decision>,
    /// The AG-UI interrupt, as the runtime got it.
    interrupt: Interrupt,
    grant_options: GrantOptions,
}

/// Which narrowing choices the card page may offer: a resume refuses the others (`422`).
#[derive(ToSchema)]
pub struct GrantOptions {
    /// The administrator allows `scope: "user"` (`--allow-user-scope`).
    user_scope: bool,
    /// The card's sites the proxy inspects: only for these may a decision carry
    /// `access: "read"` or `paths` (every approved site must be inspected).
    inspected_sites: Vec<String>,
}

/// One open card of a user (no secret: reissue it to render it).
#[derive(ToSchema)]
pub struct PendingCard {
    interrupt_id: String,
    chat_id: String,
    turn_id: String,
    message: String,
    card: Card,
    created_at: Time,
    expires_at: Time,
    /// The AG-UI interrupt, for a runtime that re-renders it.
    interrupt: Interrupt,
}

/// `GET /v1/users/{user_id}/interrupts`.
#[derive(ToSchema)]
pub struct PendingCards {
    user_id: String,
    interrupts: Vec<PendingCard>,
}

/// `POST /v1/inbox/cards`: the link's user's pending cards, and until when the link opens
/// them.
#[derive(ToSchema)]
pub struct InboxCards {
    user_id: String,
    /// When the inbox link (and the page's access through it) ends.
    expires_at: Time,
    interrupts: Vec<PendingCard>,
}

/// `POST /v1/interrupts/{id}/takeover`: the runtime's own claim, in the resume answer's
/// shape.
#[derive(ToSchema)]
pub struct TakeoverAnswer {
    #[schema(value_type = String, pattern = "^claimed$")]
    state: String,
    /// Heartbeat and complete with this claim.
    claim: Claim,
    /// The decision the card page's click fixed.
    decision: Option<Decision>,
    /// The paused run's snapshot, base64 (null when none was stored).
    snapshot: Option<String>,
}
