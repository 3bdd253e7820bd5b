//! The batch rule: the approval tool must run alone in its batch. Given one assistant
//! message's tool uses, keep the first approval-tool call and cancel every other call with a
//! short text the model can act on; without an approval call, cancel nothing. Pure, so the
//! same input always gives the same answer.

use std::collections::BTreeMap;

/// Why a later approval-tool call in the same batch was cancelled.
pub const MERGED: &str = "merged into the first approval request";
/// Why any other tool in a batch with an approval call was cancelled.
pub const ALONE: &str = "call the approval tool on its own";

/// One tool use of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolUse {
    /// The runtime's id of this call.
    #[serde(rename = "toolUseId")]
    pub tool_use_id: String,
    /// The tool's name.
    pub name: String,
}

/// `toolUseId → text` for each call to cancel, sorted by id so the answer is byte-stable.
/// A repeated `toolUseId` cannot be answered unambiguously, so it is returned as an error
/// naming the id.
pub fn decide(
    tool_uses: &[ToolUse],
    approval_tool: &str,
) -> Result<BTreeMap<String, &'static str>, String> {
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = tool_uses
        .iter()
        .find(|u| !seen.insert(u.tool_use_id.as_str()))
    {
        return Err(dup.tool_use_id.clone());
    }
    let Some(first) = tool_uses.iter().position(|u| u.name == approval_tool) else {
        return Ok(BTreeMap::new());
    };
    Ok(tool_uses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != first)
        .map(|(_, u)| {
            let text = if u.name == approval_tool {
                MERGED
            } else {
                ALONE
            };
            (u.tool_use_id.clone(), text)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(list: &[(&str, &str)]) -> Vec<ToolUse> {
        list.iter()
            .map(|(id, name)| ToolUse {
                tool_use_id: (*id).into(),
                name: (*name).into(),
            })
            .collect()
    }

    #[test]
    fn keeps_the_first_approval_call_and_cancels_the_rest() {
        let batch = uses(&[
            ("a", "run_script"),
            ("b", "approve"),
            ("c", "approve"),
            ("d", "fetch"),
        ]);
        let out = decide(&batch, "approve");
        let want: BTreeMap<String, &str> = [
            ("a".into(), ALONE),
            ("c".into(), MERGED),
            ("d".into(), ALONE),
        ]
        .into_iter()
        .collect();
        assert_eq!(out, Ok(want));
    }

    #[test]
    fn no_approval_call_cancels_nothing() {
        assert_eq!(
            decide(&uses(&[("a", "run_script"), ("b", "fetch")]), "approve"),
            Ok(BTreeMap::new())
        );
        assert_eq!(decide(&[], "approve"), Ok(BTreeMap::new()));
    }

    #[test]
    fn a_lone_approval_call_is_kept() {
        assert_eq!(
            decide(&uses(&[("x", "approve")]), "approve"),
            Ok(BTreeMap::new())
        );
    }

    #[test]
    fn tool_names_match_exactly() {
        let out = decide(&uses(&[("a", "Approve"), ("b", "approve")]), "approve");
        assert_eq!(out, Ok([("a".to_owned(), ALONE)].into_iter().collect()));
    }

    #[test]
    fn repeated_ids_are_refused() {
        assert_eq!(
            decide(&uses(&[("a", "approve"), ("a", "x")]), "approve"),
            Err("a".into())
        );
    }
}
