//! Where the proxy URL (which carries the turn's secret) comes from, and keeping it off the
//! command line, which every local user can read in `/proc/PID/cmdline`.
//!
//! Sources, one at a time: `--proxy-url-file PATH` (the file's first line), the
//! `EGRESSGATE_PROXY_URL` environment variable (readable only by the same user and root,
//! and not at all once the launcher is non-dumpable), or `--proxy-url URL`, which exposes the
//! secret. When it was given as `--proxy-url`, [`hide_proxy_url_from_argv`] re-executes the
//! launcher with the flag removed and the URL moved into `EGRESSGATE_PROXY_URL`: a fresh
//! `exec` gives the process new argument memory, which overwriting in place could not promise
//! (a process title is not always where `cmdline` reads), and needs no `unsafe`. The secret
//! is visible in the process list only for the moment between the caller's `exec` and ours.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::error::SandboxError;

/// The environment variable the proxy URL may come from.
pub const PROXY_URL_ENV: &str = "EGRESSGATE_PROXY_URL";
const FLAG: &str = "--proxy-url";

/// The proxy URL from the one source given: `flag` (`--proxy-url`), `file`
/// (`--proxy-url-file`) or [`PROXY_URL_ENV`]. The flags win over the environment; both flags
/// at once is an error, and so is none of the three.
pub fn proxy_url_from(flag: Option<String>, file: Option<&Path>) -> Result<String, SandboxError> {
    let bad = |m: String| SandboxError::ProxyUrlSource(m);
    match (flag, file) {
        (Some(_), Some(_)) => Err(bad(
            "--proxy-url and --proxy-url-file are alternatives; give one".into(),
        )),
        (Some(url), None) => Ok(url),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                bad(format!(
                    "cannot read --proxy-url-file {}: {e}",
                    path.display()
                ))
            })?;
            let url = text.lines().next().unwrap_or("").trim();
            if url.is_empty() {
                return Err(bad(format!("--proxy-url-file {} is empty", path.display())));
            }
            Ok(url.to_owned())
        }
        (None, None) => match std::env::var(PROXY_URL_ENV) {
            Ok(url) if !url.is_empty() => Ok(url),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(bad(format!(
                "no proxy URL: give --proxy-url-file PATH or set {PROXY_URL_ENV} \
                 (--proxy-url URL works too, but shows the turn's secret to every local user)"
            ))),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(bad(format!("{PROXY_URL_ENV} is not UTF-8")))
            }
        },
    }
}

/// If this process's arguments carry `--proxy-url URL` (or `--proxy-url=URL`) before `--`,
/// re-executes it without them and with the URL in [`PROXY_URL_ENV`]; returns only when there
/// is nothing to hide. Call it first thing in `main`, before any thread starts.
pub fn hide_proxy_url_from_argv() -> Result<(), SandboxError> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let Some((kept, url)) = without_proxy_url(&args) else {
        return Ok(());
    };
    let Some((argv0, rest)) = kept.split_first() else {
        return Ok(());
    };
    let error = std::process::Command::new("/proc/self/exe")
        .arg0(argv0)
        .args(rest)
        .env(PROXY_URL_ENV, url)
        .exec();
    Err(SandboxError::setup(
        "re-executing the launcher to take --proxy-url off its command line",
        error,
    ))
}

/// `args` without the `--proxy-url` flag and its value, and that value; `None` when absent.
/// Only arguments before `--` count (after it comes the command's own).
fn without_proxy_url(args: &[OsString]) -> Option<(Vec<OsString>, OsString)> {
    let mut kept = Vec::with_capacity(args.len());
    let mut url = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            kept.push(arg.clone());
            kept.extend(iter.cloned());
            break;
        }
        if arg == FLAG {
            url = Some(iter.next().cloned().unwrap_or_default());
        } else if let Some(value) = arg
            .to_str()
            .and_then(|a| a.strip_prefix(FLAG))
            .and_then(|a| a.strip_prefix('='))
        {
            url = Some(OsStr::new(value).to_owned());
        } else {
            kept.push(arg.clone());
        }
    }
    url.map(|url| (kept, url))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn takes_the_flag_out_in_both_spellings_but_never_after_the_separator() {
        let (kept, url) = without_proxy_url(&os(&[
            "eg",
            "sandbox",
            "run",
            "--proxy-url",
            "http://t:s@h:1",
            "--",
            "cmd",
            "--proxy-url",
            "x",
        ]))
        .unwrap_or_default();
        assert_eq!(
            kept,
            os(&["eg", "sandbox", "run", "--", "cmd", "--proxy-url", "x"])
        );
        assert_eq!(url, "http://t:s@h:1");
        let (kept, url) = without_proxy_url(&os(&[
            "eg",
            "--proxy-url=http://t:s@h:1",
            "--capture",
            "on",
        ]))
        .unwrap_or_default();
        assert_eq!(kept, os(&["eg", "--capture", "on"]));
        assert_eq!(url, "http://t:s@h:1");
        assert!(without_proxy_url(&os(&["eg", "--", "--proxy-url", "x"])).is_none());
        assert!(without_proxy_url(&os(&["eg", "--proxy-url-file", "/p"])).is_none());
    }

    #[test]
    fn reads_the_file_and_refuses_two_sources_or_an_empty_file() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("url");
        std::fs::write(&file, "http://t:s@gate:1\n")?;
        assert_eq!(
            proxy_url_from(None, Some(&file)).ok().as_deref(),
            Some("http://t:s@gate:1")
        );
        let both = proxy_url_from(Some("http://a".into()), Some(&file));
        assert!(matches!(both, Err(SandboxError::ProxyUrlSource(m)) if m.contains("alternatives")));
        std::fs::write(&file, "\n")?;
        let empty = proxy_url_from(None, Some(&file));
        assert!(matches!(empty, Err(SandboxError::ProxyUrlSource(m)) if m.contains("empty")));
        let missing = proxy_url_from(None, Some(&dir.path().join("nope")));
        assert!(
            matches!(missing, Err(SandboxError::ProxyUrlSource(m)) if m.contains("cannot read"))
        );
        Ok(())
    }
}
