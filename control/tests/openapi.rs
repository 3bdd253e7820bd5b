//! The OpenAPI document: served as generated, complete in its statuses and codes, and
//! checked into `docs/` (openapi.json and the API reference rendered from it) so the
//! repository's contract cannot drift from the code. `EGRESSGATE_UPDATE_DOCS=1` rewrites
//! both files instead of comparing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "openapi/markdown.rs"]
mod markdown;
mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;
use support::TestApp;

fn doc() -> Value {
    egressgate_control::openapi_document()
}

fn op<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "{method} {path} is not in the document");
    op
}

fn statuses(op: &Value) -> Vec<String> {
    op["responses"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn codes(op: &Value, status: &str) -> Vec<String> {
    op["responses"][status]["x-error-codes"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_served_document_is_the_generated_one() {
    let app = TestApp::new().await;
    let (status, served) = app.anonymous().get("/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(served, doc());
    assert_eq!(served["openapi"], "3.1.0");
}

#[test]
fn key_parts_of_the_document() {
    let doc = doc();
    // The approval tool: every status, with its codes.
    let tool = op(&doc, "post", "/v1/turns/{turn_id}/approval-requests");
    assert_eq!(
        statuses(tool),
        [
            "200", "400", "401", "403", "404", "410", "422", "429", "503"
        ]
    );
    assert_eq!(codes(tool, "422"), ["INVALID_INPUT", "NOTHING_TO_APPROVE"]);
    assert_eq!(codes(tool, "429"), ["TOO_MANY_ATTEMPTS"]);
    assert_eq!(codes(tool, "410"), ["TURN_EXPIRED", "CHAT_HIDDEN"]);
    assert_eq!(codes(tool, "400"), ["INVALID_BODY", "INVALID_HEADER"]);
    assert_eq!(codes(tool, "503"), ["STORE_UNAVAILABLE", "AUDIT_FAILED"]);
    assert_eq!(tool["security"], serde_json::json!([{"runtime": []}]));
    // Registration, with the superseded-turn answer.
    let register = op(&doc, "post", "/v1/interrupts");
    assert_eq!(
        codes(register, "409"),
        ["DRAFT_USED", "INTERRUPT_PENDING", "CLAIM_LOST"]
    );
    assert_eq!(codes(register, "410"), ["TURN_SUPERSEDED", "CHAT_HIDDEN"]);
    assert_eq!(codes(register, "507"), ["SNAPSHOT_FAILED"]);
    // Resume: a bearer token is optional (the secret is the credential).
    let resume = op(&doc, "post", "/v1/interrupts/{id}/resume");
    assert_eq!(resume["security"], serde_json::json!([{}, {"runtime": []}]));
    assert_eq!(
        statuses(resume),
        [
            "200", "400", "401", "403", "404", "409", "410", "422", "429", "503"
        ]
    );
    // Admin endpoints need the admin token.
    assert_eq!(
        op(&doc, "get", "/v1/admin/audit")["security"],
        serde_json::json!([{"admin": []}])
    );
    // The error body: its code is the closed enum.
    assert_eq!(
        doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["$ref"],
        "#/components/schemas/ErrorCode"
    );
    let code = &doc["components"]["schemas"]["ErrorCode"];
    let listed: Vec<&str> = code["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(listed, egressgate_control::error_codes());
    // Request bodies are strict, as the handlers are.
    let open = &doc["components"]["schemas"]["OpenTurnBody"];
    assert_eq!(open["additionalProperties"], false);
    assert_eq!(
        open["required"],
        serde_json::json!(["user_id", "chat_id", "can_ask_human"])
    );
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["runtime"]["scheme"], "bearer");
    assert_eq!(schemes["admin"]["scheme"], "bearer");
}

/// Every `$ref` points at a schema the document defines.
#[test]
fn every_reference_resolves() {
    fn walk(v: &Value, doc: &Value, bad: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    let name = r.trim_start_matches("#/components/schemas/");
                    if doc["components"]["schemas"].get(name).is_none() {
                        bad.push(r.clone());
                    }
                }
                o.values().for_each(|x| walk(x, doc, bad));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, doc, bad)),
            _ => {}
        }
    }
    let doc = doc();
    let mut bad = Vec::new();
    walk(&doc, &doc, &mut bad);
    assert!(bad.is_empty(), "dangling references: {bad:?}");
}

#[test]
fn every_listed_code_is_a_known_code_and_every_error_has_codes() {
    let doc = doc();
    let known: BTreeSet<&str> = egressgate_control::error_codes().iter().copied().collect();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (status, r) in op["responses"].as_object().unwrap() {
                if !status.starts_with('4') && !status.starts_with('5') {
                    continue;
                }
                let listed = codes(op, status);
                if path == "/readyz" {
                    continue; // plain text, not the error body
                }
                assert!(
                    !listed.is_empty(),
                    "{method} {path} {status} names no code: {r}"
                );
                for c in listed {
                    assert!(
                        known.contains(c.as_str()),
                        "{method} {path} {status}: unknown code {c}"
                    );
                }
            }
        }
    }
}

