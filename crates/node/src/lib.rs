//! # node
//!
//! A Lachesis cache node: serves its exports over NBD through the `cache` crate's
//! per-tenant caches and exposes the programmable-cache API (HTTP JSON), Prometheus
//! metrics and an operator's page. A level-1 node's backends may be level-2 nodes reached
//! over NBD, so the two-level, multi-server hierarchy of `ARCHITECTURE.md` runs for real.
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | `node.toml`: listeners, memory, exports, initial caches and rules |
//! | [`state`] | the control plane: verbs, cache names, profilers, tenants |
//! | [`export`] | the NBD face: per-client exports over the cache's data path |
//! | [`upstream`] | backends over upstream NBD exports (level 1 → level 2) |
//! | [`api`], [`page`], [`metrics`] | HTTP: JSON verbs, operator's page, Prometheus |
//! | [`auth`] | the API's bearer token: where it comes from, who may skip it |
//! | [`latency`], [`share`] | per-tenant latency histograms, bandwidth proportions |
//! | [`observe`] | per-tenant profilers (LRU and phantom curves) and latency for a controller |
//! | [`bandwidth`] | the bandwidth scheduler: per-tenant proportional shares (time quanta) |
//! | [`hot_tier`] | SANCACHE's hot-chunk tier: a fast file in front of a slow backend |
//! | [`units`] | byte sizes with units |
//!
//! [`start`] builds a node from a configuration and runs it until its shutdown handle is
//! used; on the way out it writes every dirty block back.

pub mod api;
pub mod auth;
pub mod bandwidth;
pub mod config;
pub mod export;
pub mod hot_tier;
pub mod latency;
pub mod metrics;
pub mod observe;
pub mod page;
pub mod share;
pub mod state;
pub use units;
pub mod upstream;

