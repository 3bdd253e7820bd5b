//! Reading a process's CPU time and resident memory from /proc. A measured proxy is its whole
//! process tree: Apache's event MPM serves from child processes of the one started, Squid's
//! SMP workers are kids of its master; a single-process proxy is a tree of one.

use std::sync::atomic::{AtomicU64, Ordering};

/// Clock ticks per second (`getconf CLK_TCK`), set from the command line.
pub static CLK_TCK: AtomicU64 = AtomicU64::new(100);

/// The fields of /proc/PID/stat after the command name (which is in parentheses and may
/// contain spaces): `[0]` is field 3 (state), `[1]` the parent's pid, `[11]` utime, `[12]`
/// stime.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// `pid` and every live descendant of it.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(ppid) = stat_fields(child).and_then(|f| f.get(1)?.parse().ok()) {
                parents.push((child, ppid));
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// utime + stime of one process in seconds (all its threads).
fn own_cpu_seconds(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / CLK_TCK.load(Ordering::Relaxed).max(1) as f64)
}

/// utime + stime of `pid` and its live descendants, in seconds (`None` when `pid` is gone).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let own = own_cpu_seconds(pid)?;
    Some(
        own + tree(pid)
            .into_iter()
            .skip(1)
            .filter_map(own_cpu_seconds)
            .sum::<f64>(),
    )
}

/// VmRSS of one process in KiB.
fn own_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// VmRSS of `pid` and its live descendants in KiB (pages the processes share are counted once
/// per process, as `ps` does).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let own = own_rss_kib(pid)?;
    Some(
        own + tree(pid)
            .into_iter()
            .skip(1)
            .filter_map(own_rss_kib)
            .sum::<u64>(),
    )
}

/// Whether `pid` still runs (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    stat_fields(pid)
        .and_then(|f| f.first().map(|s| s != "Z"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child's CPU and memory count toward its parent's tree.
    #[test]
    fn a_tree_holds_its_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let t = tree(me);
        assert_eq!(t[0], me);
        assert!(t.contains(&child.id()), "{t:?}");
        assert!(rss_kib(me).unwrap() > own_rss_kib(me).unwrap());
        assert!(alive(me) && alive(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(child.id()));
        assert!(cpu_seconds(me).is_some());
    }
}
