//! Running the subcommands: open and migrate the store, bind listeners, start the planes,
//! the janitor and the signal handler, and drain on shutdown.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use egressgate_control::AppState;
use egressgate_store::blob::{BlobStore, DbBlobStore, DirBlobStore};
use egressgate_store::db::admin::{AdminList, SiteRules};
use egressgate_store::{Backend, PackageSpec, SitePattern, Store, Timestamp};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cli::{AdminListCmd, AdminOp, CaCmd, Command, RawConfig, TokenOp};
use crate::config::{self, Config, Database};
use crate::selfaddr;

/// Runs a non-sandbox subcommand to completion.
pub async fn run(command: Command) -> Result<()> {
    match command {
        Command::Serve(raw) => serve(raw, true, true).await,
        Command::Proxy(raw) => serve(raw, true, false).await,
        Command::Control(raw) => serve(raw, false, true).await,
        Command::Migrate(raw) => {
            let cfg = load(raw)?;
            let store = open(&cfg, Create::Yes).await?;
            store.migrate().await.context("migration failed")?;
            Ok(())
        }
        Command::Admin { list } => admin(list).await,
        Command::Ca {
            action: CaCmd::Print(raw),
        } => ca_print(raw).await,
        Command::Ca {
            action: CaCmd::Rotate { overlap, db },
        } => ca_rotate(db, &overlap).await,
        Command::Mcp(args) => mcp(args).await,
        Command::Sandbox { .. } => bail!("internal: sandbox is dispatched before the runtime"),
    }
}

fn load(raw: RawConfig) -> Result<Config> {
    config::validate(&config::merge(raw)?)
}

/// Installs the log subscriber, writing through [`crate::logwriter`] (a worker's lines are
/// written together when it goes idle).
fn init_logging(format: config::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EGRESSGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,hyper=warn"));
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::logwriter::Stderr);
    let _ = match format {
        config::LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        config::LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

/// Whether opening the embedded database may create it: only `serve`, `proxy`, `control` and
/// `migrate` may; `admin` run in the wrong directory must not report success on an empty one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Create {
    Yes,
    No,
}

/// The embedded database's file inside the data directory.
const SQLITE_FILE: &str = "egressgate.db";

/// Opens the configured store, creating the data directory (0700) for SQLite when allowed.
async fn open(cfg: &Config, create: Create) -> Result<Store> {
    match &cfg.database {
        Database::Sqlite => {
            let dir = &cfg.data_dir;
            let file = dir.join(SQLITE_FILE);
            if create == Create::Yes {
                create_private_dir(dir)?;
            } else if !file.exists() {
                bail!(
                    "no egressgate database in {} (no {SQLITE_FILE}): run this where `egressgate \
                     serve` keeps its data, or pass --data-dir or --database-url \
                     (`egressgate migrate --data-dir DIR` creates one)",
                    dir.display()
                );
            }
            // Say "permission denied" when that is the reason, not SQLite's "unable to open".
            std::fs::read_dir(dir)
                .with_context(|| format!("cannot read data directory {}", dir.display()))?;
            match Store::open_sqlite(dir, &cfg.pool).await {
                Ok(s) => Ok(s),
                Err(e) => {
                    let probe = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(create == Create::Yes)
                        .truncate(false)
                        .open(&file);
                    match probe {
                        Err(io) => Err(io).with_context(|| {
                            format!("cannot open the database {}", file.display())
                        }),
                        Ok(_) => Err(e).with_context(|| {
                            format!("cannot open the database in {}", dir.display())
                        }),
                    }
                }
            }
        }
        Database::Url(u) => Store::open_url(u, &cfg.pool)
            .await
            .with_context(|| format!("cannot reach the database at {}", config::redact(u))),
    }
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create data directory {}", dir.display()))
}

async fn bind(what: &str, addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({what})"))
}