use crate::config::{ExportConfig, NodeConfig};
use crate::hot_tier::{HotTier, HotTierConfig};
use crate::state::{ExportInfo, NodeState};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// An error of the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The configuration file is wrong.
    #[error("{file}: {msg}")]
    Config {
        /// The file.
        file: String,
        /// What is wrong, naming the field.
        msg: String,
    },
    /// A request names something that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A request is malformed or its values are invalid.
    #[error("{0}")]
    Invalid(String),
    /// A request conflicts with the node's state.
    #[error("{0}")]
    Conflict(String),
    /// The cache refused.
    #[error(transparent)]
    Cache(#[from] cache::CacheError),
    /// I/O failed (a backend, a listener).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A running node.
pub struct RunningNode {
    /// The node's state (for in-process tests and benchmarks).
    pub state: Arc<NodeState>,
    /// Where NBD clients connect.
    pub nbd_addr: SocketAddr,
    /// Where the HTTP API listens.
    pub api_addr: SocketAddr,
    /// The API's bearer token and the file holding it.
    pub api_token: Arc<auth::ApiToken>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl RunningNode {
    /// Stops accepting, drains in-flight requests, writes dirty blocks back and returns.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.wait().await
    }

    /// Waits until the node stops (after [`RunningNode::shutdown`] or a fatal error).
    pub async fn wait(&mut self) -> std::io::Result<()> {
        (&mut self.task)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?
    }

    /// A handle that stops the node when used.
    pub fn stopper(&mut self) -> Option<oneshot::Sender<()>> {
        self.stop.take()
    }
}

/// Opens `path`, creating it sparse with `size` bytes if it is missing.
fn open_or_create(path: &Path, size: Option<u64>) -> Result<cache::FileBackend, String> {
    if !path.exists() {
        let size = size.ok_or_else(|| {
            format!(
                "{} does not exist and no `size` says how big to create it",
                path.display()
            )
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        f.set_len(size)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        tracing::info!(path = %path.display(), size, "created sparse file");
    }
    let b = cache::FileBackend::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(size) = size {
        if cache::Backend::size(&b) != size {
            tracing::warn!(path = %path.display(), configured = size, actual = cache::Backend::size(&b),
                "file exists with another size; using its actual size");
        }
    }
    Ok(b)
}

async fn open_backend(
    cfg: &NodeConfig,
    e: &ExportConfig,
) -> Result<(Arc<dyn cache::Backend>, String), NodeError> {
    let field = |msg: String| NodeError::Config {
        file: "node.toml".into(),
        msg: format!("export `{}`: {msg}", e.name),
    };
    if let Some(file) = &e.file {
        let path = cfg.path(file);
        let b = open_or_create(&path, e.size.map(|s| s.0)).map_err(field)?;
        return Ok((Arc::new(b), format!("file:{}", path.display())));
    }
    let mut members: Vec<Arc<dyn cache::Backend>> = Vec::new();
    for u in &e.upstream {
        let b = upstream::UpstreamBackend::connect(u)
            .await
            .map_err(|err| field(err.to_string()))?;
        members.push(Arc::new(b));
    }
    if members.len() == 1 {
        return Ok((
            members.pop().expect("one member"),
            format!("nbd:{}", e.upstream[0]),
        ));
    }
    let unit = e.stripe_unit.map(|u| u.0).unwrap_or(1 << 20);
    let striped =
        cache::StripedBackend::new(members, unit).map_err(|err| field(err.to_string()))?;
    Ok((
        Arc::new(striped),
        format!("stripe({}; unit {unit})", e.upstream.join(", ")),
    ))
}

/// Builds the node's state from `cfg`: backends, caches, rules.
pub async fn build(cfg: &NodeConfig) -> Result<NodeState, NodeError> {
    if let Some(d) = &cfg.node.data_dir {
        std::fs::create_dir_all(d)?;
    }
    let bs = cfg.node.block_size.0 as usize;
    let blocks = (cfg.node.cache_size.0 / bs as u64) as usize;
    let mut state = NodeState::new(blocks, bs, cfg.node.level, cfg.node.bandwidth.0)?;
    state.phantom_policies = cfg.node.phantom_policies.clone();
    state.name = cfg.node.name.clone().unwrap_or_default();
    for e in &cfg.exports {
        let (mut backend, mut desc) = open_backend(cfg, e).await?;
        let mut tier = None;
        if let Some(h) = &e.hot_tier {
            let at = |msg: String| NodeError::Config {
                file: "node.toml".into(),
                msg: format!("export `{}`.hot_tier: {msg}", e.name),
            };
            let path = cfg.path(&h.file);
            let fast = open_or_create(&path, Some(h.size.0)).map_err(at)?;
            let t = Arc::new(
                HotTier::new(
                    backend,
                    Arc::new(fast),
                    HotTierConfig {
                        chunk_size: h.chunk.0,
                        capacity_chunks: h.size.0 / h.chunk.0,
                        admission: h.admission.clone(),
                        max_migrations_per_sec: h.max_migrations_per_sec,
                    },
                )
                .map_err(|err| at(err.to_string()))?,
            );
            desc = format!("{desc} + hot tier {} ({})", path.display(), h.admission);
            backend = t.clone();
            tier = Some(t);
        }
        let size = backend.size();
        state.add_export(
            ExportInfo {
                name: e.name.clone(),
                tenant: e.tenant().to_string(),
                size,
                read_only: e.read_only,
                backend: desc,
            },
            backend,
            tier,
        )?;
    }
    for c in &cfg.caches {
        state.create_cache(c).map_err(|err| NodeError::Config {
            file: "node.toml".into(),
            msg: format!("cache `{}`: {err}", c.name),
        })?;
    }
    for (i, r) in cfg.rules.iter().enumerate() {
        state.create_rule(r).map_err(|err| NodeError::Config {
            file: "node.toml".into(),
            msg: format!("rule[{i}]: {err}"),
        })?;
    }
    Ok(state)
}

/// Builds a node from `cfg` and starts serving NBD and the API.
pub async fn start(cfg: &NodeConfig) -> Result<RunningNode, NodeError> {
    if let Some(d) = &cfg.node.data_dir {
        std::fs::create_dir_all(d)?;
    }
    let nbd_listener = TcpListener::bind(&cfg.node.nbd).await.map_err(|e| {
        NodeError::Io(std::io::Error::new(
            e.kind(),
            format!("NBD listener {}: {e}", cfg.node.nbd),
        ))
    })?;
    let api_listener = TcpListener::bind(&cfg.node.api).await.map_err(|e| {
        NodeError::Io(std::io::Error::new(
            e.kind(),
            format!("API listener {}: {e}", cfg.node.api),
        ))
    })?;
    let nbd_addr = nbd_listener.local_addr()?;
    let api_addr = api_listener.local_addr()?;
    auth::check_exposure(cfg, api_addr)?;
    let api_token = Arc::new(auth::ApiToken::load(cfg)?);
    let mut state = build(cfg).await?;
    if state.name.is_empty() {
        state.name = api_addr.to_string();
    }
    let state = Arc::new(state);
    let server = nbd::ServerConfig {
        busy_poll: std::time::Duration::from_micros(cfg.node.busy_poll_us),
        max_connections: cfg.node.max_connections,
        idle_timeout: (cfg.node.idle_timeout_secs > 0.0)
            .then(|| std::time::Duration::from_secs_f64(cfg.node.idle_timeout_secs)),
        ..nbd::ServerConfig::default()
    };
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let st = state.clone();
    let token = api_token.clone();
    let task = tokio::spawn(async move {
        let (api_stop_tx, api_stop_rx) = oneshot::channel::<()>();
        let app = api::router(st.clone(), token);
        let api = tokio::spawn(async move {
            axum::serve(api_listener, app)
                .with_graceful_shutdown(async {
                    let _ = api_stop_rx.await;
                })
                .await
        });
        let provider: Arc<dyn nbd::ExportProvider> = Arc::new(export::NodeExports(st.clone()));
        let served = nbd::serve_with(nbd_listener, provider, server, async {
            let _ = stop_rx.await;
        })
        .await;
        let _ = api_stop_tx.send(());
        let _ = api.await;
        // Write every dirty block back before the process may exit.
        let flush_state = st.clone();
        tokio::task::spawn_blocking(move || {
            for e in flush_state.exports() {
                if let Err(err) = flush_state.cache.flush(&e.name) {
                    tracing::error!(export = %e.name, %err, "write-back at shutdown failed");
                }
            }
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        served
    });
    tracing::info!(%nbd_addr, %api_addr, "node serving");
    Ok(RunningNode {
        state,
        nbd_addr,
        api_addr,
        api_token,
        stop: Some(stop_tx),
        task,
    })
}

/// Loads `path` (with `data_dir` overriding the file's) and starts the node.
pub async fn start_file(path: &Path, data_dir: Option<&Path>) -> Result<RunningNode, NodeError> {
    let cfg = NodeConfig::load(path, data_dir)?;
    start(&cfg).await
}
