//! Which command opened a captured connection: the client socket's inode from
//! `/proc/net/tcp{,6}` (its local address is the accepted stream's peer), the process of the
//! sandbox's PID namespace holding that socket, and its command line, bounded. Best effort
//! and evidence from the sandbox's side only: the proxy shows it labelled as the sandbox's
//! claim. The environment is never read.

use std::ffi::OsStr;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// Most arguments after the program shown.
const MAX_ARGS: usize = 3;
/// Longest part (program or argument) shown, in bytes.
const MAX_PART: usize = 64;
/// Longest command shown, in bytes (the proxy keeps no more either).
const MAX_COMMAND: usize = 200;

/// The command line of the process holding the client end `peer` of a captured connection,
/// as `program arg1 arg2 arg3` (bounded, printable ASCII); `None` when it cannot be told.
/// Reads `/proc/net`, then each process's descriptors once: no loop over `/proc` repeats.
pub(crate) fn command_of(peer: SocketAddr) -> Option<String> {
    let table = match peer.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let inode = socket_inode(&fs::read_to_string(table).ok()?, peer)?;
    let link = format!("socket:[{inode}]");
    let own = std::process::id().to_string();
    let pid = fs::read_dir("/proc")
        .ok()?
        .flatten()
        .map(|e| e.file_name())
        .filter(|name| name.to_str().is_some_and(|n| n != own && is_pid(n)))
        .find(|pid| holds(&Path::new("/proc").join(pid).join("fd"), &link))?;
    let cmdline = fs::read(Path::new("/proc").join(pid).join("cmdline")).ok()?;
    shown(&cmdline)
}

fn is_pid(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// Whether a process's descriptor directory holds a link to `link` (`socket:[N]`).
fn holds(fds: &Path, link: &str) -> bool {
    let Ok(entries) = fs::read_dir(fds) else {
        return false;
    };
    entries
        .flatten()
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|to| to.as_os_str() == OsStr::new(link)))
}

/// The inode of the socket whose local address is `local`, from a `/proc/net/tcp{,6}` table.
fn socket_inode(table: &str, local: SocketAddr) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (addr, port) = cols.get(1)?.split_once(':')?;
        let matches = u16::from_str_radix(port, 16).ok() == Some(local.port())
            && address(addr) == Some(local.ip());
        let inode: u64 = cols.get(9)?.parse().ok()?;
        (matches && inode != 0).then_some(inode)
    })
}

/// An address as the kernel prints it: 32-bit words in hex, each in the host's byte order.
fn address(hex: &str) -> Option<IpAddr> {
    let words: Option<Vec<[u8; 4]>> = (0..hex.len() / 8)
        .map(|i| {
            let word = hex.get(i * 8..i * 8 + 8)?;
            u32::from_str_radix(word, 16).ok().map(u32::to_ne_bytes)
        })
        .collect();
    let bytes: Vec<u8> = words?.concat();
    match (hex.len(), bytes.len()) {
        (8, 4) => <[u8; 4]>::try_from(bytes)
            .ok()
            .map(|b| Ipv4Addr::from(b).into()),
        (32, 16) => <[u8; 16]>::try_from(bytes)
            .ok()
            .map(|b| Ipv6Addr::from(b).into()),
        _ => None,
    }
}

/// `cmdline` (NUL-separated) shown: the program's base name and at most [`MAX_ARGS`]
/// arguments, each cut to [`MAX_PART`] bytes, the whole to [`MAX_COMMAND`], every byte
/// outside printable ASCII as `?`. `None` for an empty command line (a kernel thread, a
/// process gone).
fn shown(cmdline: &[u8]) -> Option<String> {
    let mut parts = cmdline.split(|b| *b == 0).filter(|p| !p.is_empty());
    let program = parts.next()?;
    let program = program.rsplit(|b| *b == b'/').next().unwrap_or(program);
    let mut out = String::new();
    for part in std::iter::once(program).chain(parts.take(MAX_ARGS)) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(part.iter().take(MAX_PART).map(|&b| match b {
            b' '..=b'~' => char::from(b),
            _ => '?',
        }));
    }
    out.truncate(MAX_COMMAND);
    Some(out.trim().to_owned()).filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_socket_by_its_local_address_in_either_table() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            \x20  0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1\n\
            \x20  1: 0100007F:D431 0A00A8C0:0050 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1\n";
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap_or(([0; 4], 0).into());
        assert_eq!(socket_inode(v4, peer), Some(4242));
        let other: SocketAddr = "127.0.0.1:54322".parse().unwrap_or(([0; 4], 0).into());
        assert_eq!(socket_inode(v4, other), None);
        let ip = Ipv6Addr::LOCALHOST.octets();
        let words: String = ip
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect();
        let v6 = format!("header\n   0: {words}:D431 {words}:0050 01 0:0 0:0 0 1000 0 77 1\n");
        let peer6 = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 54321);
        assert_eq!(socket_inode(&v6, peer6), Some(77));
    }

    #[test]
    fn the_command_is_bounded_printable_and_never_more_than_three_arguments() {
        assert_eq!(
            shown(b"/usr/bin/curl\0-s\0http://files.example.com/\0").as_deref(),
            Some("curl -s http://files.example.com/")
        );
        assert_eq!(
            shown(b"python3\0a\0b\0c\0d\0e\0").as_deref(),
            Some("python3 a b c")
        );
        let mut long = b"sh\0".to_vec();
        long.extend_from_slice(&[b'x'; 100]);
        long.extend_from_slice(b"\0caf\xc3\xa9\tz\0");
        let seen = shown(&long).unwrap_or_default();
        assert_eq!(seen, format!("sh {} caf???z", "x".repeat(MAX_PART)));
        let huge = format!("{0}\0{0}\0{0}\0{0}", "y".repeat(300));
        assert!(shown(huge.as_bytes()).is_some_and(|c| c.len() == MAX_COMMAND));
        assert_eq!(shown(b""), None);
        assert_eq!(shown(b"\0\0"), None);
    }
}
