//! Step 1 of the approval tool: the request body and its validation. Every refusal is
//! `422 INVALID_INPUT` naming the entry and why; nothing is written before this passes.
//! A refused URL is never quoted back whole, since it may carry a credential or a token.

use std::collections::BTreeSet;

use egressgate_store::{Host, PackageSpec, PatternError, SanitizedUrl, UrlError};
use serde::Deserialize;

use crate::error::ApiError;
use crate::settings::{CardCaps, Settings};
use crate::validate;

/// Longest reason, in characters: one sentence, shown on the card.
pub(crate) const REASON_MAX_CHARS: usize = 500;
/// Longest `tool_call_id` we keep (it travels into the AG-UI interrupt).
pub(crate) const TOOL_CALL_ID_MAX_CHARS: usize = 256;

/// `POST /v1/turns/{turn_id}/approval-requests` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalRequestBody {
    reason: String,
    #[serde(default)]
    urls: Option<Vec<String>>,
    #[serde(default)]
    packages: Option<Vec<String>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

/// A request that passed step 1.
#[derive(Debug, Clone)]
pub(crate) struct ValidRequest {
    /// The reason, trimmed.
    pub(crate) reason: String,
    /// The named URLs, sanitised, de-duplicated, in the order given.
    pub(crate) urls: Vec<SanitizedUrl>,
    /// The named packages, canonical, sorted.
    pub(crate) packages: BTreeSet<PackageSpec>,
    /// The agent's tool call id.
    pub(crate) tool_call_id: Option<String>,
}

impl ValidRequest {
    /// The named hosts, sorted.
    pub(crate) fn named_hosts(&self) -> BTreeSet<Host> {
        self.urls.iter().map(|u| u.host.clone()).collect()
    }
}

/// Checks a URL an agent named: http(s), no credentials, and a host a person could approve
/// (not an IP literal, not internal-looking, not a public suffix, no wildcard, not a
/// path-style multi-tenant host the administrator did not opt in).
fn url(i: usize, raw: &str, settings: &Settings) -> Result<SanitizedUrl, ApiError> {
    let entry = format!("urls[{i}]");
    let u = SanitizedUrl::parse(raw).map_err(|e| {
        let why = match e {
            UrlError::Host(h) => format!("the host is not a valid name: {h}"),
            other => other.to_string(),
        };
        ApiError::invalid_input(format!("{entry}: {why}"))
    })?;
    let host_err = |why: &str| ApiError::invalid_input(format!("{entry} ({}): {why}", u.host));
    match settings.approvable(&u.host) {
        Ok(()) => Ok(u),
        Err(PatternError::Wildcard) => Err(host_err("a URL names one host, not a wildcard")),
        Err(PatternError::IpLiteral) => Err(host_err(
            "names an IP literal; addresses cannot be approved, only host names",
        )),
        Err(PatternError::Internal) => Err(host_err(
            "names an internal-looking host, which cannot be approved",
        )),
        Err(PatternError::PublicSuffix) => Err(host_err(
            "the host is a public suffix, which cannot be approved",
        )),
        Err(PatternError::Host(h)) => Err(host_err(&h.to_string())),
        Err(e @ PatternError::PathMultiTenant(_)) => Err(host_err(&format!(
            "{e}; until then, ask for the download another way or continue without it"
        ))),
    }
}

/// Step 1: reason, URLs, packages, tool call id, then the card caps on what was named.
pub(crate) fn validate(
    body: ApprovalRequestBody,
    settings: &Settings,
) -> Result<ValidRequest, ApiError> {
    let reason = body.reason.trim().to_owned();
    if reason.is_empty() {
        return Err(ApiError::invalid_input(
            "reason must say in one sentence what the data is needed for",
        ));
    }
    if reason.chars().count() > REASON_MAX_CHARS {
        return Err(ApiError::invalid_input(format!(
            "reason is longer than {REASON_MAX_CHARS} characters"
        )));
    }
    let mut urls: Vec<SanitizedUrl> = Vec::new();
    for (i, raw) in body.urls.unwrap_or_default().iter().enumerate() {
        let u = url(i, raw, settings)?;
        if !urls.iter().any(|seen| seen.text == u.text) {
            urls.push(u);
        }
    }
    let packages: BTreeSet<PackageSpec> = body
        .packages
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, p)| validate::package_spec(&format!("packages[{i}]"), p))
        .collect::<Result<_, _>>()?;
    if let Some(id) = &body.tool_call_id {
        let n = id.chars().count();
        if n == 0 || n > TOOL_CALL_ID_MAX_CHARS || id.chars().any(char::is_control) {
            return Err(ApiError::invalid_input(format!(
                "tool_call_id must be 1 to {TOOL_CALL_ID_MAX_CHARS} characters without control characters"
            )));
        }
    }
    let req = ValidRequest {
        reason,
        urls,
        packages,
        tool_call_id: body.tool_call_id,
    };
    check_caps(
        &settings.card_caps,
        req.named_hosts().len(),
        req.urls.len(),
        req.packages.len(),
    )?;
    Ok(req)
}

