//! The isolated launch, in three processes:
//!
//! - the **launcher** (the caller's process, outside): relays the Unix socket to the proxy,
//!   forwards signals to the keeper and returns the keeper's exit code;
//! - the **keeper** (forked; new user and network namespaces, old PID namespace): creates the
//!   namespaces, brings `lo` up, forks init, passes signals down and init's status up;
//! - **init** (PID 1 of the new PID namespace, in the new mount namespace): mounts a fresh
//!   `/proc`, sets capture up, becomes the command's user (see `identity`), runs the forwarder,
//!   starts the command, reaps orphans, and exits with the command's status, whereupon the
//!   kernel kills whatever is left in the namespace.
//!
//! The keeper and init die with their parent (`PR_SET_PDEATHSIG`), so a launcher killed by
//! SIGKILL takes the sandbox with it. All three are non-dumpable: the command may run as the
//! same user as init (or as the launcher), and must not read their memory or environment
//! through `/proc`.

use std::ffi::OsString;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::path::Path;

use nix::sys::prctl;
use nix::sys::signal::{Signal, kill};
use nix::unistd::{ForkResult, Pid, getpid, getppid};

use crate::capture::{self, Capture};
use crate::command::{self, Started};
use crate::env::command_env;
use crate::error::{EXIT_LAUNCHER_ERROR, SandboxError};
use crate::fork::fork_single_threaded;
use crate::identity::Identity;
use crate::loopback;
use crate::namespace::{self, IdMaps};
use crate::proxy_url::ProxyUrl;
use crate::relay;
use crate::report::{self, Failure, Writer};
use crate::signals::Signals;
use crate::supervise::{Reap, reap_blocking, supervise};
use crate::trust;

/// Everything the inside half needs, prepared before the first fork.
struct Inside<'a> {
    proxy: &'a ProxyUrl,
    program: &'a OsString,
    args: &'a [OsString],
    socket: &'a Path,
    /// The private directory (the socket's, and the resolver's files when capturing).
    dir: &'a Path,
    /// What [`capture::decide`] settled on.
    capture: Capture,
    /// Who the command runs as, and the user namespace's maps for it.
    identity: &'a Identity,
    maps: IdMaps,
    signals: &'a Signals,
    /// The CA bundle the command trusts (variables, and mounted over the system bundle).
    bundle: Option<&'a Path>,
}

/// Runs `program args...` in the sandbox and returns its exit code.
pub(crate) fn run(
    proxy: &ProxyUrl,
    program: &OsString,
    args: &[OsString],
    capture: Capture,
    bundle: Option<&Path>,
    identity: &Identity,
) -> Result<i32, SandboxError> {
    namespace::ensure_single_threaded()?;
    let maps = IdMaps::for_identity(identity).map_err(SandboxError::from)?;
    // tempfile makes the directory mode 0700: only this user (and root) reach the socket.
    // The forked halves leave through `process::exit`, so only the launcher removes it.
    let dir = tempfile::Builder::new()
        .prefix("egressgate-sandbox-")
        .tempdir()
        .map_err(|e| SandboxError::setup("creating a private directory for the relay socket", e))?;
    let socket = dir.path().join("proxy.sock");
    let listener = UnixListener::bind(&socket)
        .map_err(|e| SandboxError::setup("binding the relay socket", e))?;
    open_socket_to(identity, dir.path(), &socket)?;
    let (report, report_writer) = report::channel()?;
    let signals = Signals::hold()?;
    prctl::set_dumpable(false)
        .map_err(|e| SandboxError::setup("making the launcher non-dumpable", e))?;
    let launcher = getpid();
    let inside = Inside {
        proxy,
        program,
        args,
        socket: &socket,
        dir: dir.path(),
        capture,
        identity,
        maps,
        signals: &signals,
        bundle,
    };
    match fork_single_threaded().map_err(|e| SandboxError::setup("forking", e))? {
        ForkResult::Child => {
            drop(listener);
            drop(report);
            std::process::exit(keeper(launcher, report_writer, &inside))
        }
        ForkResult::Parent { child } => {
            drop(report_writer);
            outside(child, report, listener, proxy, &signals)
        }
    }
}

/// For a command that runs as another user than the launcher (a root launcher's `--as-user`):
/// lets that user, and no one else, connect to the relay socket, since init's relays run as
/// it. The directory becomes searchable (not listable, not writable) and the socket that
/// user's own, mode 0600; the resolver's files init writes next to it stay root's.
fn open_socket_to(identity: &Identity, dir: &Path, socket: &Path) -> Result<(), SandboxError> {
    let Identity::User(user) = identity else {
        return Ok(());
    };
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| SandboxError::setup("opening the relay socket to the command's user", e))
    };
    nix::unistd::chown(socket, Some(user.uid), Some(user.gid))
        .map_err(|e| SandboxError::setup("opening the relay socket to the command's user", e))?;
    mode(socket, 0o600)?;
    mode(dir, 0o711)
}

