//! Where each setting came from (a flag, its environment variable, an alias variable or the
//! config file), so an error names what the user wrote.

use std::collections::HashMap;

/// Where each setting came from: an error must name the flag, the environment variable or the
/// file key the user wrote, never a `--flag` they did not pass.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    labels: HashMap<String, String>,
}

impl Sources {
    /// Records that `key` (kebab-case) was set by a flag (`env == false`) or its environment
    /// variable.
    pub fn set_cli(&mut self, key: &str, env: bool) {
        let label = if env {
            format!("EGRESSGATE_{}", key.replace('-', "_").to_ascii_uppercase())
        } else {
            format!("--{key}")
        };
        self.set(key, label);
    }

    /// Records how an error names `key` when neither a flag nor its variable set it (an alias
    /// variable, or the config file's key).
    pub(super) fn set(&mut self, key: &str, label: String) {
        self.labels.insert(key.to_owned(), label);
    }

    /// The label recorded for `key`, if any.
    pub(super) fn recorded(&self, key: &str) -> Option<&String> {
        self.labels.get(key)
    }

    /// How an error names `key`: `--key`, `EGRESSGATE_KEY`, `DATABASE_URL` or `key (in FILE)`.
    pub fn label(&self, key: &str) -> String {
        self.labels
            .get(key)
            .cloned()
            .unwrap_or_else(|| format!("--{key}"))
    }
}
