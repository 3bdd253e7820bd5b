//! The command's view of `/etc/resolv.conf`, `/etc/hosts` and the `hosts:` line of
//! `/etc/nsswitch.conf`, bind-mounted in its own mount namespace: the resolver on loopback,
//! only loopback names in `hosts` (a host entry would let a script pick an address itself,
//! and an address outside the pool is refused), and name lookups through `files dns` only
//! (an NSS module such as systemd-resolved's `resolve` would ask a daemon outside over a Unix
//! socket and hand back real addresses, which the proxy refuses as IP literals).

use std::path::Path;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};

/// `/etc/resolv.conf` inside: the resolver, no search list (a short name is looked up as
/// written), few retries (the answer comes from this machine or not at all).
const RESOLV_CONF: &str = "nameserver 127.0.0.1\noptions ndots:1 timeout:2 attempts:2\n";
/// `/etc/hosts` inside: loopback only.
const HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// `nsswitch.conf` with its `hosts:` line (if any) replaced by `hosts: files dns`; every
/// other database (users, groups) keeps its configured sources.
fn nsswitch(system: &str) -> String {
    system
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("hosts:") {
                "hosts: files dns"
            } else {
                line
            }
        })
        .fold(String::new(), |mut out, line| {
            out.push_str(line);
            out.push('\n');
            out
        })
}

/// In a new mount namespace whose mounts are private to it: writes the files into `dir` and
/// mounts them, read-only, over the system's. A system file that does not exist is left
/// alone: without `resolv.conf` glibc asks `127.0.0.1`, which the ruleset sends to the
/// resolver anyway, and without `nsswitch.conf` it uses `files dns`.
pub(crate) fn mount_all(dir: &Path) -> Result<(), String> {
    let none: Option<&str> = None;
    let nss = std::fs::read_to_string("/etc/nsswitch.conf")
        .map(|system| nsswitch(&system))
        .unwrap_or_default();
    let mut files = vec![("resolv.conf", RESOLV_CONF), ("hosts", HOSTS)];
    if !nss.is_empty() {
        files.push(("nsswitch.conf", nss.as_str()));
    }
    for (name, text) in files {
        let source = dir.join(name);
        std::fs::write(&source, text).map_err(|e| format!("writing {name}: {e}"))?;
        let target = Path::new("/etc").join(name);
        match mount(Some(&source), &target, none, MsFlags::MS_BIND, none) {
            Ok(()) => {}
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(format!("mounting {}: {e}", target.display())),
        }
        let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        mount(none, &target, none, read_only, none)
            .map_err(|e| format!("making {} read-only: {e}", target.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_hosts_line_of_nsswitch_changes() {
        let system = "passwd: files systemd\nhosts:  files mdns4_minimal [NOTFOUND=return] \
                      resolve [!UNAVAIL=return] dns\n# hosts: comment\ngroup: files sss\n";
        assert_eq!(
            super::nsswitch(system),
            "passwd: files systemd\nhosts: files dns\n# hosts: comment\ngroup: files sss\n"
        );
    }
}
