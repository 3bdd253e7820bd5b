//! Stopping: SIGTERM or SIGINT flips one watch, and every listener and the janitor wait on
//! it, so the process drains its connections before it exits.

use tokio::sync::watch;

/// Resolves once the stop signal is given.
pub(super) async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}

/// Waits for SIGTERM or SIGINT, then gives the stop signal (the drain begins).
pub(super) async fn signals(tx: watch::Sender<bool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutting down: draining connections");
    let _ = tx.send(true);
}
