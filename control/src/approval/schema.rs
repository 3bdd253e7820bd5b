//! The approval tool's input schema, the one a model is given: served at
//! `/v1/tools/approval.json`, handed to MCP clients as the tool's input schema, and kept beside
//! the input checks (`input`) whose limits it states, so the two cannot drift apart.

use serde_json::{Value, json};

/// The approval tool's input: what a model writes. No `tool_call_id` (the runtime adds its
/// own call id) and no turn (the turn is bound by the runtime, never by the model).
pub fn approval_tool_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "request_egress_approval",
        "description": "Ask the person in the chat to allow network access that the sandbox \
            was refused. Name the URLs you need and any packages to install; hosts refused \
            in this turn are added by the server. Call it once, on its own; then wait for \
            the answer and do not try to get around the proxy.",
        "type": "object",
        "properties": {
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": super::input::REASON_MAX_CHARS,
                "description": "One sentence the person reads: why the data is needed."
            },
            "urls": {
                "type": "array",
                "items": {"type": "string", "description": "An http or https URL, without credentials."},
                "description": "The URLs the next step will download from."
            },
            "packages": {
                "type": "array",
                "items": {"type": "string", "description": "A PyPI name (bare or pip:NAME) or npm:NAME, optionally pinned: numpy==2.1.*, npm:lodash@^4."},
                "description": "Packages the next step will install."
            }
        },
        "required": ["reason"],
        "additionalProperties": false
    })
}
