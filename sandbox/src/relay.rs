//! The two byte relays that carry the command's proxy connections across the namespace
//! boundary: inside, `127.0.0.1:<port>` → the Unix socket; outside, the Unix socket → the
//! proxy. A path-bound Unix socket is reachable from any network namespace, so it is the one
//! door out of the sandbox, and it only ever leads to the proxy.
//!
//! Each relay is a thread running a current-thread tokio runtime. Neither looks at the bytes:
//! plain HTTP, CONNECT tunnels and TLS to an `https://` proxy all pass unchanged.

use std::io;
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::oneshot;

/// How long dialling the next hop may take before the connection is dropped.
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed accept (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The outside relay, running until [`Outside::stop`].
pub(crate) struct Outside {
    stop: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

impl Outside {
    /// Starts relaying each connection on `listener` to the proxy at `proxy` (`HOST:PORT`,
    /// resolved per connection).
    pub(crate) fn start(
        listener: std::os::unix::net::UnixListener,
        proxy: String,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = spawn_runtime_thread("sandbox-relay", async move {
            let listener = UnixListener::from_std(listener)?;
            tokio::select! {
                _ = stopped => Ok(()),
                () = serve_outside(listener, proxy) => Ok(()),
            }
        })?;
        Ok(Self { stop, thread })
    }

    /// Stops accepting, drops every open relay and waits for the thread.
    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Starts the inside forwarder: each connection on `listener` is relayed to the Unix socket
/// at `socket`. It runs until the process exits.
pub(crate) fn start_inside(listener: std::net::TcpListener, socket: PathBuf) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    spawn_runtime_thread("sandbox-forwarder", async move {
        serve_inside(TcpListener::from_std(listener)?, socket).await;
        Ok(())
    })
    .map(drop)
}

async fn serve_outside(listener: UnixListener, proxy: String) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(splice(stream, dial_tcp(proxy.clone())));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

async fn serve_inside(listener: TcpListener, socket: PathBuf) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(splice(stream, UnixStream::connect(socket.clone())));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

async fn dial_tcp(address: String) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Dials the next hop and copies both ways until both sides have closed. A failed dial
/// closes `accepted`: the client sees the connection drop, as if the proxy had refused it.
async fn splice<A, B>(mut accepted: A, dial: impl Future<Output = io::Result<B>>)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    if let Ok(Ok(mut next)) = tokio::time::timeout(DIAL_TIMEOUT, dial).await {
        let _ = copy_bidirectional(&mut accepted, &mut next).await;
    }
}

/// Runs `task` on a fresh current-thread runtime in a new thread; the runtime (and every
/// relay spawned on it) is dropped when `task` ends.
pub(crate) fn spawn_runtime_thread<F>(name: &str, task: F) -> io::Result<JoinHandle<()>>
where
    F: Future<Output = io::Result<()>> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            // A listener that cannot join the runtime leaves the relay closed; the command
            // then sees its proxy connections refused, which fails closed.
            let _ = runtime.block_on(task);
        })
}
