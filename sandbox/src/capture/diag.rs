//! A captured client socket's inode by one exact `sock_diag` query (`NETLINK_SOCK_DIAG`,
//! `SOCK_DIAG_BY_FAMILY` without `NLM_F_DUMP`): the kernel finds the socket by its four-tuple
//! in its hash table and answers with one message. Reading `/proc/net/tcp{,6}` instead makes
//! the kernel walk its whole established table (shared by every namespace on the host, TIME_WAIT
//! entries included) and print it, which cost 12–24 ms per captured connection on a busy
//! machine; this costs four syscalls whatever else the host runs. Needs no privilege.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
    setsockopt, socket, sockopt,
};
use nix::sys::time::TimeVal;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h): the request's and the answer's message type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `sizeof(struct nlmsghdr)`.
const HEADER: usize = 16;
/// `sizeof(struct inet_diag_req_v2)`.
const REQUEST: usize = 56;
/// `sizeof(struct inet_diag_msg)`: the answer's body, whose last field is the inode.
const ANSWER: usize = 72;
/// How long the kernel may take to answer (it answers while handling the send; this only
/// keeps a blocking thread from waiting for ever should it not).
const RECV_TIMEOUT: Duration = Duration::from_millis(500);

/// The inode of the TCP socket whose local address is `local` and remote address `remote`,
/// in the current network namespace: `Ok(None)` when there is none (gone, in TIME_WAIT) or the
/// query failed; `Err` only when this kernel has no `sock_diag` at all (no such netlink
/// protocol), where the caller may look elsewhere.
pub(crate) fn inode(local: SocketAddr, remote: SocketAddr) -> nix::Result<Option<u64>> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    let asked = || {
        let request = request(local, remote)?;
        let timeout = TimeVal::new(0, RECV_TIMEOUT.as_micros().try_into().ok()?);
        setsockopt(&fd, sockopt::ReceiveTimeout, &timeout).ok()?;
        let kernel = NetlinkAddr::new(0, 0);
        sendto(fd.as_raw_fd(), &request, &kernel, MsgFlags::empty()).ok()?;
        let mut answer = [0u8; 512];
        let n = recv(fd.as_raw_fd(), &mut answer, MsgFlags::empty()).ok()?;
        parse(answer.get(..n)?, local, remote)
    };
    Ok(asked())
}

/// The `nlmsghdr` and `inet_diag_req_v2` asking for the one TCP socket `local` ↔ `remote`;
/// `None` when the two are not of one family.
fn request(local: SocketAddr, remote: SocketAddr) -> Option<Vec<u8>> {
    let family = match (local.ip(), remote.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => libc::AF_INET,
        (IpAddr::V6(_), IpAddr::V6(_)) => libc::AF_INET6,
        _ => return None,
    };
    let mut m = Vec::with_capacity(HEADER + REQUEST);
    m.extend_from_slice(&u32::try_from(HEADER + REQUEST).ok()?.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&u16::try_from(libc::NLM_F_REQUEST).ok()?.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    m.push(u8::try_from(family).ok()?);
    m.push(u8::try_from(libc::IPPROTO_TCP).ok()?);
    m.push(0); // no extensions asked for
    m.push(0); // padding
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // any state (ignored by an exact lookup)
    m.extend_from_slice(&sock_id(local, remote));
    Some(m)
}

/// `struct inet_diag_sockid` for `local` ↔ `remote`: ports and addresses in network order,
/// no interface, no cookie (`INET_DIAG_NOCOOKIE`, so the kernel checks none).
fn sock_id(local: SocketAddr, remote: SocketAddr) -> Vec<u8> {
    let mut id = Vec::with_capacity(48);
    id.extend_from_slice(&local.port().to_be_bytes());
    id.extend_from_slice(&remote.port().to_be_bytes());
    for ip in [local.ip(), remote.ip()] {
        let mut words = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => words[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => words.copy_from_slice(&v6.octets()),
        }
        id.extend_from_slice(&words);
    }
    id.extend_from_slice(&0u32.to_ne_bytes()); // interface
    id.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie: INET_DIAG_NOCOOKIE
    id.extend_from_slice(&u32::MAX.to_ne_bytes());
    id
}

/// The inode from the kernel's answer, if it is an `inet_diag_msg` about a socket with the
/// ports asked for (the addresses are not compared: an IPv6 socket talking IPv4 shows them
/// mapped) and the socket has one (one in TIME_WAIT has none).
fn parse(answer: &[u8], local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
    // Anything else is `NLMSG_ERROR`: no such socket (or no `sock_diag` for TCP).
    if kind != SOCK_DIAG_BY_FAMILY {
        return None;
    }
    let body = answer.get(HEADER..HEADER + ANSWER)?;
    // family, state, timer, retransmits, then the socket id: source and destination port.
    if body.get(4..8)? != sock_id(local, remote).get(..4)? {
        return None;
    }
    let inode = u32::from_ne_bytes(body.get(68..72)?.try_into().ok()?);
    (inode != 0).then_some(u64::from(inode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};
    use std::os::unix::fs::MetadataExt as _;

    /// The inode `/proc/self/fd` shows for a stream's socket.
    fn inode_of(stream: &TcpStream) -> u64 {
        let path = format!("/proc/self/fd/{}", stream.as_raw_fd());
        std::fs::metadata(path).map(|m| m.ino()).unwrap_or(0)
    }

    #[test]
    fn finds_a_connected_sockets_inode_by_its_addresses_in_either_family() {
        for ip in [
            IpAddr::from(Ipv4Addr::LOCALHOST),
            Ipv6Addr::LOCALHOST.into(),
        ] {
            let Ok(listener) = TcpListener::bind((ip, 0)) else {
                continue; // no IPv6 on this machine
            };
            let server = listener.local_addr().unwrap_or((ip, 0).into());
            let pair = TcpStream::connect(server).and_then(|c| Ok((c, listener.accept()?.0)));
            assert!(pair.is_ok(), "loopback connect: {pair:?}");
            let Ok((client, accepted)) = pair else { return };
            let local = client.local_addr().unwrap_or(server);
            let want = inode_of(&client);
            assert_ne!(want, 0);
            assert_eq!(inode(local, server), Ok(Some(want)));
            // The accepted end is another socket, found by its own addresses.
            assert_eq!(inode(server, local), Ok(Some(inode_of(&accepted))));
            // No socket with these ports: nothing, not a wrong inode.
            let elsewhere = SocketAddr::new(ip, local.port().wrapping_add(1).max(1));
            assert_eq!(inode(elsewhere, server), Ok(None));
        }
    }

    #[test]
    fn asks_nothing_across_families() {
        let v4: SocketAddr = (Ipv4Addr::LOCALHOST, 1).into();
        let v6: SocketAddr = (Ipv6Addr::LOCALHOST, 2).into();
        assert_eq!(request(v4, v6), None);
        assert_eq!(request(v4, v4).map(|r| r.len()), Some(HEADER + REQUEST));
    }
}