async fn serve(raw: RawConfig, with_proxy: bool, with_control: bool) -> Result<()> {
    let mut cfg = load(raw)?;
    init_logging(cfg.log_format);
    if with_control && !with_proxy && !cfg.proxy_public_url_given {
        bail!("`egressgate control` needs --proxy-public-url (the proxy address turns should use)");
    }
    let store = open(&cfg, Create::Yes).await?;
    store.migrate().await.context("migration failed")?;
    let proxy_listener = if with_proxy {
        Some(bind("proxy", cfg.proxy_listen).await?)
    } else {
        None
    };
    let control_listener = if with_control {
        Some(bind("control", cfg.control_listen).await?)
    } else {
        None
    };
    let metrics_listener = match (with_control, cfg.metrics_listen) {
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
    forbidden.push(cfg.proxy_listen);
    forbidden.push(cfg.control_listen);
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
    crate::ca::start(&mut cfg, &store, proxy_listener.is_some()).await?;

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
    let registry = Arc::new(registry);
    let blobs: Arc<dyn BlobStore> = match store.backend() {
        Backend::Sqlite => Arc::new(
            DirBlobStore::new(cfg.data_dir.join("blobs"))
                .context("cannot create the blob directory")?,
        ),
        Backend::Postgres => Arc::new(DbBlobStore::new(store.clone())),
    };
    if let Some(listener) = control_listener {
        let tokens = crate::tokens::load(&store, &cfg.data_dir, true).await?;
        let mut settings = cfg.control.clone();
        if settings.mcp_state_key.is_none() {
            settings.mcp_state_key = Some(mcp_state_key(&store).await?);
        }
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
        tasks.spawn(janitor(
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

/// `egressgate ca print`: the CA certificate on stdout (the CA is made first if there is none).
async fn ca_print(raw: RawConfig) -> Result<()> {
    let cfg = load(raw)?;
    let store = open(&cfg, Create::Yes).await?;
    store.migrate().await.context("migration failed")?;
    crate::ca::print(&cfg, &store).await
}

/// `egressgate ca rotate`: a new signing CA; the old one stays trusted for `overlap`.
async fn ca_rotate(raw: RawConfig, overlap: &str) -> Result<()> {
    let overlap =
        humantime::parse_duration(overlap).map_err(|e| anyhow!("--overlap {overlap:?}: {e}"))?;
    let cfg = load(raw)?;
    let store = open(&cfg, Create::No).await?;
    store.migrate().await.context("migration failed")?;
    crate::ca::rotate(&cfg, &store, overlap).await
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}

async fn signals(tx: watch::Sender<bool>) {
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

/// Every minute: expired rows and orphaned blobs (`janitor_pass`), and turns that expired more
/// than `turn_retention` (the interrupt retention: a turn's record lives as long as its
/// cards') ago, with their refusals and egress rows, so a steady stream of turns keeps the
/// database bounded.
async fn janitor(
    store: Store,
    blobs: Arc<dyn BlobStore>,
    retention: Duration,
    turn_retention: Duration,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped(stop.clone()) => return Ok(()),
        }
        match egressgate_store::db::janitor::janitor_pass(
            &store,
            blobs.as_ref(),
            Timestamp::now(),
            retention,
            Duration::from_secs(600),
        )
        .await
        {
            Ok(c) => tracing::debug!(?c, "janitor pass"),
            Err(e) => tracing::warn!(error = %e, "janitor pass failed"),
        }
        let horizon = Timestamp::from_millis(
            Timestamp::now()
                .millis()
                .saturating_sub(i64::try_from(turn_retention.as_millis()).unwrap_or(i64::MAX)),
        );
        match store.purge_turns(horizon).await {
            Ok(turns) => tracing::debug!(turns, "janitor turn purge"),
            Err(e) => tracing::warn!(error = %e, "janitor turn purge failed"),
        }
    }
}

/// `/metrics`; with `cards`, the control plane's card counts are re-read before each scrape.
fn metrics_router(
    registry: Arc<Registry>,
    cards: Option<(egressgate_control::metrics::ControlMetrics, Store)>,
) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            let cards = cards.clone();
            async move {
                if let Some((m, store)) = &cards {
                    m.refresh_cards(store).await;
                }
                let mut text = String::new();
                match prometheus_client::encoding::text::encode(&mut text, &registry) {
                    Ok(()) => (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response_parts(),
                    Err(_) => (
                        [(axum::http::header::CONTENT_TYPE, "text/plain")],
                        String::new(),
                    )
                        .into_response_parts(),
                }
            }
        }),
    )
}

/// Health endpoints for a proxy-only process.
fn health_router(store: Store) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let store = store.clone();
                async move {
                    match store.ping().await {
                        Ok(()) => (axum::http::StatusCode::OK, "ready"),
                        Err(_) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "database unavailable",
                        ),
                    }
                }
            }),
        )
}