/// The card caps: one card is something a person can read. Checked on what was named (step
/// 1) and again on the computed card, which may also carry hosts refused this turn.
pub(crate) fn check_caps(
    caps: &CardCaps,
    sites: usize,
    urls: usize,
    packages: usize,
) -> Result<(), ApiError> {
    let over = |what: &str, n: usize, max: usize| {
        ApiError::invalid_input(format!(
            "one card holds at most {max} {what}; this request has {n}: ask for fewer at a time"
        ))
    };
    if sites > caps.sites {
        return Err(over("sites", sites, caps.sites));
    }
    if urls > caps.urls {
        return Err(over("URLs", urls, caps.urls));
    }
    if packages > caps.packages {
        return Err(over("packages", packages, caps.packages));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: serde_json::Value) -> ApprovalRequestBody {
        serde_json::from_value(v).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn err(v: serde_json::Value) -> String {
        match validate(body(v), &Settings::default()) {
            Ok(r) => unreachable!("accepted: {r:?}"),
            Err(e) => {
                assert_eq!(e.code, "INVALID_INPUT");
                e.message
            }
        }
    }

    #[test]
    fn sanitises_and_dedups_urls() {
        let r = validate(
            body(serde_json::json!({"reason": " r ", "urls": [
                "https://Files.Example.com/a.csv?token=s3cret#x", "https://files.example.com/a.csv"
            ], "packages": ["Requests", "requests"]})),
            &Settings::default(),
        )
        .unwrap_or_else(|e| unreachable!("{}", e.message));
        assert_eq!(r.reason, "r");
        assert_eq!(r.urls.len(), 1);
        assert_eq!(r.urls[0].text, "https://files.example.com/a.csv");
        assert_eq!(r.packages.len(), 1);
    }

    #[test]
    fn each_refusal_names_the_entry_and_why() {
        let m = err(
            serde_json::json!({"reason": "r", "urls": ["https://ok.example.com/", "ftp://x.example.com/"]}),
        );
        assert_eq!(m, "urls[1]: only http and https URLs can be approved");
        let m =
            err(serde_json::json!({"reason": "r", "urls": ["https://user:hunter2@example.com/"]}));
        assert_eq!(m, "urls[0]: URLs must not carry credentials");
        assert!(!m.contains("hunter2"));
        let m = err(serde_json::json!({"reason": "r", "urls": ["http://127.0.0.1/x"]}));
        assert!(
            m.starts_with("urls[0] (127.0.0.1): names an IP literal"),
            "{m}"
        );
        let m = err(serde_json::json!({"reason": "r", "urls": ["http://0x7f.1/x"]}));
        assert!(m.contains("IP literal"), "{m}");
        let m = err(serde_json::json!({"reason": "r", "urls": ["http://db.internal/x"]}));
        assert!(
            m.starts_with("urls[0] (db.internal): names an internal-looking host"),
            "{m}"
        );
        let m = err(serde_json::json!({"reason": "r", "packages": ["ok", "bad name"]}));
        assert!(m.starts_with("packages[1] (\"bad name\"):"), "{m}");
        assert!(err(serde_json::json!({"reason": "  "})).starts_with("reason"));
        assert!(err(serde_json::json!({"reason": "x".repeat(501)})).contains("500"));
        assert!(
            err(serde_json::json!({"reason": "r", "tool_call_id": ""})).starts_with("tool_call_id")
        );
    }

    #[test]
    fn caps_apply_to_what_was_named() {
        let urls: Vec<String> = (0..21)
            .map(|i| format!("https://h{i}.example.com/"))
            .collect();
        let m = err(serde_json::json!({"reason": "r", "urls": urls}));
        assert!(m.contains("at most 20 sites"), "{m}");
        let pk: Vec<String> = (0..51).map(|i| format!("p{i}")).collect();
        let m = err(serde_json::json!({"reason": "r", "packages": pk}));
        assert!(m.contains("at most 50 packages"), "{m}");
    }
}
