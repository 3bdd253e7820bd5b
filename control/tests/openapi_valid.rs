//! The OpenAPI document is one a client generator can use: it validates with
//! `openapi-spec-validator` (the Python package, run on the served document), every
//! operationId is unique, every security scheme an operation names is declared, and every
//! JSON body, request or response, is a named schema of `components`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;
use support::TestApp;

/// `(method, path, operation)` for every operation of the document.
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((method.clone(), path.clone(), op));
        }
    }
    out
}

#[test]
fn every_operation_id_is_unique() {
    let doc = egressgate_control::openapi_document();
    let mut seen = BTreeSet::new();
    for (method, path, op) in operations(&doc) {
        let id = op["operationId"].as_str().unwrap_or_default();
        assert!(!id.is_empty(), "{method} {path} has no operationId");
        assert!(seen.insert(id.to_owned()), "operationId {id} repeats");
    }
    assert!(seen.contains("openTurn") && seen.contains("listAdminTokens"));
}

#[test]
fn every_security_scheme_used_is_declared() {
    let doc = egressgate_control::openapi_document();
    let declared: BTreeSet<&String> = doc["components"]["securitySchemes"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    let mut used = BTreeSet::new();
    for (method, path, op) in operations(&doc) {
        for requirement in op["security"].as_array().into_iter().flatten() {
            for name in requirement.as_object().unwrap().keys() {
                assert!(
                    declared.contains(name),
                    "{method} {path} names the undeclared scheme {name}"
                );
                used.insert(name.clone());
            }
        }
    }
    assert_eq!(
        used,
        ["admin", "runtime", "turn_credential"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["turn_credential"]["scheme"],
        "basic"
    );
}

#[test]
fn every_json_body_is_a_named_schema() {
    let doc = egressgate_control::openapi_document();
    let schemas = &doc["components"]["schemas"];
    let mut unnamed = Vec::new();
    for (method, path, op) in operations(&doc) {
        let mut bodies = vec![("request".to_owned(), &op["requestBody"])];
        for (status, response) in op["responses"].as_object().unwrap() {
            bodies.push((status.clone(), response));
        }
        for (what, body) in bodies {
            let Some(schema) = body["content"]["application/json"].get("schema") else {
                continue;
            };
            let named = schema["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
                .is_some_and(|name| schemas.get(name).is_some());
            if !named {
                unnamed.push(format!("{method} {path} {what}: {schema}"));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "bodies without a named schema: {unnamed:#?}"
    );
}

/// `openapi-spec-validator` on the document as served. Installed by `.ci/run`; without it
/// the test fails under `CI=true` and says it skipped otherwise.
#[tokio::test]
async fn the_served_document_validates() {
    let probe = Command::new("python3")
        .args(["-c", "import openapi_spec_validator"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "openapi-spec-validator is missing; .ci/run installs it"
        );
        eprintln!("skipped: openapi-spec-validator is missing");
        return;
    }
    let app = TestApp::new().await;
    let (status, served) = app.anonymous().get("/openapi.json").await;
    assert_eq!(status, 200);
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys\n\
             from openapi_spec_validator import validate\n\
             from openapi_spec_validator.validation import OpenAPIV31SpecValidator\n\
             doc = json.load(sys.stdin)\n\
             validate(doc, cls=OpenAPIV31SpecValidator)\n\
             print('valid', len(doc['paths']))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(served.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the document does not validate:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("valid "), "{stdout}");
}