trait IntoParts {
    fn into_response_parts(self) -> axum::response::Response;
}

impl<T: axum::response::IntoResponse> IntoParts for T {
    fn into_response_parts(self) -> axum::response::Response {
        self.into_response()
    }
}

async fn admin(cmd: AdminListCmd) -> Result<()> {
    let (list, op) = match cmd {
        AdminListCmd::Sites { op } => (AdminList::Sites, op),
        AdminListCmd::Packages { op } => (AdminList::Packages, op),
        AdminListCmd::Tokens { op } => {
            let raw = match &op {
                TokenOp::Add { db, .. } | TokenOp::List { db } | TokenOp::Remove { db, .. } => {
                    db.clone()
                }
            };
            let cfg = load(raw)?;
            let store = open(&cfg, Create::No).await?;
            store.migrate().await.context("migration failed")?;
            return crate::admin_tokens::run(&store, op).await;
        }
    };
    let raw = match &op {
        AdminOp::Add { db, .. } | AdminOp::List { db } | AdminOp::Remove { db, .. } => db.clone(),
    };
    let cfg = load(raw)?;
    let store = open(&cfg, Create::No).await?;
    store.migrate().await.context("migration failed")?;
    let now = Timestamp::now();
    let canonical = |v: &str| -> Result<String> {
        match list {
            AdminList::Sites => SitePattern::parse(v, &cfg.control.internal_suffixes)
                .map(|p| p.to_key())
                .map_err(|e| anyhow!("{v:?}: {e}")),
            AdminList::Packages => PackageSpec::parse(v)
                .map(|p| p.as_str().to_owned())
                .map_err(|e| anyhow!("{v:?}: {e}")),
        }
    };
    let mut out = String::new();
    match op {
        AdminOp::Add { value, note, .. } => {
            let key = canonical(&value)?;
            let added = store
                .admin_add(
                    list,
                    &key,
                    note.as_deref(),
                    SiteRules::default(),
                    "admin-cli",
                    now,
                )
                .await?;
            out.push_str(&format!(
                "{} {key}\n",
                if added { "added" } else { "already present" }
            ));
        }
        AdminOp::Remove { value, .. } => {
            let key = canonical(&value)?;
            if !store.admin_remove(list, &key, "admin-cli", now).await? {
                bail!("{key} is not on the list");
            }
            out.push_str(&format!("removed {key}\n"));
        }
        AdminOp::List { .. } => {
            for e in store.admin_list(list).await? {
                out.push_str(&e.value);
                if let Some(n) = e.note {
                    out.push('\t');
                    out.push_str(&n);
                }
                out.push('\n');
            }
        }
    }
    use std::io::Write as _;
    std::io::stdout()
        .write_all(out.as_bytes())
        .context("stdout")?;
    Ok(())
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

fn random_key() -> Vec<u8> {
    egressgate_store::Secret::generate()
        .expose()
        .as_bytes()
        .to_vec()
}

/// `egressgate mcp`: the stdio MCP server for one turn.
async fn mcp(args: crate::cli::McpArgs) -> Result<()> {
    init_logging(config::LogFormat::Text);
    let token = std::env::var("EGRESSGATE_RUNTIME_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            anyhow!("egressgate mcp needs EGRESSGATE_RUNTIME_TOKEN (the runtime API token)")
        })?;
    if egressgate_store::TurnId::parse(&args.turn).is_none() {
        bail!("--turn {:?}: not a turn id", args.turn);
    }
    let backend = egressgate_control::mcp::backend::Backend::http(&args.control_url, &token)
        .map_err(|e| anyhow!(e))?;
    let keys = match &args.mcp_state_key {
        Some(k) => {
            egressgate_control::mcp::StateKeys::new(config::mcp_state_key("--mcp-state-key", k)?.0)
                .map_err(|e| anyhow!("--mcp-state-key: {e}"))?
        }
        None => egressgate_control::mcp::StateKeys::random(),
    };
    let public = args
        .control_public_url
        .clone()
        .unwrap_or_else(|| args.control_url.clone());
    egressgate_control::mcp::serve_stdio(backend, args.turn, keys, public)
        .await
        .map_err(|e| anyhow!(e))
}
