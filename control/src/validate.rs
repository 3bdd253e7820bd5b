//! Turning outside strings into domain values, with `422 INVALID_INPUT` messages that say
//! which entry was refused and why, so the caller (often a model) can fix exactly that entry.

use egressgate_store::{ChatId, Package, PackageSpec, SitePattern, UserId};

use crate::error::ApiError;
use crate::settings::Settings;

/// Longest stretch of a refused value quoted back in an error message.
const QUOTE_MAX_CHARS: usize = 80;

/// Longest free-text note an administrator may attach to a list entry.
pub(crate) const NOTE_MAX_CHARS: usize = 500;

/// A value quoted for an error message: JSON-style escaping, cut to a sane length.
pub(crate) fn quote(value: &str) -> String {
    let cut: String = value.chars().take(QUOTE_MAX_CHARS).collect();
    let ellipsis = if cut.len() < value.len() { "…" } else { "" };
    format!("{cut:?}{ellipsis}")
}

/// A caller-named user id.
pub(crate) fn user_id(field: &str, value: &str) -> Result<UserId, ApiError> {
    UserId::parse(value).ok_or_else(|| {
        ApiError::invalid_input(format!(
            "{field} must be 1 to 200 bytes without control characters"
        ))
    })
}

/// A caller-named chat id.
pub(crate) fn chat_id(field: &str, value: &str) -> Result<ChatId, ApiError> {
    ChatId::parse(value).ok_or_else(|| {
        ApiError::invalid_input(format!(
            "{field} must be 1 to 200 bytes without control characters"
        ))
    })
}

/// A site pattern as stored anywhere (admin list, launch list): IP literals, internal names,
/// public suffixes and path-style multi-tenant hosts not opted in are refused.
pub(crate) fn site_pattern(
    entry: &str,
    value: &str,
    settings: &Settings,
) -> Result<SitePattern, ApiError> {
    SitePattern::parse_grant(
        value,
        &settings.internal_suffixes,
        &settings.allow_whole_host,
    )
    .map_err(|e| ApiError::invalid_input(format!("{entry} ({}): {e}", quote(value))))
}

/// A package name (bare/`pip:` PyPI names, `npm:` names), canonicalised.
pub(crate) fn package(entry: &str, value: &str) -> Result<Package, ApiError> {
    Package::parse(value)
        .map_err(|e| ApiError::invalid_input(format!("{entry} ({}): {e}", quote(value))))
}

/// A package grant with an optional version pin (`numpy==2.1.*`, `npm:lodash@^4`), as
/// administrators' lists and launch-time packages may carry it, canonicalised.
pub(crate) fn package_spec(entry: &str, value: &str) -> Result<PackageSpec, ApiError> {
    PackageSpec::parse(value)
        .map_err(|e| ApiError::invalid_input(format!("{entry} ({}): {e}", quote(value))))
}

/// An optional administrator's note, bounded.
pub(crate) fn note(value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(n) if n.chars().count() > NOTE_MAX_CHARS => Err(ApiError::invalid_input(format!(
            "note is longer than {NOTE_MAX_CHARS} characters"
        ))),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_entry_and_the_reason() {
        let e = site_pattern("sites[1]", "*.com", &Settings::default())
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("sites[1] (\"*.com\"): pattern would match a whole public suffix")
        );
        let e = package("packages[0]", "gem:rails").err().map(|e| e.message);
        assert!(e.is_some_and(|m| {
            m.starts_with("packages[0] (\"gem:rails\"): unknown package ecosystem")
        }));
    }

    #[test]
    fn quotes_are_bounded() {
        let q = quote(&"a".repeat(500));
        assert!(q.chars().count() < 90, "{q}");
        assert!(q.ends_with('…'));
        assert_eq!(quote("x\ny"), "\"x\\ny\"");
    }
}