/// The launcher's part after the fork.
fn outside(
    keeper: Pid,
    report: report::Reader,
    listener: UnixListener,
    proxy: &ProxyUrl,
    signals: &Signals,
) -> Result<i32, SandboxError> {
    let relay = match relay::Outside::start(listener, proxy.authority().to_owned()) {
        Ok(relay) => relay,
        Err(e) => {
            let _ = kill(keeper, Signal::SIGKILL);
            reap_blocking(keeper);
            return Err(SandboxError::setup("starting the relay", e));
        }
    };
    let outcome = match report.wait() {
        Ok(()) => supervise(keeper, Reap::Child, signals).map_err(|e| {
            let _ = kill(keeper, Signal::SIGKILL);
            reap_blocking(keeper);
            SandboxError::setup("waiting for the command", e)
        }),
        Err(failure) => {
            reap_blocking(keeper);
            Err(failure.into())
        }
    };
    relay.stop();
    outcome
}

/// The keeper: makes the namespaces, then forks init and waits for it.
fn keeper(launcher: Pid, report: Writer, inside: &Inside) -> i32 {
    if let Err(failure) = enter_namespaces(launcher, &inside.maps) {
        report.fail(&failure);
        return EXIT_LAUNCHER_ERROR;
    }
    match fork_single_threaded() {
        Ok(ForkResult::Child) => std::process::exit(init(report, inside)),
        Ok(ForkResult::Parent { child }) => {
            drop(report);
            supervise(child, Reap::Child, inside.signals).unwrap_or(EXIT_LAUNCHER_ERROR)
        }
        Err(e) => {
            report.fail(&Failure::Setup(format!("forking init: {e}")));
            EXIT_LAUNCHER_ERROR
        }
    }
}

fn enter_namespaces(launcher: Pid, maps: &IdMaps) -> Result<(), Failure> {
    let fail = |what: &str, e: nix::Error| Failure::Setup(format!("{what}: {e}"));
    namespace::enter(maps)?;
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| fail("prctl(PR_SET_PDEATHSIG)", e))?;
    if getppid() != launcher {
        return Err(Failure::Setup("the launcher exited during setup".into()));
    }
    loopback::bring_up()
}

/// Sets capture up in the new namespaces when it was asked for; `None` when not,
/// or when `--capture auto` met a kernel that refuses it (after its one line on stderr).
fn set_up_capture(inside: &Inside) -> Result<Option<capture::Prepared>, Failure> {
    if inside.capture == Capture::Off {
        return Ok(None);
    }
    match capture::set_up(inside.dir) {
        Ok(prepared) => Ok(Some(prepared)),
        Err(Failure::Capture(why)) if inside.capture == Capture::Auto => {
            capture::say_off(&why);
            Ok(None)
        }
        Err(failure) => Err(failure),
    }
}

/// Init, PID 1 of the new PID namespace: setup, command, reaping.
fn init(report: Writer, inside: &Inside) -> i32 {
    let forwarder = match set_up(inside) {
        Ok(port) => port,
        Err(failure) => {
            report.fail(&failure);
            return EXIT_LAUNCHER_ERROR;
        }
    };
    let proxy_url = inside
        .proxy
        .with_authority(&format!("127.0.0.1:{forwarder}"));
    let env = command_env(std::env::vars_os(), &proxy_url, inside.bundle);
    let mask = inside.signals.original_mask();
    let started = command::start(inside.program, inside.args, env, mask);
    drop(report);
    match started {
        Started::Failed(code) => code,
        Started::Running(pid) => {
            supervise(pid, Reap::All, inside.signals).unwrap_or(EXIT_LAUNCHER_ERROR)
        }
    }
}

/// Init's setup; returns the forwarder's port. First what needs the namespace's capabilities
/// (the mounts, the ruleset, the resolver's port 53), then becoming the command's user, then
/// the relays, which thus run as that user too (and set their parent-death signal after the
/// change of user, which would clear it).
///
/// Capture is set up here rather than in the keeper because it runs tools (`nft`, `ip`): the
/// first process forked into a new PID namespace becomes its PID 1, and when that one exits
/// the namespace is done for.
fn set_up(inside: &Inside) -> Result<u16, Failure> {
    namespace::private_mounts_and_proc()?;
    let prepared = set_up_capture(inside)?;
    if let Some(bundle) = inside.bundle {
        trust::mount_over_system(bundle).map_err(Failure::Setup)?;
    }
    inside.identity.assume().map_err(Failure::Setup)?;
    let forwarder = start_forwarder(inside.socket)?;
    if let Some(prepared) = prepared {
        capture::start(prepared, inside.socket.to_owned(), inside.proxy)
            .map_err(|e| Failure::Setup(format!("starting the capture: {e}")))?;
    }
    Ok(forwarder)
}

/// Dies with the keeper, binds the forwarder on loopback and starts it; returns its port.
fn start_forwarder(socket: &Path) -> Result<u16, Failure> {
    let fail = |what: &str, e: std::io::Error| Failure::Setup(format!("{what}: {e}"));
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| fail("prctl(PR_SET_PDEATHSIG)", e.into()))?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| fail("binding the forwarder on 127.0.0.1", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| fail("reading the forwarder's port", e))?
        .port();
    relay::start_inside(listener, socket.to_owned())
        .map_err(|e| fail("starting the forwarder", e))?;
    Ok(port)
}
