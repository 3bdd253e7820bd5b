//! Lends `CAP_NET_ADMIN` to the tools the capture runs (`nft`, `ip`) when init is not uid 0 of
//! the sandbox's user namespace (an unprivileged launcher, or a root launcher whose namespace
//! maps only the command's unprivileged user), and takes it back before the command starts.
//!
//! Inside its new user namespace the launcher holds every capability, but `exec` keeps them
//! only for the namespace's uid 0: a tool started by anyone else would lose the one it needs
//! to load the ruleset. An *ambient* capability survives `exec` for any uid. It is
//! raised just for the setup and cleared (ambient and inheritable sets both) before the
//! command is spawned, so the command runs with no capability at all and cannot remove the
//! ruleset. The kernel offers no other way (nix does not wrap `capset` or the ambient
//! `prctl`), hence the crate's second and third `unsafe` blocks, each with its `// SAFETY:`.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;
/// `CAP_NET_ADMIN` (include/uapi/linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`, one per 32 capabilities.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Reads this thread's capability sets, lets `change` edit them, writes them back.
fn edit_sets(change: impl FnOnce(&mut [Data; 2])) -> io::Result<()> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget(2) with a version-3 header writes exactly two `Data` structs through the
    // second pointer; both pointers are to live, properly aligned `#[repr(C)]` locals that
    // outlive the call.
    #[allow(unsafe_code)]
    let read = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    if read != 0 {
        return Err(io::Error::last_os_error());
    }
    change(&mut data);
    // SAFETY: capset(2) reads one header and two `Data` structs from live locals as above;
    // it changes only this thread's credentials.
    #[allow(unsafe_code)]
    let written =
        unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if written != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `prctl(PR_CAP_AMBIENT, op, cap, 0, 0)`.
fn ambient(op: libc::c_int, cap: u32) -> io::Result<()> {
    let zero: libc::c_ulong = 0;
    // SAFETY: this prctl takes only integer arguments and changes only this thread's
    // ambient capability set; it touches no memory of ours.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            op as libc::c_ulong,
            libc::c_ulong::from(cap),
            zero,
            zero,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `CAP_NET_ADMIN` inheritable and ambient, so the tools spawned next keep it.
pub(crate) fn lend_net_admin() -> io::Result<()> {
    edit_sets(|data| data[0].inheritable |= 1 << CAP_NET_ADMIN)?;
    ambient(libc::PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN)
}

/// Clears the ambient and inheritable sets: nothing spawned after this keeps a capability
/// across `exec` unless it runs as uid 0.
pub(crate) fn take_back() -> io::Result<()> {
    ambient(libc::PR_CAP_AMBIENT_CLEAR_ALL, 0)?;
    edit_sets(|data| {
        for word in data.iter_mut() {
            word.inheritable = 0;
        }
    })
}
