//! The command's view of `/etc/resolv.conf` and `/etc/hosts`, bind-mounted in its own mount
//! namespace: the resolver on loopback, and only loopback names in `hosts` (a host entry
//! would let a script pick an address itself, and an address outside the pool is refused).

use std::path::Path;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};

/// `/etc/resolv.conf` inside: the resolver, no search list (a short name is looked up as
/// written), few retries (the answer comes from this machine or not at all).
const RESOLV_CONF: &str = "nameserver 127.0.0.1\noptions ndots:1 timeout:2 attempts:2\n";
/// `/etc/hosts` inside: loopback only.
const HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// Makes every mount private to this (new) mount namespace, writes the two files into `dir`
/// and mounts them, read-only, over the system's. A system file that does not exist is left
/// alone: glibc then asks `127.0.0.1`, which the ruleset sends to the resolver anyway.
pub(crate) fn mount_all(dir: &Path) -> Result<(), String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("making mounts private: {e}"))?;
    for (name, text) in [("resolv.conf", RESOLV_CONF), ("hosts", HOSTS)] {
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
