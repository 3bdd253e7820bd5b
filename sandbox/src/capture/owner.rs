//! Which command opened a captured connection: the client socket's inode (by one exact
//! `sock_diag` query, see [`super::diag`]; from `/proc/net/tcp{,6}` only on a kernel without
//! it), the process of the sandbox's PID namespace holding that socket (init mounted a `/proc`
//! of that namespace, so only the sandbox's own processes are looked at), and its command line,
//! bounded. Best effort and evidence from the sandbox's side only: the proxy shows it labelled
//! as the sandbox's claim. The environment is never read.
//!
//! A connection waits for its command at most [`LOOKUP_BOUND`]; past it the `CONNECT` goes
//! without one, and at most [`LOOKUPS`] lookups run at once however many are abandoned.

use std::ffi::OsStr;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// Most arguments after the program shown.
const MAX_ARGS: usize = 3;
/// Longest part (program or argument) shown, in bytes.
const MAX_PART: usize = 64;
/// Longest command shown, in bytes (the proxy keeps no more either).
const MAX_COMMAND: usize = 200;

/// Longest a captured connection waits for its command before the `CONNECT` goes without
/// it. A lookup takes well under a millisecond; this is the ceiling for a pathological one (a
/// sandbox holding thousands of descriptors, a starved machine), small beside what opening a
/// connection to a real server costs.
pub(crate) const LOOKUP_BOUND: Duration = Duration::from_millis(100);
/// Most lookups running at once (each on a blocking thread): an abandoned lookup keeps its
/// place until it ends, so slow ones cannot pile up threads.
pub(crate) const LOOKUPS: usize = 4;

/// The places lookups share ([`LOOKUPS`] of them).
pub(crate) fn lookups() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(LOOKUPS))
}

/// [`command_of`] for a captured connection from `peer` to `dest`, bounded: `None` when it
/// cannot be told within [`LOOKUP_BOUND`] (a place in `lookups` included).
pub(crate) async fn command_within(
    lookups: &Arc<Semaphore>,
    peer: SocketAddr,
    dest: SocketAddr,
) -> Option<String> {
    bounded(lookups, LOOKUP_BOUND, move || command_of(peer, dest)).await
}

/// Runs `lookup` on a blocking thread once a place in `places` is free, holding the place
/// until it ends; `None` when that takes longer than `bound` (the lookup then ends unawaited).
async fn bounded<F>(places: &Arc<Semaphore>, bound: Duration, lookup: F) -> Option<String>
where
    F: FnOnce() -> Option<String> + Send + 'static,
{
    let places = Arc::clone(places);
    let run = async move {
        let place = places.acquire_owned().await.ok()?;
        tokio::task::spawn_blocking(move || {
            let _place = place;
            lookup()
        })
        .await
        .ok()
        .flatten()
    };
    tokio::time::timeout(bound, run).await.ok().flatten()
}

/// The command line of the process holding the client end `peer` of a captured connection to
/// `dest` (its original destination, the socket's remote address), as `program arg1 arg2
/// arg3` (bounded, printable ASCII); `None` when it cannot be told. Each process's descriptors
/// are read once: no loop over `/proc` repeats.
fn command_of(peer: SocketAddr, dest: SocketAddr) -> Option<String> {
    let inode = match super::diag::inode(peer, dest) {
        Ok(found) => found?,
        Err(_) => {
            let table = match peer.ip() {
                IpAddr::V4(_) => "/proc/net/tcp",
                IpAddr::V6(_) => "/proc/net/tcp6",
            };
            socket_inode(&fs::read_to_string(table).ok()?, peer)?
        }
    };
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
    use std::time::Instant;

    #[tokio::test]
    async fn a_slow_lookup_is_given_up_at_the_bound_and_keeps_its_place_till_it_ends() {
        let places = Arc::new(Semaphore::new(1));
        let slow = || {
            std::thread::sleep(Duration::from_millis(400));
            Some("slow".to_owned())
        };
        let start = Instant::now();
        assert_eq!(
            bounded(&places, Duration::from_millis(50), slow).await,
            None
        );
        assert!(
            start.elapsed() < Duration::from_millis(300),
            "{:?}",
            start.elapsed()
        );
        // The abandoned lookup still holds the only place: the next one waits, then gives up.
        let quick = || Some("quick".to_owned());
        assert_eq!(
            bounded(&places, Duration::from_millis(50), quick).await,
            None
        );
        // Once it has ended the place is free again.
        let freed = bounded(&places, Duration::from_secs(5), quick).await;
        assert_eq!(freed.as_deref(), Some("quick"));
    }

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
