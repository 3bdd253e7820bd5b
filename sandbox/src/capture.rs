//! Transparent capture: every TCP connection from inside the sandbox reaches the proxy as
//! `CONNECT name:port`, even from a client that reads no proxy settings.
//!
//! The pieces, in the order a connection meets them: `files` points name lookups at the
//! resolver, `dns` answers them from the address `pool`, `routes` makes those addresses (and
//! every other) local to the namespace, `nft` redirects TCP to them to the capture listener
//! and port 53 to the resolver and rejects the rest, and `redirect` turns each captured
//! connection back into a name and asks the proxy for it. Nothing of it opens a way out: the
//! namespace's only interface is `lo`, so a command that deletes the ruleset (only one that is
//! root in its user namespace may: `--as-user root`) is left with no network at all. Wherever
//! init is not uid 0 of the namespace (an unprivileged launcher, or a root launcher's
//! unprivileged `--as-user`), `ambient` lends the tools the capability they need and takes it
//! back before the command starts, which then cannot touch the ruleset at all.

mod ambient;
mod diag;
mod dns;
mod files;
mod nft;
mod owner;
mod pool;
mod redirect;
mod routes;
mod tool;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::SandboxError;
use crate::proxy_url::ProxyUrl;
use crate::report::Failure;

/// Pause after a failed accept or receive (e.g. out of file descriptors), so a loop that
/// must not end does not spin either.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// `--capture`: whether connections that ignore the proxy settings are captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Capture {
    /// Capture, or fail (exit 122) where it cannot be done. The default.
    #[default]
    On,
    /// Only the proxy variables and the forwarder: a client that ignores them has no network.
    Off,
    /// Capture where it can be done, else say so in one line on stderr and run as `off`.
    Auto,
}

impl std::str::FromStr for Capture {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            _ => Err(format!("--capture must be on, off or auto, not {s:?}")),
        }
    }
}

/// Decides, before anything starts, what this launch tries: `Off` (asked for, or `auto`
/// where capture is impossible, after its one line on stderr), `On` (capture or fail),
/// `Auto` (capture, falling back to off should the kernel refuse the ruleset). `Err` for `on`
/// where capture is impossible.
pub(crate) fn decide(mode: Capture, proxy: &ProxyUrl) -> Result<Capture, SandboxError> {
    if mode == Capture::Off {
        return Ok(Capture::Off);
    }
    match impossible(proxy) {
        None => Ok(mode),
        Some(why) if mode == Capture::Auto => {
            say_off(&why);
            Ok(Capture::Off)
        }
        Some(why) => Err(SandboxError::CaptureUnavailable(why)),
    }
}

/// `--capture auto`'s one line when it runs without capture.
pub(crate) fn say_off(why: &str) {
    eprintln!("egressgate sandbox: --capture auto: running without capture: {why}");
}

/// Why capture cannot work here, as far as can be told before the namespaces exist.
fn impossible(proxy: &ProxyUrl) -> Option<String> {
    if !proxy.is_plain_http() {
        return Some("it speaks plain HTTP to the proxy, so it needs an http:// proxy URL".into());
    }
    ["nft", "ip"]
        .into_iter()
        .find(|tool| tool::find(tool).is_none())
        .map(|tool| format!("{tool} is not installed"))
}

/// What the capture holds between setting the namespace up and starting to serve.
pub(crate) struct Prepared {
    capture_v4: TcpListener,
    capture_v6: TcpListener,
    dns: dns::Listeners,
}

/// Sets up capture in the current (new) network and mount namespaces: binds the listeners,
/// loads the ruleset, adds the routes, mounts the resolver's files (written into `dir`).
///
/// A [`Failure::Capture`] means the kernel would not do it and nothing was changed yet; any
/// later failure is a [`Failure::Setup`].
pub(crate) fn set_up(dir: &Path) -> Result<Prepared, Failure> {
    let cannot = |what: &str, e: String| Failure::Capture(format!("{what}: {e}"));
    let capture_v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| cannot("binding the capture listener on 127.0.0.1", e.to_string()))?;
    let capture_v6 = TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).map_err(|e| {
        cannot(
            "binding the capture listener on [::1] (no IPv6?)",
            e.to_string(),
        )
    })?;
    let dns_addrs = [
        SocketAddr::from((Ipv4Addr::LOCALHOST, 53)),
        SocketAddr::from((Ipv6Addr::LOCALHOST, 53)),
    ];
    let dns = dns::Listeners::bind(&dns_addrs)
        .map_err(|e| cannot("binding the resolver on port 53", e.to_string()))?;
    let port = |l: &TcpListener| l.local_addr().map(|a| a.port());
    let ports = nft::Ports {
        capture_v4: port(&capture_v4).map_err(|e| cannot("reading a port", e.to_string()))?,
        capture_v6: port(&capture_v6).map_err(|e| cannot("reading a port", e.to_string()))?,
        dns: 53,
    };
    // `exec` keeps capabilities only for the namespace's uid 0; anyone else's tools borrow.
    let lend = !nix::unistd::geteuid().is_root();
    if lend {
        ambient::lend_net_admin()
            .map_err(|e| cannot("lending CAP_NET_ADMIN to nft and ip", e.to_string()))?;
    }
    let loaded = nft::apply(ports).map_err(|e| cannot("loading the nftables ruleset", e));
    let routed = loaded.and_then(|()| {
        routes::add().map_err(|e| Failure::Setup(format!("routing the address pool: {e}")))
    });
    if lend {
        ambient::take_back()
            .map_err(|e| Failure::Setup(format!("taking CAP_NET_ADMIN back: {e}")))?;
    }
    routed?;
    let setup = |what: &str, e: String| Failure::Setup(format!("{what}: {e}"));
    files::mount_all(dir).map_err(|e| setup("mounting the resolver's files", e))?;
    Ok(Prepared {
        capture_v4,
        capture_v6,
        dns,
    })
}

/// Starts the resolver and the capture listeners on a thread of their own; they run until
/// the process exits. Connections go to the proxy through the Unix socket at `socket`.
pub(crate) fn start(prepared: Prepared, socket: PathBuf, proxy: &ProxyUrl) -> std::io::Result<()> {
    let pool = Arc::new(Mutex::new(pool::Pool::default()));
    let redirect = Arc::new(redirect::Redirect {
        pool: Arc::clone(&pool),
        socket,
        authorization: proxy.basic_authorization(),
        lookups: owner::lookups(),
    });
    let Prepared {
        capture_v4,
        capture_v6,
        dns,
    } = prepared;
    for listener in [&capture_v4, &capture_v6] {
        listener.set_nonblocking(true)?;
    }
    for socket in &dns.udp {
        socket.set_nonblocking(true)?;
    }
    for listener in &dns.tcp {
        listener.set_nonblocking(true)?;
    }
    crate::relay::spawn_runtime_thread("sandbox-capture", async move {
        let v4 = tokio::net::TcpListener::from_std(capture_v4)?;
        let v6 = tokio::net::TcpListener::from_std(capture_v6)?;
        tokio::spawn(redirect::serve(
            v4,
            redirect::Family::V4,
            Arc::clone(&redirect),
        ));
        tokio::spawn(redirect::serve(v6, redirect::Family::V6, redirect));
        for socket in dns.udp {
            let socket = tokio::net::UdpSocket::from_std(socket)?;
            tokio::spawn(dns::serve_udp(socket, Arc::clone(&pool)));
        }
        for listener in dns.tcp {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tokio::spawn(dns::serve_tcp(listener, Arc::clone(&pool)));
        }
        std::future::pending::<()>().await;
        Ok(())
    })
    .map(drop)
}
