//! The README's shell walk-through is what a newcomer types first: every variable it uses must
//! be defined before its first use, and the demo origin must never serve the gate's own data
//! directory (it holds the API tokens).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

fn shell_blocks(readme: &str) -> Vec<String> {
    readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next().map(str::to_owned))
        .collect()
}

#[test]
fn every_variable_of_the_walk_through_is_defined_before_use() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    // The environment the reader starts with, plus what `source … tokens` exports.
    let mut defined: HashSet<String> =
        ["EGRESSGATE_RUNTIME_TOKEN", "EGRESSGATE_ADMIN_TOKEN", "HOME"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for block in shell_blocks(&readme) {
        for line in block.lines() {
            let code = line.split(" #").next().unwrap_or_default();
            if code.trim_start().starts_with('#') {
                continue;
            }
            let bytes = code.as_bytes();
            for (i, _) in code.match_indices('$') {
                let name: String = code[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() || bytes.get(i + 1) == Some(&b'(') {
                    continue;
                }
                assert!(
                    defined.contains(&name),
                    "README uses ${name} before defining it: {line}"
                );
            }
            for part in code.split(';') {
                if let Some((lhs, _)) = part.trim().split_once('=')
                    && !lhs.is_empty()
                    && lhs.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    defined.insert(lhs.to_owned());
                }
            }
        }
    }
}

#[test]
fn the_demo_origin_serves_its_own_folder() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for block in shell_blocks(&readme) {
        for line in block.lines().filter(|l| l.contains("http.server")) {
            assert!(
                line.contains("--directory") && !line.contains("egressgate-data"),
                "the demo origin must serve a folder of its own, not the data directory: {line}"
            );
        }
    }
}
