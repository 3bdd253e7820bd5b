//! The narrowing fields of a decision payload, each read strictly: absent keeps what the card
//! asks (the chat, unlimited, the whole host); present, it must be of its one type and within
//! its bounds, or the decision is refused with what was wrong.

use egressgate_store::Scope;
use egressgate_store::path_prefix::{MAX_PREFIXES, PathPrefix};
use serde_json::Value;

use super::{Allowances, InvalidDecision};

/// Most uses a counted grant may be given: beyond it a count is a typo, not a narrowing.
pub const MAX_USES: i64 = 10_000;

/// `scope`: `"turn"`, `"chat"` (the default) or, where the administrator allows it, `"user"`.
pub(super) fn scope(v: Option<&Value>, allow: Allowances) -> Result<Scope, InvalidDecision> {
    let Some(v) = v else { return Ok(Scope::Chat) };
    match v.as_str().and_then(Scope::parse) {
        Some(Scope::User) if !allow.user_scope => Err(InvalidDecision(
            "payload.scope \"user\" is not allowed here (the administrator has not turned on \
             --allow-user-scope); answer with \"turn\" or \"chat\""
                .into(),
        )),
        Some(scope) => Ok(scope),
        None => Err(InvalidDecision(
            "payload.scope must be \"turn\" (this turn and its resumed run), \"chat\" (the rest \
             of the chat) or \"user\" (every chat, where allowed)"
                .into(),
        )),
    }
}

/// `max_uses`: a whole number of connections from 1 to [`MAX_USES`].
pub(super) fn max_uses(v: Option<&Value>) -> Result<Option<i64>, InvalidDecision> {
    let Some(v) = v else { return Ok(None) };
    match v.as_i64() {
        Some(n) if (1..=MAX_USES).contains(&n) => Ok(Some(n)),
        _ => Err(InvalidDecision(format!(
            "payload.max_uses must be a whole number from 1 to {MAX_USES} (leave it out for \
             unlimited)"
        ))),
    }
}

/// `paths`: a non-empty list of at most [`MAX_PREFIXES`] path prefixes, each in the normal
/// form the proxy compares requests in (see [`PathPrefix::parse`]).
pub(super) fn paths(v: Option<&Value>) -> Result<Option<Vec<PathPrefix>>, InvalidDecision> {
    let Some(v) = v else { return Ok(None) };
    let shape = || {
        InvalidDecision(format!(
            "payload.paths must be a list of 1 to {MAX_PREFIXES} path prefixes such as \"/org/\""
        ))
    };
    let items = v.as_array().ok_or_else(shape)?;
    if items.is_empty() || items.len() > MAX_PREFIXES {
        return Err(shape());
    }
    let mut out: Vec<PathPrefix> = Vec::with_capacity(items.len());
    for item in items {
        let text = item.as_str().ok_or_else(shape)?;
        let prefix = PathPrefix::parse(text)
            .map_err(|e| InvalidDecision(format!("payload.paths: {text:?}: {e}")))?;
        if !out.contains(&prefix) {
            out.push(prefix);
        }
    }
    Ok(Some(out))
}
