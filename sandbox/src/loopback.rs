//! Brings up `lo`, the only interface of a new network namespace, with one rtnetlink request.
//!
//! Netlink keeps this in safe code (the `SIOCSIFFLAGS` ioctl would need `unsafe` and a C
//! struct). The kernel gives loopback interface index 1 in every network namespace.

use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use crate::report::Failure;

const RTM_NEWLINK: u16 = 16;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_ERROR: u16 = 2;
const IFF_UP: u32 = 0x1;
const LOOPBACK_IFINDEX: i32 = 1;
/// `nlmsghdr` (16 bytes) followed by `ifinfomsg` (16 bytes).
const REQUEST_LEN: usize = 32;

/// Sets `IFF_UP` on `lo` in the current network namespace.
pub(crate) fn bring_up() -> Result<(), Failure> {
    let fail = |step: &str, e: Errno| Failure::Isolation(format!("bringing up lo: {step}: {e}"));
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| fail("netlink socket", e))?;
    sendto(
        fd.as_raw_fd(),
        &request(),
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| fail("sending the request", e))?;
    let mut answer = [0u8; 1024];
    let len = recv(fd.as_raw_fd(), &mut answer, MsgFlags::empty())
        .map_err(|e| fail("reading the answer", e))?;
    match ack_errno(answer.get(..len).unwrap_or_default()) {
        Some(0) => Ok(()),
        Some(negative) => Err(fail("the kernel refused", Errno::from_raw(-negative))),
        None => Err(fail("reading the answer", Errno::EPROTO)),
    }
}

/// `RTM_NEWLINK` for interface 1 with `IFF_UP` set, asking for an acknowledgement.
fn request() -> [u8; REQUEST_LEN] {
    let mut msg = [0u8; REQUEST_LEN];
    // nlmsghdr: length, type, flags, sequence number, port id (0: the kernel).
    msg[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    msg[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // ifinfomsg: family AF_UNSPEC and padding (bytes 16, 17), device type (18..20) left 0,
    // interface index, flags, and the mask of flags to change.
    msg[20..24].copy_from_slice(&LOOPBACK_IFINDEX.to_ne_bytes());
    msg[24..28].copy_from_slice(&IFF_UP.to_ne_bytes());
    msg[28..32].copy_from_slice(&IFF_UP.to_ne_bytes());
    msg
}

/// The `error` field of an `NLMSG_ERROR` answer (0 is the acknowledgement), if it is one.
fn ack_errno(answer: &[u8]) -> Option<i32> {
    let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
    if kind != NLMSG_ERROR {
        return None;
    }
    Some(i32::from_ne_bytes(answer.get(16..20)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_a_newlink_for_interface_one_setting_up() {
        let msg = request();
        assert_eq!(u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]), 32);
        assert_eq!(u16::from_ne_bytes([msg[4], msg[5]]), RTM_NEWLINK);
        assert_eq!(i32::from_ne_bytes([msg[20], msg[21], msg[22], msg[23]]), 1);
        assert_eq!(
            u32::from_ne_bytes([msg[24], msg[25], msg[26], msg[27]]),
            IFF_UP
        );
        assert_eq!(
            u32::from_ne_bytes([msg[28], msg[29], msg[30], msg[31]]),
            IFF_UP
        );
    }

    #[test]
    fn reads_the_acknowledgement_and_errors() {
        let mut answer = [0u8; 36];
        answer[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(ack_errno(&answer), Some(0));
        answer[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(ack_errno(&answer), Some(-1));
        answer[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
        assert_eq!(ack_errno(&answer), None);
        assert_eq!(ack_errno(&answer[..3]), None);
    }
}
