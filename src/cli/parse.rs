//! Reading the command line: clap's parse, plus where each setting came from (flag or
//! environment variable), so every later error names what the user wrote.

use clap::parser::ValueSource;

use super::Cli;
use super::help::command;

/// Parses the command line, recording where each setting came from (flag or environment) so
/// errors name what the user wrote. A value clap rejects that came from the environment is
/// reported under its variable's name, not under a flag the user never passed.
pub fn parse() -> Cli {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => env_error(e).exit(),
    };
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let mut leaf = &matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    if let Some(raw) = cli.command.raw_config_mut() {
        for id in leaf.ids() {
            let id = id.as_str();
            let env = match leaf.value_source(id) {
                Some(ValueSource::CommandLine) => false,
                Some(ValueSource::EnvVariable) => true,
                _ => continue,
            };
            raw.sources.set_cli(&id.replace('_', "-"), env);
        }
    }
    cli
}

/// Rewords clap's "invalid value for '--flag'" when the value came from `EGRESSGATE_*`.
fn env_error(e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let flag = arg.split_whitespace().next().unwrap_or_default();
    let Some(key) = flag.strip_prefix("--") else {
        return e;
    };
    let on_argv = std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    let var = format!("EGRESSGATE_{}", key.replace('-', "_").to_ascii_uppercase());
    match std::env::var(&var) {
        Ok(value) if !on_argv => {
            let why = e
                .source_text()
                .map(|t| format!(": {t}"))
                .unwrap_or_default();
            clap::Error::raw(
                ErrorKind::InvalidValue,
                format!("{var}: invalid value {value:?}{why}\n"),
            )
        }
        _ => e,
    }
}

/// The source of a clap error, as text (clap keeps it behind `std::error::Error`).
trait SourceText {
    fn source_text(&self) -> Option<String>;
}

impl SourceText for clap::Error {
    fn source_text(&self) -> Option<String> {
        std::error::Error::source(self).map(ToString::to_string)
    }
}