/// Every UPPER_SNAKE string literal in the control plane's source is a documented error
/// code or one of the approval tool's `200` codes, so a new code cannot go undocumented.
#[test]
fn every_code_in_the_source_is_documented() {
    const TOOL_CODES: &[&str] = &[
        "NOT_APPROVABLE",
        "NO_HUMAN",
        "NOT_PERMITTED",
        "DECLINED_THIS_TURN",
        "INTERRUPT_PENDING",
        "CONTROL_UNREACHABLE",
    ];
    let known: BTreeSet<&str> = egressgate_control::error_codes()
        .iter()
        .chain(TOOL_CODES)
        .copied()
        .collect();
    let mut stack = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    let mut unknown = BTreeSet::new();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, part) in text.split('"').enumerate() {
            let literal = i % 2 == 1
                && part.len() > 3
                && part.contains('_')
                && part.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            if literal
                && !known.contains(part)
                && !part.starts_with("EGRESSGATE_")
                && !part.starts_with("CARGO_")
                && part != "SCREAMING_SNAKE_CASE"
            {
                unknown.insert(format!("{}: {part}", p.display()));
            }
        }
    }
    assert!(unknown.is_empty(), "undocumented codes: {unknown:?}");
}

#[tokio::test]
async fn the_approval_tool_schema_is_for_a_model_as_is() {
    let app = TestApp::new().await;
    let (status, schema) = app.anonymous().get("/v1/tools/approval.json").await;
    assert_eq!(status, 200);
    assert_eq!(schema, egressgate_control::approval_tool_schema());
    assert_eq!(schema["type"], "object");
    let props: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(props, ["packages", "reason", "urls"]);
    assert_eq!(schema["required"], serde_json::json!(["reason"]));
    assert_eq!(schema["additionalProperties"], false);
    // What the schema allows, the endpoint takes (the runtime adds only its tool_call_id).
    let turn = app.turn("alice", "c1").await;
    let (status, body) = app.as_runtime().post(&format!("/v1/turns/{}/approval-requests", turn), serde_json::json!({"reason": "fetch the data", "urls": ["https://files.example.com/a.csv"], "packages": ["requests"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "ask");
}

#[test]
fn docs_match_the_document() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let doc = doc();
    let json = format!("{}\n", serde_json::to_string_pretty(&doc).unwrap());
    let md = markdown::render(&doc);
    let files = [(root.join("openapi.json"), json), (root.join("api.md"), md)];
    if std::env::var("EGRESSGATE_UPDATE_DOCS").is_ok_and(|v| v == "1") {
        for (path, text) in &files {
            std::fs::write(path, text).unwrap();
        }
        return;
    }
    for (path, text) in &files {
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == *text,
            "{} differs from the code's OpenAPI document; run \
             EGRESSGATE_UPDATE_DOCS=1 cargo test -p egressgate-control --test openapi",
            path.display()
        );
    }
}

/// `docs/api.md` defines every body it names: each schema named on a `Body:` or `Answer:`
/// line, or in a field's type, has its own section with its fields.
#[test]
fn the_reference_defines_every_schema_it_names() {
    let md = markdown::render(&doc());
    let (endpoints, schemas) = md.split_once("\n## Schemas\n").unwrap();
    let defined: BTreeSet<&str> = schemas
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .collect();
    let backticked = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && !w.contains(' '))
            .filter(|w| !w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(str::to_owned)
            .collect()
    };
    let mut named = Vec::new();
    for line in endpoints.lines() {
        if line.starts_with("Body: ") || line.starts_with("Answer: ") {
            named.extend(backticked(line));
        }
    }
    assert!(named.contains(&"OpenTurnBody".to_owned()), "{named:?}");
    assert!(named.contains(&"TurnOpened".to_owned()), "{named:?}");
    for row in schemas.lines().filter(|l| l.starts_with("| `")) {
        let type_cell = row.split(" | ").nth(1).unwrap();
        named.extend(backticked(type_cell));
    }
    let undefined: Vec<&String> = named
        .iter()
        .filter(|n| !defined.contains(n.as_str()))
        .collect();
    assert!(undefined.is_empty(), "named but not defined: {undefined:?}");
    assert!(
        schemas.contains("| `user_id` | string | yes | The person (1 to 200 bytes"),
        "OpenTurnBody's fields are listed"
    );
}
