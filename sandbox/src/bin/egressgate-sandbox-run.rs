//! A bare command-line front end over `egressgate_sandbox::run`, so tests can drive the
//! launcher as a real process: `egressgate-sandbox-run --proxy-url URL [--no-isolate] -- CMD`.

use std::ffi::OsString;
use std::process::exit;

use egressgate_sandbox::{EXIT_LAUNCHER_ERROR, RunOptions, run};

fn main() {
    let options = match parse(std::env::args_os().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("egressgate sandbox: {message}");
            exit(EXIT_LAUNCHER_ERROR)
        }
    };
    match run(options) {
        Ok(code) => exit(code),
        Err(e) => {
            eprintln!("egressgate sandbox: {e}");
            exit(e.exit_code())
        }
    }
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<RunOptions, String> {
    let mut proxy_url = None;
    let mut isolate = true;
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--proxy-url") => {
                let value = args.next().ok_or("--proxy-url needs a value")?;
                proxy_url = Some(
                    value
                        .into_string()
                        .map_err(|_| "--proxy-url is not UTF-8")?,
                );
            }
            Some("--no-isolate") => isolate = false,
            Some("--") => break,
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok(RunOptions {
        proxy_url: proxy_url.ok_or("--proxy-url is required")?,
        isolate,
        command: args.collect(),
    })
}
