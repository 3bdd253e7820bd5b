//! A person's inbox secret: issued to the runtime for one user, held by that person's browser,
//! and checked here for all it opens — the user's pending cards, the user's event stream, and
//! answering one of the user's cards on its card page, exactly as that card's own resume
//! secret would. It is `inb_<id>.<key>`: the row is found by the id and the key (256 random
//! bits, kept only as SHA-256) compared in constant time; it stops working at its expiry.
//!
//! Why that is no wider than the card secrets: it opens only cards of the one user it was
//! issued for, only while it lives (`--inbox-link-ttl`, 15 minutes by default), and only
//! through the same checks as a card secret (resume limits, the chat moved on, the right to
//! approve). Whoever asked for it holds the `approvals` scope, which can reissue each of
//! those cards' secrets anyway, so the link hands the person nothing its requester could not.

use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::db::inbox_links::InboxLink;
use egressgate_store::{InboxLinkId, Secret, SecretHash, Timestamp, UserId};

use crate::credentials::guard::Gate;
use crate::credentials::unauthorized;
use crate::error::ApiError;
use crate::state::AppState;

/// How an inbox secret begins, so a card page's answer can tell it from a card's own secret
/// without asking the database.
const PREFIX: &str = "inb_";
/// How long an expired link's row is kept, so it is answered "expired", not "unknown".
const PURGE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// A freshly issued secret (shown once) and when it stops working.
pub(crate) struct Issued {
    /// `inb_<id>.<key>`.
    pub(crate) secret: Secret,
    /// Its expiry.
    pub(crate) expires_at: Timestamp,
}

/// Issues a secret opening `user`'s inbox for the configured lifetime; only its hash is stored.
pub(crate) async fn issue(
    state: &AppState,
    user: &UserId,
    now: Timestamp,
) -> Result<Issued, ApiError> {
    let id = InboxLinkId::generate();
    let key = Secret::generate();
    let expires_at = now.plus(state.settings.inbox_link_ttl);
    let link = InboxLink {
        user: user.clone(),
        secret_hash: key.hash(),
        expires_at,
    };
    state
        .store
        .create_inbox_link(&id, &link, expires_at.plus(PURGE_AFTER), now)
        .await?;
    Ok(Issued {
        secret: Secret::from_presented(&format!("{id}.{}", key.expose())),
        expires_at,
    })
}

/// What a presented secret proves.
enum Checked {
    /// A live link.
    Live(InboxLink),
    /// The right secret of a link past its expiry.
    Expired,
    /// Not an inbox secret, unknown, or a wrong key.
    Invalid,
}

/// Compared against when the id is unknown, so timing does not say which ids exist.
fn dummy_hash() -> SecretHash {
    SecretHash::of(b"egressgate: no such inbox link")
}

async fn check(state: &AppState, presented: &str, now: Timestamp) -> Result<Checked, ApiError> {
    let Some((id, key)) = presented
        .strip_prefix(PREFIX)
        .and_then(|_| presented.split_once('.'))
    else {
        return Ok(Checked::Invalid);
    };
    let key = Secret::from_presented(key);
    let found = match InboxLinkId::parse(id) {
        Some(id) => state.store.inbox_link(&id).await?,
        None => None,
    };
    let Some(link) = found else {
        let _ = dummy_hash().matches(&key);
        return Ok(Checked::Invalid);
    };
    Ok(if !link.secret_hash.matches(&key) {
        Checked::Invalid
    } else if link.expires_at.has_passed(now) {
        Checked::Expired
    } else {
        Checked::Live(link)
    })
}

/// The live link `presented` proves, for the inbox's own calls: `401 UNAUTHORIZED` when it
/// proves none (charged to the client like any bad credential, `429` past the limit), `410
/// INBOX_LINK_EXPIRED` for the right secret of an expired link.
pub(crate) async fn holder(
    state: &AppState,
    gate: &Gate,
    presented: &str,
    now: Timestamp,
) -> Result<InboxLink, ApiError> {
    gate.admit()?;
    match check(state, presented, now).await? {
        Checked::Live(link) => Ok(link),
        Checked::Expired => Err(ApiError::new(
            StatusCode::GONE,
            "INBOX_LINK_EXPIRED",
            "this inbox link expired; ask in the chat for a new one",
        )),
        Checked::Invalid => {
            gate.failed();
            Err(unauthorized("this is not a valid inbox link"))
        }
    }
}

/// Whether `presented` is a live inbox secret of `owner`: on a card page it stands for the
/// card's own secret. Anything else (a card secret, a wrong or expired inbox secret) is
/// `false` and costs no database read unless it has the inbox shape.
pub(crate) async fn opens_card_of(
    state: &AppState,
    owner: &UserId,
    presented: &str,
    now: Timestamp,
) -> Result<bool, ApiError> {
    if !presented.starts_with(PREFIX) {
        return Ok(false);
    }
    Ok(matches!(check(state, presented, now).await?, Checked::Live(l) if &l.user == owner))
}
