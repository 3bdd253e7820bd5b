//! Every endpoint the prose docs name (`GET /v1/...` in the README, `docs/`, the clients'
//! READMEs) is one the API document serves, with that method: a renamed or removed route
//! cannot leave a page telling people to call it. (`docs/api.md` is generated from the
//! document itself, and `control/tests/openapi.rs` keeps the two in step.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

/// The pages people read, not the generated reference.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![
        root.join("README.md"),
        root.join("clients/python/README.md"),
        root.join("clients/typescript/README.md"),
    ];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        let generated = path.file_name().is_some_and(|n| n == "api.md");
        if path.extension().is_some_and(|e| e == "md") && !generated {
            pages.push(path);
        }
    }
    pages
}

/// `(method, path)` for every `METHOD /v1/...` a page names, the path cut at its query,
/// fragment or the first character that cannot be in one.
fn named(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for method in METHODS {
        let needle = format!("{method} /v1/");
        for (at, _) in text.match_indices(&needle) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
                continue;
            }
            let rest = &text[at + method.len() + 1..];
            let end = rest
                .find(|c: char| c.is_whitespace() || "`)\"',;?#*<>|".contains(c))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(['.', ':']);
            found.push((method.to_owned(), path.to_owned()));
        }
    }
    found
}

/// Whether a page's `path` (with any parameter spelling: `{chat}`, `c1`, `NAME`) is the
/// document's `template`: same segments, a `{…}` segment matching any one segment.
fn matches(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| t == p || (t.starts_with('{') && t.ends_with('}') && !p.is_empty()))
}

#[test]
fn every_endpoint_the_docs_name_is_served_with_that_method() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("docs/openapi.json")).unwrap())
            .unwrap();
    let served: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_ascii_uppercase(), path.clone()))
        })
        .collect();
    assert!(
        served.len() > 40,
        "the document lists too few operations: {served:?}"
    );

    let mut named_count = 0;
    let mut unknown = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (method, path) in named(&text) {
            named_count += 1;
            let known = served
                .iter()
                .any(|(m, template)| *m == method && matches(template, &path));
            if !known {
                unknown.push(format!("{}: {method} {path}", page.display()));
            }
        }
    }
    assert!(
        named_count > 50,
        "the pages name only {named_count} endpoints: the scan is broken"
    );
    assert!(
        unknown.is_empty(),
        "pages name endpoints the API does not serve:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn the_scan_reads_each_spelling_and_refuses_a_wrong_method_or_path() {
    let text = "call `POST /v1/interrupts/{id}/resume`, then GET /v1/chats/c1/approvals?x=1, \
                not XGET /v1/nothing.";
    assert_eq!(
        named(text),
        vec![
            ("GET".to_owned(), "/v1/chats/c1/approvals".to_owned()),
            ("POST".to_owned(), "/v1/interrupts/{id}/resume".to_owned()),
        ]
    );
    assert!(matches(
        "/v1/chats/{chat_id}/approvals",
        "/v1/chats/c1/approvals"
    ));
    assert!(!matches(
        "/v1/chats/{chat_id}/approvals",
        "/v1/chats/c1/approval"
    ));
    assert!(!matches("/v1/chats/{chat_id}", "/v1/chats/c1/approvals"));
    assert!(!matches("/v1/chats/{chat_id}", "/v1/chats/"));
}
