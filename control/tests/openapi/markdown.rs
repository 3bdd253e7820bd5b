//! The API reference (`docs/api.md`) rendered from the OpenAPI document: the endpoints by
//! tag with their auth, body, answer and every status, then every schema a body names with
//! its fields (name, type, required, description), then the error codes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

/// The named schema of a request body or response, if it has one.
fn schema_name(body: &Value) -> Option<&str> {
    body["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
}

/// A field's type in words; schema names in backticks (each has its own section).
fn type_of(s: &Value) -> String {
    if let Some(r) = s["$ref"].as_str() {
        return format!("`{}`", r.rsplit('/').next().unwrap_or(r));
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(parts) = s[key].as_array() {
            let join = if key == "allOf" { " and " } else { " or " };
            return parts.iter().map(type_of).collect::<Vec<_>>().join(join);
        }
    }
    if let Some(values) = s["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        return format!("one of {}", values.join(", "));
    }
    let types: Vec<&str> = match &s["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return "any".to_owned(),
    };
    types
        .iter()
        .map(|t| match *t {
            "array" => format!("array of {}", type_of(&s["items"])),
            "object" if s["additionalProperties"].is_object() => {
                format!("map of {}", type_of(&s["additionalProperties"]))
            }
            other => other.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// One section per component schema: its description and a table of its fields.
fn schemas(doc: &Value) -> String {
    let mut out = String::from(
        "\n## Schemas\n\nEvery body named above, and every schema those name. A field not \
         marked required may be absent.\n",
    );
    for (name, s) in doc["components"]["schemas"].as_object().unwrap() {
        out.push_str(&format!("\n### `{name}`\n\n"));
        if let Some(d) = s["description"].as_str() {
            out.push_str(&format!("{}\n\n", cell(d)));
        }
        let mut parts: Vec<&Value> = s["allOf"].as_array().into_iter().flatten().collect();
        parts.push(s);
        let mut rows = String::new();
        for part in &parts {
            if part["$ref"].is_string() {
                out.push_str(&format!("All the fields of {}, and:\n\n", type_of(part)));
            }
            let required: Vec<&str> = part["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for (field, f) in part["properties"].as_object().into_iter().flatten() {
                let about = f["description"].as_str().unwrap_or("");
                let req = if required.contains(&field.as_str()) {
                    "yes"
                } else {
                    "no"
                };
                rows.push_str(&format!(
                    "| `{field}` | {} | {req} | {} |\n",
                    cell(&type_of(f)),
                    cell(about)
                ));
            }
        }
        if rows.is_empty() {
            out.push_str(&format!("Type: {}.\n", cell(&type_of(s))));
        } else {
            out.push_str("| field | type | required | description |\n|---|---|---|---|\n");
            out.push_str(&rows);
        }
    }
    out
}

/// The API reference in Markdown, rendered from the document.
pub fn render(doc: &Value) -> String {
    let mut out = String::from(
        "# Control API reference\n\n\
         Generated from the OpenAPI document the server serves at `GET /openapi.json` \
         (a copy is in [`openapi.json`](openapi.json)); `control/tests/openapi.rs` fails when \
         either file differs from the code (`EGRESSGATE_UPDATE_DOCS=1 cargo test -p \
         egressgate-control --test openapi` rewrites them).\n\n\
         Authentication: `Authorization: Bearer <token>` with the runtime or the admin token. \
         Errors are `{\"error\": {\"code\", \"message\"}}`; the codes each status can carry are \
         listed below (and in each response's `x-error-codes`).\n",
    );
    let mut by_tag: std::collections::BTreeMap<String, Vec<(String, String, &Value)>> =
        Default::default();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let tag = op["tags"][0].as_str().unwrap_or("other").to_owned();
            by_tag
                .entry(tag)
                .or_default()
                .push((path.clone(), method.to_uppercase(), op));
        }
    }
    let tags: Vec<(String, String)> = doc["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (tag, about) in tags {
        out.push_str(&format!("\n## {tag}\n\n{about}.\n"));
        for (path, method, op) in by_tag.get(&tag).into_iter().flatten() {
            out.push_str(&format!("\n### `{method} {path}`\n\n"));
            if let Some(d) = op["summary"].as_str() {
                out.push_str(&format!("{}\n\n", d.replace('\n', " ")));
            }
            if let Some(d) = op["description"].as_str() {
                out.push_str(&format!("{}\n\n", d.replace('\n', " ")));
            }
            let auth: Vec<String> = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    let names: Vec<&String> = s.as_object().unwrap().keys().collect();
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names
                            .iter()
                            .map(|n| format!("{n} token"))
                            .collect::<Vec<_>>()
                            .join(" + ")
                    }
                })
                .collect();
            out.push_str(&format!(
                "Auth: {}.\n\n",
                if auth.is_empty() {
                    "none".to_owned()
                } else {
                    auth.join(" or ")
                }
            ));
            if let Some(body) = schema_name(&op["requestBody"]) {
                out.push_str(&format!("Body: `{body}`.\n\n"));
            }
            let answers: Vec<String> = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(status, _)| status.starts_with('2'))
                .filter_map(|(status, r)| schema_name(r).map(|n| format!("`{n}` ({status})")))
                .collect();
            if !answers.is_empty() {
                out.push_str(&format!("Answer: {}.\n\n", answers.join(", ")));
            }
            out.push_str("| status | meaning |\n|---|---|\n");
            for (status, r) in op["responses"].as_object().unwrap() {
                let text = r["description"]
                    .as_str()
                    .unwrap_or("")
                    .replace("\n\n", " ")
                    .replace('\n', " ")
                    .replace('|', "\\|");
                out.push_str(&format!("| {status} | {text} |\n"));
            }
        }
    }
    out.push_str(&schemas(doc));
    out.push_str("\n## Error codes\n\n");
    for c in egressgate_control::error_codes() {
        out.push_str(&format!("- `{c}`\n"));
    }
    out
}
