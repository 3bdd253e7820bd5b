//! Finds and runs the system tools the capture is set up with (`nft`, `ip`), turning their
//! failure into one line.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where the tools live when `PATH` (a non-root user's, say) lacks the sbin directories.
const SBIN: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The full path of `program`, searched in `PATH` and then the sbin directories.
pub(crate) fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN.iter().map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Runs `program args...` with `stdin` as its input; `Err` with its first line of stderr
/// (or why it could not start) unless it exits 0.
pub(crate) fn run(program: &str, args: &[&str], stdin: &str) -> Result<(), String> {
    let path = find(program).ok_or_else(|| format!("{program} not found"))?;
    let mut child = Command::new(&path)
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {program}: {e}"))?;
    let written = child
        .stdin
        .take()
        .map(|mut input| input.write_all(stdin.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    if let Some(Err(e)) = written {
        return Err(format!("{program}: writing its input: {e}"));
    }
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Err(format!(
        "{program} {} failed ({}): {first}",
        args.join(" "),
        output.status
    ))
}
