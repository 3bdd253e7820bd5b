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

/// A Slack user id as Slack mints them: `U` (or `W` on Enterprise Grid) and upper-case
/// letters and digits, 3 to 21 characters in all.
pub(crate) fn slack_user_id(value: &str) -> Result<String, ApiError> {
    let shaped = match value.as_bytes() {
        [b'U' | b'W', rest @ ..] => {
            (2..=20).contains(&rest.len())
                && rest
                    .iter()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        }
        _ => false,
    };
    if shaped {
        Ok(value.to_owned())
    } else {
        Err(ApiError::invalid_input(format!(
            "slack_user_id ({}): expected a Slack user id such as U012AB3CD (U or W, then \
             upper-case letters and digits)",
            quote(value)
        )))
    }
}

/// An e-mail address, checked strictly (a mail relay is never handed anything odd): ASCII
/// `local@domain`, at most 254 bytes; the local part a dot-atom of at most 64 bytes (no quoted
/// forms, no leading, trailing or double dots); the domain a host name of at least two
/// labels (no address literals), kept lower-cased.
pub(crate) fn email(value: &str) -> Result<String, ApiError> {
    let bad = |why: &str| ApiError::invalid_input(format!("email ({}): {why}", quote(value)));
    if value.len() > 254 || !value.is_ascii() {
        return Err(bad("expected an ASCII address of at most 254 bytes"));
    }
    let Some((local, domain)) = value.split_once('@') else {
        return Err(bad("expected local@domain"));
    };
    const ATEXT: &[u8] = b"!#$%&'*+-/=?^_`{|}~";
    let atom = |a: &str| {
        !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || ATEXT.contains(&b))
    };
    if local.len() > 64 || !local.split('.').all(atom) {
        return Err(bad(
            "the part before @ must be at most 64 letters, digits, dots (not leading, trailing \
             or doubled) and !#$%&'*+-/=?^_`{|}~",
        ));
    }
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let labels: Vec<&str> = domain.split('.').collect();
    let tld_ok = labels
        .last()
        .is_some_and(|t| t.bytes().any(|b| b.is_ascii_alphabetic()));
    if labels.len() < 2 || !labels.iter().all(|l| label(l)) || !tld_ok {
        return Err(bad(
            "the part after @ must be a host name such as example.com",
        ));
    }
    Ok(format!("{local}@{}", domain.to_ascii_lowercase()))
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
    fn slack_ids_and_addresses_are_checked() {
        for ok in ["U012AB3CD", "W0123ABCDEF", "UAB"] {
            assert_eq!(slack_user_id(ok).ok().as_deref(), Some(ok));
        }
        for bad in [
            "",
            "U",
            "UA",
            "u012ab3cd",
            "C012AB3CD",
            "U012-AB",
            "U 12",
            "Ü012AB",
        ] {
            assert!(slack_user_id(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            email("Alice.B+cards@Example.COM").ok().as_deref(),
            Some("Alice.B+cards@example.com")
        );
        for bad in [
            "",
            "alice",
            "alice@",
            "@example.com",
            "alice@example",
            "alice@@example.com",
            "al..ice@example.com",
            ".alice@example.com",
            "alice.@example.com",
            "alice@[127.0.0.1]",
            "alice@127.0.0.1",
            "alice@-x.example.com",
            "al ice@example.com",
            "\"alice\"@example.com",
            "alice@exämple.com",
            "alice@example.com\r\nBcc: eve@example.com",
        ] {
            assert!(email(bad).is_err(), "{bad:?}");
        }
        let long = format!("{}@example.com", "a".repeat(65));
        assert!(email(&long).is_err());
    }

    #[test]
    fn quotes_are_bounded() {
        let q = quote(&"a".repeat(500));
        assert!(q.chars().count() < 90, "{q}");
        assert!(q.ends_with('…'));
        assert_eq!(quote("x\ny"), "\"x\\ny\"");
    }
}
