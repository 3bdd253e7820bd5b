//! The reference pages stay true to the binary: every setting `serve --help` lists has a row in
//! `docs/configuration.md`, every setting row there is a flag the binary takes, and every
//! subcommand `--help` lists is in the page's subcommand table. (The API reference is held to
//! the OpenAPI document by `control/tests/openapi.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_egressgate"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The long flags a `--help` text lists (without `--help` and `--version`).
fn flags(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', ',', '=', '<']).next())
        .filter(|f| !matches!(*f, "help" | "version"))
        .map(str::to_owned)
        .collect()
}

/// The backticked names in the first column of the page's tables.
fn table_keys(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_owned))
        .map(|k| k.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

fn configuration_page() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .unwrap()
}

#[test]
fn every_setting_of_serve_has_a_row_and_every_row_is_a_flag() {
    let page = configuration_page();
    let documented = table_keys(&page);
    let settings = flags(&help(&["serve"]));
    assert!(settings.len() > 40, "{settings:?}");
    // `config` names the file itself; the page says so in its text, not in a settings row.
    let missing: Vec<_> = settings
        .iter()
        .filter(|f| *f != "config" && !documented.contains(*f))
        .collect();
    assert!(
        missing.is_empty(),
        "settings without a row in docs/configuration.md: {missing:?}"
    );
    assert!(
        page.contains("`--config`"),
        "the config file flag is described"
    );
    let subcommands = subcommands();
    let stale: Vec<_> = documented
        .iter()
        .filter(|k| {
            k.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .filter(|k| !settings.contains(*k) && !subcommands.contains(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "rows naming no flag nor subcommand: {stale:?}"
    );
}

/// The subcommands `egressgate --help` lists.
fn subcommands() -> BTreeSet<String> {
    let text = help(&[]);
    text.split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommand_is_in_the_subcommand_table() {
    let documented = table_keys(&configuration_page());
    let missing: Vec<_> = subcommands()
        .into_iter()
        .filter(|c| !documented.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "subcommands missing from docs/configuration.md: {missing:?}"
    );
}
