//! A thin command-line front end over `egressgate_sandbox::run`, so tests can drive the
//! launcher as a real process: `egressgate-sandbox-run [--proxy-url URL | --proxy-url-file
//! PATH] [--capture on|off|auto] [--no-isolate] [--as-user USER|UID] [--gate-data-dir DIR]
//! -- CMD` (or the URL in `EGRESSGATE_PROXY_URL`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::exit;

use egressgate_sandbox::{
    Capture, EXIT_LAUNCHER_ERROR, RunOptions, SandboxError, hide_proxy_url_from_argv,
    proxy_url_from, run,
};

fn main() {
    if let Err(e) = hide_proxy_url_from_argv() {
        fail(&e);
    }
    let options = match parse(std::env::args_os().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("egressgate sandbox: {message}");
            exit(EXIT_LAUNCHER_ERROR)
        }
    };
    match run(options) {
        Ok(code) => exit(code),
        Err(e) => fail(&e),
    }
}

fn fail(e: &SandboxError) -> ! {
    eprintln!("egressgate sandbox: {e}");
    exit(e.exit_code())
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<RunOptions, String> {
    let mut proxy_url = None;
    let mut proxy_url_file = None;
    let mut isolate = true;
    let mut capture = Capture::On;
    let mut as_user = None;
    let mut gate_data_dirs = Vec::new();
    let value = |name: &str, v: Option<OsString>| -> Result<String, String> {
        v.ok_or(format!("{name} needs a value"))?
            .into_string()
            .map_err(|_| format!("{name} is not UTF-8"))
    };
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--proxy-url") => proxy_url = Some(value("--proxy-url", args.next())?),
            Some("--proxy-url-file") => {
                proxy_url_file = Some(PathBuf::from(value("--proxy-url-file", args.next())?));
            }
            Some("--capture") => capture = value("--capture", args.next())?.parse()?,
            Some("--no-isolate") => isolate = false,
            Some("--as-user") => as_user = Some(value("--as-user", args.next())?),
            Some("--gate-data-dir") => {
                gate_data_dirs.push(PathBuf::from(value("--gate-data-dir", args.next())?));
            }
            Some("--") => break,
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    let proxy_url =
        proxy_url_from(proxy_url, proxy_url_file.as_deref()).map_err(|e| e.to_string())?;
    Ok(RunOptions {
        proxy_url,
        isolate,
        capture,
        ca: None,
        as_user,
        gate_data_dirs,
        command: args.collect(),
    })
}
