//! Accepting connections: optional TLS, a global connection cap, HTTP/1.1 with header-size
//! and header-time limits, upgrades for CONNECT, and a graceful drain on shutdown.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use egressgate_store::Store;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::dial::Dialer;
use crate::handler;
use crate::identify::TurnCache;
use crate::metrics::Metrics;
use crate::recorder::Recorder;
use crate::settings::Settings;
use crate::shared::{ClientConn, ConnGuard, Shared};

/// The data plane, ready to serve on a listener.
pub struct Proxy {
    shared: Arc<Shared>,
    drain_tx: watch::Sender<bool>,
}

impl Proxy {
    /// Builds the proxy; must run inside a tokio runtime (it starts the recorder task). Fails
    /// only when the deployment CA or the upstream roots cannot make a TLS configuration.
    pub fn new(
        settings: Settings,
        store: Store,
        registry: &mut Registry,
    ) -> Result<Self, crate::inspect::InspectError> {
        let (drain_tx, draining) = watch::channel(false);
        let dialer = Dialer::new(
            settings.resolve.clone(),
            settings.allow_cidrs.clone(),
            settings.forbidden_addrs.clone(),
            &settings.dns_servers,
            settings.connect_timeout,
        );
        let inspection = crate::inspect::Inspection::new(
            settings.inspect.clone(),
            settings.ca.clone(),
            settings.upstream_roots.clone(),
        )?;
        let metrics = Metrics::new(registry);
        metrics
            .connections_limit
            .set(i64::try_from(settings.max_connections).unwrap_or(i64::MAX));
        if let Some(ca) = &settings.ca {
            metrics
                .ca_expiry_timestamp_seconds
                .set(ca.not_after().millis() / 1000);
        }
        let active = Arc::new(crate::shared::Active {
            gauge: metrics.connections.clone(),
            ..Default::default()
        });
        let shared = Arc::new(Shared {
            inspection,
            recorder: Recorder::spawn(store.clone(), settings.max_refusals_per_turn),
            turns: TurnCache::new(store.clone()),
            metrics,
            pool: Arc::default(),
            tunnel_pool: crate::pool::Pool::default(),
            epoch: Default::default(),
            registry: Arc::default(),
            log: Arc::new(crate::decision_log::DecisionLog::new(settings.log_allowed)),
            active,
            wheel_reads: crate::registry::reads::WheelReads::default(),
            dialer,
            store,
            settings,
            draining,
        });
        tokio::spawn(crate::epoch_watch::watch_epoch(Arc::downgrade(&shared)));
        if let Some(home) = shared.settings.ca_home.clone() {
            tokio::spawn(watch_ca(Arc::downgrade(&shared), home));
        }
        Ok(Self { shared, drain_tx })
    }

    /// Accepts connections until `shutdown` resolves, then stops accepting, lets keep-alive
    /// connections finish their request and tunnels run up to the drain timeout, and returns.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => self.spawn_connection(stream),
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                () = &mut shutdown => break,
            }
        }
        drop(listener);
        let _ = self.drain_tx.send(true);
        let wait_idle = async {
            let active = &self.shared.active;
            while active.count.load(Ordering::Acquire) > 0 {
                let notified = active.idle.notified();
                if active.count.load(Ordering::Acquire) == 0 {
                    break;
                }
                notified.await;
            }
        };
        tokio::pin!(wait_idle);
        let drain = self.shared.settings.drain_timeout;
        if tokio::time::timeout(drain, &mut wait_idle).await.is_err() {
            // Tunnels and connections still open ran out of drain time: each is stopped
            // through its revocation registration (one pass here, no timer in each).
            let stopped = self.shared.registry.stop_all();
            tracing::info!(
                stopped,
                "drain timeout: closing open tunnels and connections"
            );
            let grace = std::time::Duration::from_secs(1);
            if tokio::time::timeout(grace, wait_idle).await.is_err() {
                tracing::warn!(
                    open = self.shared.active.count.load(Ordering::Acquire),
                    "drain deadline passed; closing the rest"
                );
            }
        }
        Ok(())
    }

    fn spawn_connection(&self, stream: TcpStream) {
        let shared = self.shared.clone();
        let (guard, prev) = ConnGuard::new(&shared.active);
        if prev >= shared.settings.max_connections {
            shared.failed(crate::decision_log::Line {
                reason: Some("too_many_connections"),
                ..crate::decision_log::Line::new(
                    crate::decision_log::Verdict::Fail,
                    429,
                    "connection",
                    std::time::Instant::now(),
                )
            });
            tokio::spawn(async move {
                let _guard = guard;
                let mut stream = stream;
                let _ = stream
                    .write_all(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
            return;
        }
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _guard = guard;
            match shared.settings.tls.clone() {
                None => serve_http(shared, stream).await,
                Some(cfg) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                    let hs = tokio::time::timeout(
                        shared.settings.header_read_timeout,
                        acceptor.accept(stream),
                    )
                    .await;
                    match hs {
                        Ok(Ok(tls)) => serve_http(shared, tls).await,
                        _ => tracing::debug!("proxy TLS handshake failed or timed out"),
                    }
                }
            }
        });
    }
}

