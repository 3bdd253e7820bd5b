//! `egressgate serve|proxy|control`: bind the listeners, load the deployment CA, start the
//! planes (and the janitor with the control plane), and drain on a signal.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_control::AppState;
use egressgate_store::blob::{BlobStore, DbBlobStore, DirBlobStore};
use egressgate_store::{Backend, Store, Timestamp};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::database::{Create, open_migrated};
use super::endpoints::{health_router, metrics_router};
use super::shutdown::{signals, stopped};
use super::{init_logging, janitor, load};
use crate::config::{Database, RawConfig};
use crate::selfaddr;

/// `egressgate serve|proxy|control`: the planes this process runs, on its listeners, until a
/// signal stops it and its connections drain.
pub(super) async fn run(raw: RawConfig, with_proxy: bool, with_control: bool) -> Result<()> {
    let mut cfg = load(raw)?;
    init_logging(cfg.log_format);
    if with_control && !with_proxy && !cfg.proxy_public_url_given {
        bail!("`egressgate control` needs --proxy-public-url (the proxy address turns should use)");
    }
    let store = open_migrated(&cfg, Create::Yes).await?;
    let proxy_listener = if with_proxy {
        Some(bind("proxy", cfg.listen.proxy).await?)
    } else {
        None
    };
    let control_listener = if with_control {
        Some(bind("control", cfg.listen.control).await?)
    } else {
        None
    };
    let metrics_listener = match (with_control, cfg.listen.metrics) {
        (false, Some(a)) => Some(bind("metrics", a).await?),
        _ => None,
    };
    // The gate never dials itself, its control plane or its database, even inside an
    // allowed range.
    let mut forbidden = match &cfg.database {
        Database::Url(u) => selfaddr::database_addrs(u),
        Database::Sqlite => Vec::new(),
    };
    forbidden.extend(cfg.control_addrs.iter().copied());
    forbidden.extend(
        proxy_listener
            .iter()
            .chain(&control_listener)
            .chain(&metrics_listener)
            .filter_map(|l| l.local_addr().ok()),
    );
    forbidden.push(cfg.listen.proxy);
    forbidden.push(cfg.listen.control);
    cfg.proxy.forbidden_addrs = forbidden;
    if let (Some(l), false) = (&proxy_listener, cfg.proxy_public_url_given) {
        cfg.control.proxy_public_url = l.local_addr()?.to_string();
    }
    if let (Some(l), false) = (&control_listener, cfg.control_public_url_given) {
        cfg.control.control_public_url = format!("http://{}", l.local_addr()?);
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(signals(stop_tx));
    let mut registry = Registry::default();
    let mut tasks = tokio::task::JoinSet::new();

    // Every process of the deployment mints under, and serves, the one CA.
    super::ca::start(&mut cfg, &store, proxy_listener.is_some()).await?;

    if let Some(listener) = proxy_listener {
        let proxy = egressgate_proxy::Proxy::new(cfg.proxy.clone(), store.clone(), &mut registry)
            .context("cannot set up TLS inspection")?;
        tracing::info!(addr = %listener.local_addr()?, "proxy listening");
        let stop = stopped(stop_rx.clone());
        tasks.spawn(async move { proxy.serve(listener, stop).await.context("proxy") });
    }
    let control_metrics = control_listener
        .is_some()
        .then(|| egressgate_control::metrics::ControlMetrics::new(&mut registry));
    let webhook_metrics = egressgate_control::notify::outbox::OutboxMetrics::new(&mut registry);
    let registry = Arc::new(registry);
    let blobs: Arc<dyn BlobStore> = match store.backend() {
        Backend::Sqlite => Arc::new(
            DirBlobStore::new(cfg.data_dir.join("blobs"))
                .context("cannot create the blob directory")?,
        ),
        Backend::Postgres => Arc::new(DbBlobStore::new(store.clone())),
    };
    if let Some(listener) = control_listener {
        let tokens = crate::tokens::load(&store, &cfg.data_dir, true, cfg.log_format).await?;
        let mut settings = cfg.control.clone();
        if settings.mcp_state_key.is_none() {
            settings.mcp_state_key = Some(mcp_state_key(&store).await?);
        }
        settings.webhooks.seal = Some(webhook_seal(&store, cfg.ca.seal.clone()).await?);
        let egress: Arc<dyn egressgate_control::notify::Egress> = Arc::new(
            super::webhook_egress::WebhookEgress::new(&cfg.proxy)
                .context("cannot set up TLS for webhook deliveries")?,
        );
        settings.webhooks.egress = Some(egress.clone());
        if settings.slack.posts() {
            let slack = egressgate_control::notify::slack::SlackChannel::new(
                settings.slack.clone(),
                egress,
                store.clone(),
                &settings,
            );
            settings.webhooks.channels.push(Arc::new(slack));
        }
        let webhooks = settings.webhooks.clone();
        let state = AppState {
            store: store.clone(),
            settings: Arc::new(settings),
            tokens: Arc::new(tokens),
            blobs: blobs.clone(),
        };
        let cards = control_metrics.clone().map(|m| (m, store.clone()));
        let app = match control_metrics {
            Some(m) => egressgate_control::app_with_metrics(state, m),
            None => egressgate_control::app(state),
        }
        .merge(metrics_router(registry.clone(), cards));
        tracing::info!(addr = %listener.local_addr()?, "control plane listening");
        let stop = stopped(stop_rx.clone());
        // The peer address keys the resume attempt limits.
        let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        tasks.spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
                .context("control plane")
        });
        let outbox = egressgate_control::notify::outbox::run(
            store.clone(),
            webhooks,
            webhook_metrics,
            stopped(stop_rx.clone()),
        );
        tasks.spawn(async move {
            outbox.await;
            Ok(())
        });
        tasks.spawn(janitor::run(
            store.clone(),
            blobs,
            cfg.control.snapshot_retention,
            cfg.control.interrupt_retention,
            stop_rx.clone(),
        ));
    }
    if let Some(listener) = metrics_listener {
        let app = metrics_router(registry.clone(), None).merge(health_router(store.clone()));
        let stop = stopped(stop_rx.clone());
        tasks.spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
                .context("metrics")
        });
    }
    while let Some(done) = tasks.join_next().await {
        // A plane that fails ends the process (the others are dropped with the runtime).
        done.map_err(|e| anyhow!("task failed: {e}"))??;
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

async fn bind(what: &str, addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({what})"))
}

/// The deployment's MCP requestState key: generated on first start and kept in the
/// database, so every control process of a deployment seals and opens the same states.
async fn mcp_state_key(store: &Store) -> Result<egressgate_control::settings::StateKey> {
    let key = store
        .deployment_key("mcp-state", random_key, Timestamp::now())
        .await
        .context("cannot read or store the MCP state key")?;
    Ok(egressgate_control::settings::StateKey(key))
}

/// The key webhook signing secrets (and kept resume links) are sealed with: the operator's
/// seal key when given (then whoever reads the database alone cannot sign), else one
/// generated on first start and kept in the database, like the MCP state key.
async fn webhook_seal(
    store: &Store,
    operator: Option<egressgate_store::ca::SealKey>,
) -> Result<egressgate_store::ca::SealKey> {
    if let Some(key) = operator {
        return Ok(key);
    }
    let fresh = || {
        let mut key = vec![0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
        key
    };
    let key = store
        .deployment_key("webhook-seal", fresh, Timestamp::now())
        .await
        .context("cannot read or store the webhook seal key")?;
    egressgate_store::ca::SealKey::from_bytes(&key)
        .ok_or_else(|| anyhow!("the stored webhook seal key is not 32 bytes"))
}

fn random_key() -> Vec<u8> {
    egressgate_store::Secret::generate()
        .expose()
        .as_bytes()
        .to_vec()
}