/// Re-reads the deployment CA every `ca_poll`, so `egressgate ca rotate` reaches this proxy
/// without a restart (a failed read keeps the CA in use and says so once).
async fn watch_ca(shared: std::sync::Weak<Shared>, home: egressgate_store::ca::CaHome) {
    let mut healthy = true;
    loop {
        let Some(s) = shared.upgrade() else { return };
        let poll = s.settings.ca_poll;
        let read = egressgate_store::ca::DeploymentCa::load_or_create(
            &home,
            egressgate_store::Timestamp::now(),
        )
        .await;
        match read
            .map_err(crate::inspect::InspectError::from)
            .and_then(|ca| {
                let ends = ca.not_after().millis() / 1000;
                let changed = s.inspection.adopt(ca)?;
                s.metrics.ca_expiry_timestamp_seconds.set(ends);
                Ok(changed)
            }) {
            Ok(changed) => {
                if changed {
                    tracing::info!("deployment CA changed; minting under the new one");
                }
                healthy = true;
            }
            Err(e) => {
                if healthy {
                    tracing::warn!(error = %e, "cannot re-read the deployment CA; keeping the one in use");
                }
                healthy = false;
            }
        }
        drop(s);
        tokio::time::sleep(poll).await;
    }
}

/// How long a stopped connection waits for the handler's answer to the request in flight
/// (a store read or two) before it closes anyway.
const IN_FLIGHT_ANSWER: std::time::Duration = std::time::Duration::from_secs(5);

async fn serve_http<S>(shared: Arc<Shared>, io: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut draining = shared.draining.clone();
    let svc_shared = shared.clone();
    let client = Arc::new(ClientConn::default());
    let revoked = client.watch.stop.stopped();
    let svc_client = client.clone();
    let service = service_fn(move |req| {
        let shared = svc_shared.clone();
        let client = svc_client.clone();
        async move {
            let _heading = client.heading();
            Ok::<_, std::convert::Infallible>(handler::handle(shared, client.clone(), req).await)
        }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.settings.header_read_timeout)
        .max_buf_size(shared.settings.max_header_bytes)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => log_conn_end(r),
        // A grant a forwarded request relied on was revoked: close the connection now (an
        // upgraded tunnel has its own registration and lives on its own task). A request
        // still in the handler is answered first, as its retry would be (see `in_flight`);
        // a response already streaming is cut.
        () = revoked => {
            if client.is_heading() {
                conn.as_mut().graceful_shutdown();
                if tokio::time::timeout(IN_FLIGHT_ANSWER, conn.as_mut()).await.is_err() {
                    tracing::debug!("no answer to the request in flight in time; closing");
                }
            }
            tracing::debug!("client connection closed by a revocation");
        }
        _ = async { draining.wait_for(|d| *d).await.map(|_| ()) } => {
            conn.as_mut().graceful_shutdown();
            log_conn_end(conn.await);
        }
    }
}

fn log_conn_end(r: Result<(), hyper::Error>) {
    if let Err(e) = r {
        tracing::debug!(error = %e, "client connection ended with an error");
    }
}
