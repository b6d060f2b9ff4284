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
//! | [`demote`] | exclusive levels: level 1 demotes clean victims to level 2 over HTTP |
//! | [`api`], [`page`], [`metrics`] | HTTP: JSON verbs (their bodies are the `api` crate's contract), operator's page, Prometheus |
//! | [`auth`] | the API's bearer token: where it comes from, who may skip it |
//! | [`latency`] | per-tenant latency histograms |
//! | [`observe`] | per-tenant profilers (LRU and phantom curves) and latency, turned into the contract's observations for a controller |
//! | [`register`] | registration with a controller and the heartbeat (through the `api` crate's client) |
//! | [`replay`] | a trace replayed as NBD I/O at its own pace or a given rate |
//! | [`reserve`] | disk space held for the recovery file, so a full disk cannot take it |
//! | [`bandwidth`] | the backend's queue: per-tenant proportions of its service time (weighted fair queueing), service time and queueing delay per tenant |
//! | [`hot_tier`] | SANCACHE's hot-chunk tier: a fast file in front of a slow backend |
//! | [`units`] | byte sizes with units |
//!
//! [`start`] builds a node from a configuration and runs it until its shutdown handle is
//! used; on the way out it writes every dirty block back, in parallel batches, within
//! `[node] stop_timeout`; what is not on the backends by then (a slow or hung backend)
//! is kept in the recovery file and the stop fails naming the count (see
//! [`cache::recovery`] for how that file is consumed exactly once). The space that file
//! needs is reserved at start ([`reserve`]) and the file is written into it (the reserve
//! renamed and overwritten in place), so a disk that others filled meanwhile, or a
//! write-back still running at the deadline, cannot make the stop drop acknowledged data.

pub mod api;
pub mod auth;
pub mod bandwidth;
pub mod config;
pub mod demote;
pub mod export;
pub mod hot_tier;
pub mod latency;
pub mod metrics;
pub mod observe;
pub mod page;
pub mod register;
pub mod replay;
pub mod reserve;
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
    /// I/O failed (a backend).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A listener could not be opened.
    #[error("{what} listener {addr}: {reason}")]
    Listen {
        /// `NBD` or `API`.
        what: &'static str,
        /// The address asked for.
        addr: String,
        /// Why, and what to do.
        reason: String,
    },
}

/// Opens the `what` listener on `addr`; an address in use says how to choose another.
async fn listen(what: &'static str, addr: &str, key: &str) -> Result<TcpListener, NodeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| NodeError::Listen {
            what,
            addr: addr.to_string(),
            reason: match e.kind() {
                std::io::ErrorKind::AddrInUse => format!(
                    "the address is already in use (another node or program listens there); \
                 choose another with `serve --{key} ADDR` or `[node] {key}`"
                ),
                std::io::ErrorKind::AddrNotAvailable => format!(
                    "no interface of this machine has that address; \
                 choose another with `serve --{key} ADDR` or `[node] {key}`"
                ),
                _ => e.to_string(),
            },
        })
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

/// The data directory's list of image files this node has used, one a line as `PATH`, a
/// tab and its size in bytes (a line of a bare path, from older versions, gets its size
/// at the next start): a missing image is never silently recreated after its first start,
/// and an image that shrank while the node was stopped is refused.
pub const IMAGES_FILE: &str = "images.list";

/// The entries of the images file (`path`, recorded size); none if it does not exist.
fn read_images(images: &Path) -> Vec<(String, Option<u64>)> {
    let Ok(text) = std::fs::read_to_string(images) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| match l.rsplit_once('\t') {
            Some((p, n)) if n.parse::<u64>().is_ok() => (p.to_string(), n.parse().ok()),
            _ => (l.to_string(), None),
        })
        .collect()
}

/// Rewrites the images file with `entries` (temporary file, sync, rename).
fn write_images(images: &Path, entries: &[(String, Option<u64>)]) -> std::io::Result<()> {
    use std::io::Write;
    let mut text = String::new();
    for (p, n) in entries {
        match n {
            Some(n) => text.push_str(&format!("{p}\t{n}\n")),
            None => text.push_str(&format!("{p}\n")),
        }
    }
    let tmp = images.with_extension("list.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, images)
}

/// Opens `path`, creating it sparse with `size` bytes if it is missing and no earlier start
/// used it (listed in `images`), or if `recreate` says so; records it and its size in
/// `images`. An image smaller than the size recorded at an earlier start was truncated
/// while the node was stopped: that is an error naming the image and both sizes.
fn open_or_create(
    path: &Path,
    size: Option<u64>,
    images: &Path,
    recreate: bool,
) -> Result<cache::FileBackend, String> {
    let name = path.display().to_string();
    let mut entries = read_images(images);
    let listed = entries.iter().position(|(p, _)| *p == name);
    if !path.exists() && listed.is_some() && !recreate {
        return Err(format!(
            "image {name} is missing, but an earlier start of this node used it (listed in \
             {}): it was deleted or moved. Restore it, or set `recreate_missing = true` on \
             the export to start over with an empty image",
            images.display()
        ));
    }
    let mut created = false;
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
        created = true;
    }
    let b = cache::FileBackend::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let actual = cache::Backend::size(&b);
    if let Some(size) = size {
        if actual != size {
            tracing::warn!(path = %path.display(), configured = size, actual,
                "file exists with another size; using its actual size");
        }
    }
    let recorded = listed.and_then(|i| entries[i].1);
    if let Some(was) = recorded.filter(|&was| actual < was && !created) {
        return Err(format!(
            "image {name} is {actual} bytes, but it was {was} bytes when this node last used \
             it (recorded in {}): it was truncated while the node was stopped, and the data \
             past byte {actual} is gone. Restore it; or, to go on without that data, grow it \
             back (`truncate -s {was} {name}`) or remove its line from {}",
            images.display(),
            images.display()
        ));
    }
    if recorded != Some(actual) {
        if let Some(was) = recorded {
            tracing::warn!(path = %path.display(), was, now = actual, "image grew while the node was stopped");
        }
        match listed {
            Some(i) => entries[i].1 = Some(actual),
            None => entries.push((name.clone(), Some(actual))),
        }
        write_images(images, &entries).map_err(|e| format!("{}: {e}", images.display()))?;
    }
    Ok(b)
}

async fn open_backend(
    cfg: &NodeConfig,
    e: &ExportConfig,
    demoter: &demote::Demoter,
    links: &upstream::Links,
) -> Result<(Arc<dyn cache::Backend>, String), NodeError> {
    let field = |msg: String| NodeError::Config {
        file: "node.toml".into(),
        msg: format!("export `{}`: {msg}", e.name),
    };
    if let Some(file) = &e.file {
        let path = cfg.path(file);
        let images = cfg.path(Path::new(IMAGES_FILE));
        let b = open_or_create(&path, e.size.map(|s| s.0), &images, e.recreate_missing)
            .map_err(field)?;
        return Ok((Arc::new(b), format!("file:{}", path.display())));
    }
    let mode: nbd::TlsMode = e.upstream_tls.parse().map_err(field)?;
    let tls = match (&e.upstream_tls_ca, mode) {
        (_, nbd::TlsMode::Off) => None,
        (None, _) => return Err(field("upstream_tls_ca: missing".into())),
        (Some(ca), mode) => {
            let client = match (&e.upstream_tls_cert, &e.upstream_tls_key) {
                (Some(c), Some(k)) => Some((cfg.path(c), cfg.path(k))),
                _ => None,
            };
            let client = client.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
            let t = nbd::ClientTls::from_pem_files(mode, &cfg.path(ca), client)
                .map_err(|err| field(format!("upstream_tls_ca / upstream_tls_cert: {err}")))?;
            Some((t, cfg.path(ca)))
        }
    };
    let mut members: Vec<Arc<dyn cache::Backend>> = Vec::new();
    for u in &e.upstream {
        let b = upstream::UpstreamBackend::connect_tls(
            u,
            tls.as_ref().map(|t| &t.0),
            cfg.node.upstream_wait,
        )
        .await
        .map_err(|err| match &tls {
            // Name the setting to check when the TLS handshake itself failed.
            Some((_, ca)) if err.to_string().contains("TLS handshake failed") => field(format!(
                "{err} (is the upstream's certificate signed by the CA in upstream_tls_ca = {}?)",
                ca.display()
            )),
            Some(_) if err.to_string().contains("refused NBD_OPT_STARTTLS") => {
                field(format!("{err} (upstream_tls = \"{}\")", e.upstream_tls))
            }
            _ => field(err.to_string()),
        })?;
        links.add(&e.name, b.link());
        members.push(Arc::new(b));
    }
    let unit = e.stripe_unit.map(|u| u.0).unwrap_or(1 << 20);
    if !e.upstream_api.is_empty() {
        let mut with_targets = Vec::new();
        for (j, (m, (u, api))) in members
            .into_iter()
            .zip(e.upstream.iter().zip(&e.upstream_api))
            .enumerate()
        {
            let token = auth::read_token(&cfg.path(&api.token_file))
                .map_err(|err| field(format!("upstream_api[{j}].token_file: {err}")))?;
            let (_, export) = upstream::parse_address(u).map_err(|err| field(err.to_string()))?;
            with_targets.push((
                m,
                demote::Target {
                    url: api.url.clone(),
                    token,
                    export,
                },
            ));
        }
        members = demoter.add_export(&e.name, with_targets, unit)?;
    }
    if members.len() == 1 {
        return Ok((
            members.pop().expect("one member"),
            format!("nbd:{}", e.upstream[0]),
        ));
    }
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
    let mut state = NodeState::new(blocks, bs, cfg.node.level, cfg.node.backend_depth)?;
    state.phantom_policies = cfg.node.phantom_policies.clone();
    state.name = cfg.node.name.clone().unwrap_or_default();
    state.data_dir = cfg.node.data_dir.clone();
    state.metrics_client_labels = cfg.node.metrics_client_labels;
    for e in &cfg.exports {
        let (backend, mut desc) = open_backend(cfg, e, &state.demoter, &state.upstreams).await?;
        // Below the hot tier: only what reaches the disk or upstream waits its turn.
        let mut backend: Arc<dyn cache::Backend> = Arc::new(bandwidth::QueuedBackend::new(
            backend,
            e.tenant(),
            state.bandwidth.clone(),
        ));
        let mut tier = None;
        if let Some(h) = &e.hot_tier {
            let at = |msg: String| NodeError::Config {
                file: "node.toml".into(),
                msg: format!("export `{}`.hot_tier: {msg}", e.name),
            };
            let path = cfg.path(&h.file);
            let images = cfg.path(Path::new(IMAGES_FILE));
            let fast =
                open_or_create(&path, Some(h.size.0), &images, e.recreate_missing).map_err(at)?;
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
    let nbd_listener = listen("NBD", &cfg.node.nbd, "nbd").await?;
    let api_listener = listen("API", &cfg.node.api, "api").await?;
    let nbd_addr = nbd_listener.local_addr()?;
    let api_addr = api_listener.local_addr()?;
    auth::check_exposure(cfg, api_addr)?;
    auth::check_nbd_exposure(cfg, nbd_addr)?;
    let api_token = Arc::new(auth::ApiToken::load(cfg)?);
    let mut state = build(cfg).await?;
    if state.name.is_empty() {
        state.name = api_addr.to_string();
    }
    let server = nbd::ServerConfig {
        busy_poll: std::time::Duration::from_micros(cfg.node.busy_poll_us),
        max_connections: cfg.node.max_connections,
        idle_timeout: (cfg.node.idle_timeout_secs > 0.0)
            .then(|| std::time::Duration::from_secs_f64(cfg.node.idle_timeout_secs)),
        payload_timeout: (!cfg.node.payload_timeout.is_zero()).then_some(cfg.node.payload_timeout),
        in_flight_total: usize::try_from(cfg.node.in_flight_budget.0).unwrap_or(usize::MAX),
        max_workers: cfg.node.max_workers,
        threaded_connections: cfg
            .node
            .threaded_connections
            .unwrap_or_else(|| nbd::ServerConfig::default().threaded_connections),
        ..nbd::ServerConfig::default()
    };
    let nbd_limits = nbd::Limits::for_config(&server);
    state.nbd_limits = Some(nbd_limits.clone());
    let tls = cfg.nbd_tls().map_err(|msg| NodeError::Config {
        file: "node.toml".into(),
        msg,
    })?;
    let mut allow = export::AllowLists::new();
    for (i, e) in cfg.exports.iter().enumerate() {
        if let Some(list) = &e.allow {
            let list =
                nbd::server::allow::AllowList::parse(list).map_err(|m| NodeError::Config {
                    file: "node.toml".into(),
                    msg: format!("export[{i}].allow{m}"),
                })?;
            allow.insert(e.name.clone(), list);
        }
    }
    let allow = Arc::new(allow);
    let state = Arc::new(state);
    let recovery_file = cfg.path(Path::new(RECOVERY_FILE));
    replay_recovery(&state, &recovery_file)?;
    let reserve = reserve::Reserve::new(
        recovery_file.parent().unwrap_or(Path::new(".")),
        cfg.node.recovery_reserve.map_or_else(
            || reserve::size_for(cfg.node.cache_size.0, cfg.node.block_size.0),
            |b| b.0,
        ),
    );
    reserve.ensure().map_err(|e| NodeError::Config {
        file: "node.toml".into(),
        msg: e.to_string(),
    })?;
    cache::CacheNode::spawn_cleaner(&state.cache, std::time::Duration::from_millis(100))?;
    let link = match &cfg.node.controller {
        Some(url) => Some(register::ControllerLink {
            url: url.trim_end_matches('/').to_string(),
            token: match &cfg.node.controller_token_file {
                Some(f) => Some(
                    auth::read_token(&cfg.path(f)).map_err(|e| NodeError::Config {
                        file: "node.toml".into(),
                        msg: format!("node.controller_token_file: {e}"),
                    })?,
                ),
                None => None,
            },
            every: std::time::Duration::from_secs_f64(cfg.node.heartbeat_secs),
        }),
        None => None,
    };
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let stop_timeout = cfg.node.stop_timeout;
    let st = state.clone();
    let token = api_token.clone();
    let reg = register::registration(&state, api_addr, nbd_addr, api_token.secret());
    let task = tokio::spawn(async move {
        let (reg_stop_tx, reg_stop_rx) = oneshot::channel::<()>();
        let beating = link.map(|l| register::spawn(st.clone(), l, reg, reg_stop_rx));
        let (api_stop_tx, api_stop_rx) = oneshot::channel::<()>();
        let app = crate::api::router(st.clone(), token);
        let api = tokio::spawn(async move {
            axum::serve(api_listener, app)
                .with_graceful_shutdown(async {
                    let _ = api_stop_rx.await;
                })
                .await
        });
        let provider: Arc<dyn nbd::ExportProvider> =
            Arc::new(export::NodeExports(st.clone(), allow));
        // The stop's deadline runs from the moment it is asked for; every step of the
        // stop (draining requests, the API, the write-back) ends by it.
        let (asked_tx, asked_rx) = oneshot::channel::<std::time::Instant>();
        let mut serving = tokio::spawn(
            nbd::Server::builder()
                .config(server)
                .limits(nbd_limits)
                .tls(tls)
                .build(nbd_listener, provider)
                .serve(async move {
                    let _ = stop_rx.await;
                    let _ = asked_tx.send(std::time::Instant::now());
                }),
        );
        let joined = |res: Result<std::io::Result<()>, tokio::task::JoinError>| {
            res.map_err(|e| std::io::Error::other(e.to_string()))?
        };
        let mut asked_rx = asked_rx;
        let (deadline, ended) = tokio::select! {
            t = &mut asked_rx => (t.unwrap_or_else(|_| std::time::Instant::now()) + stop_timeout, None),
            res = &mut serving => (std::time::Instant::now() + stop_timeout, Some(joined(res))),
        };
        let until = tokio::time::Instant::from_std(deadline);
        let served = match ended {
            Some(res) => res,
            None => match tokio::time::timeout_at(until, &mut serving).await {
                Ok(res) => joined(res),
                Err(_) => {
                    tracing::error!(
                        "NBD requests still in flight at the stop deadline (node.stop_timeout); \
                         stopping without their answers"
                    );
                    serving.abort();
                    Ok(())
                }
            },
        };
        let _ = api_stop_tx.send(());
        let mut api = api;
        if tokio::time::timeout_at(until, &mut api).await.is_err() {
            api.abort();
        }
        let _ = reg_stop_tx.send(());
        if let Some(mut b) = beating {
            if tokio::time::timeout_at(until, &mut b).await.is_err() {
                b.abort();
            }
        }
        // Write every dirty block back before the process may exit; what cannot be
        // written by the deadline is kept in the recovery file and the node stops with
        // an error.
        let flush_state = st.clone();
        let recovery = recovery_file.clone();
        tokio::task::spawn_blocking(move || {
            write_back_or_keep(&flush_state, &recovery, &reserve, deadline, stop_timeout)
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
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

/// Dirty blocks that could not be written back at the last stop, in the data directory
/// (see [`cache::recovery`]); the next start replays them.
pub const RECOVERY_FILE: &str = "recovery.bin";

/// Dirty blocks written back at once at a stop (parallel batches, see
/// [`cache::Partition::write_back_parallel`]).
pub const STOP_WRITERS: usize = 16;

/// At shutdown: write every dirty block back by `deadline` (in parallel batches, one
/// export after another), or keep what is not on the backends by then in `file` and
/// fail, naming the count and the file (so the process exits non-zero and nothing is
/// dropped). A backend that hangs ends the same way: the write-back thread is left
/// behind and the file is written from memory.
///
/// The recovery file a start replayed is settled by each successful flush; what is left
/// of it (exports that did not flush) is kept with the newest bytes the cache has for
/// those blocks, together with every dirty block and the blocks written back during this
/// stop to a backend that did not flush. When nothing is left, any recovery file is
/// removed, so a stale one can never be replayed over newer data (see
/// [`cache::recovery`]).
fn write_back_or_keep(
    state: &Arc<NodeState>,
    file: &Path,
    reserve: &reserve::Reserve,
    deadline: std::time::Instant,
    timeout: std::time::Duration,
) -> std::io::Result<()> {
    // Which blocks are dirty now: once written back they are durable only when their
    // export's flush succeeds.
    let at_stop: Vec<(String, u64, usize)> = state
        .cache
        .dirty_data()
        .into_iter()
        .map(|b| (b.export, b.offset, b.data.len()))
        .collect();
    let names: Vec<String> = state.exports().map(|e| e.name.clone()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let st = state.clone();
    let todo = names.clone();
    std::thread::Builder::new()
        .name("stop-write-back".into())
        .spawn(move || {
            for e in todo {
                let res = st.cache.flush_parallel(&e, STOP_WRITERS);
                if tx.send((e, res)).is_err() {
                    return;
                }
            }
        })?;
    let mut flushed = std::collections::BTreeSet::new();
    let mut failed = None;
    let mut timed_out = false;
    for _ in &names {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((e, Ok(()))) => {
                flushed.insert(e);
            }
            Ok((e, Err(err))) => {
                tracing::error!(export = %e, %err, "write-back at shutdown failed");
                failed.get_or_insert(err.to_string());
            }
            Err(_) => {
                timed_out = true;
                break;
            }
        }
    }
    let unsure: Vec<(String, u64, usize)> = at_stop
        .into_iter()
        .filter(|(e, _, _)| !flushed.contains(e))
        .collect();
    let blocks = blocks_to_keep(state, &state.cache.pending_recovery(), &unsure, !timed_out);
    if timed_out {
        let why = format!(
            "not on the backends within node.stop_timeout = \"{}\"; {} of {} export(s) flushed",
            humantime::format_duration(timeout),
            flushed.len(),
            names.len()
        );
        if blocks.is_empty() {
            tracing::warn!("{why}, but no dirty block is held");
            state.cache.keep_recovery(file, &[])?;
            return Ok(());
        }
        return keep(state, file, reserve, &blocks, why);
    }
    let Some(err) = failed else {
        if blocks.is_empty() {
            state.cache.keep_recovery(file, &[])?;
            return Ok(());
        }
        // Flushed, yet something is dirty again: keep it all the same.
        return keep(
            state,
            file,
            reserve,
            &blocks,
            "dirty after the last flush".to_string(),
        );
    };
    if blocks.is_empty() {
        // Nothing is held dirty: every acknowledged write already left this node, and a
        // backend that cannot flush now (an upstream that went away) is not data we drop.
        state.cache.keep_recovery(file, &[])?;
        tracing::warn!(%err, "flush at shutdown failed, but no dirty block is held");
        return Ok(());
    }
    keep(state, file, reserve, &blocks, err)
}

/// The blocks a recovery file written now must hold, each with the newest bytes the
/// cache has: the `pending` blocks of the file a start replayed (their old bytes if the
/// cache cannot tell), the `unsure` blocks (dirty when the stop began, of exports that
/// did not flush; skipped if the cache cannot tell), then every dirty block. With
/// `full_read` the cache may read the backend; without it only memory is used (the
/// backend may hang). A block listed twice keeps its last bytes.
fn blocks_to_keep(
    state: &NodeState,
    pending: &[cache::DirtyBlock],
    unsure: &[(String, u64, usize)],
    full_read: bool,
) -> Vec<cache::DirtyBlock> {
    let mut out: Vec<cache::DirtyBlock> = Vec::new();
    let mut at: std::collections::HashMap<(String, u64), usize> = Default::default();
    let mut put = |b: cache::DirtyBlock| match at.get(&(b.export.clone(), b.offset)) {
        Some(&i) => out[i] = b,
        None => {
            at.insert((b.export.clone(), b.offset), out.len());
            out.push(b);
        }
    };
    let now = |export: &str, offset: u64, len: usize| -> Option<Vec<u8>> {
        let mut buf = vec![0; len];
        let got = if full_read {
            state
                .cache
                .read(export, "recovery", offset, &mut buf)
                .is_ok()
        } else {
            matches!(
                state
                    .cache
                    .read_if_resident(export, "recovery", offset, &mut buf),
                Ok(true)
            )
        };
        got.then_some(buf)
    };
    for b in pending {
        let data = now(&b.export, b.offset, b.data.len()).unwrap_or_else(|| {
            tracing::warn!(export = %b.export, offset = b.offset,
                "cannot read a block of the recovery file back; keeping the file's bytes");
            b.data.clone()
        });
        put(cache::DirtyBlock {
            export: b.export.clone(),
            offset: b.offset,
            data,
        });
    }
    for (export, offset, len) in unsure {
        match now(export, *offset, *len) {
            Some(data) => put(cache::DirtyBlock {
                export: export.clone(),
                offset: *offset,
                data,
            }),
            None => tracing::warn!(%export, offset,
                "a block written back during the stop to a backend that did not flush is no longer in memory"),
        }
    }
    for b in state.cache.dirty_data() {
        put(b);
    }
    out
}

/// Saves `blocks` in `file`, written into the space `reserve` held (its file renamed and
/// overwritten in place, so a write-back still running cannot take that space between a
/// release and the write), and returns the error that names them and the file.
fn keep(
    state: &NodeState,
    file: &Path,
    reserve: &reserve::Reserve,
    blocks: &[cache::DirtyBlock],
    why: String,
) -> std::io::Result<()> {
    tracing::info!(
        bytes = reserve.size(),
        "recovery reserve used for the recovery file"
    );
    let kept = state
        .cache
        .keep_recovery_in(file, blocks, Some(reserve.path()));
    // Whatever is left of the reserve (none, once it became the file) is given back.
    reserve.release();
    kept.map_err(|e| {
        std::io::Error::other(format!(
            "{} dirty block(s) could not be written back ({why}) nor kept in {}: {e}",
            blocks.len(),
            file.display()
        ))
    })?;
    tracing::error!(blocks = blocks.len(), file = %file.display(), "dirty blocks kept for the next start");
    Err(std::io::Error::other(format!(
        "{} dirty block(s) could not be written back ({why}); kept in {}, replayed at the next start",
        blocks.len(),
        file.display()
    )))
}

/// At start, before any client is served: write the blocks a previous stop kept in
/// `file` through the caches. Blocks that went to a cache with a durable write log are
/// in that log now and leave the file; the rest stay pending with the cache node, which
/// drops each export's blocks from the file once a flush of the export succeeds (tried
/// here first, for every export the file names). See [`cache::recovery`] for why this
/// consumes the file exactly once.
fn replay_recovery(state: &NodeState, file: &Path) -> Result<(), NodeError> {
    if !file.exists() {
        return Ok(());
    }
    let at = |msg: String| NodeError::Config {
        file: file.display().to_string(),
        msg,
    };
    let blocks = cache::recovery::read(file).map_err(|e| at(e.to_string()))?;
    let total = blocks.len();
    let mut kept = Vec::new();
    for b in blocks {
        state
            .cache
            .write(&b.export, "recovery", b.offset, &b.data, false)
            .map_err(|e| {
                at(format!(
                    "replaying a block of `{}` at {}: {e}",
                    b.export, b.offset
                ))
            })?;
        let logged = state
            .cache
            .logged(&b.export, "recovery", b.offset, b.data.len() as u64)
            .unwrap_or(false);
        if !logged {
            kept.push(b);
        }
    }
    if kept.is_empty() {
        cache::recovery::remove(file).map_err(|e| at(e.to_string()))?;
        tracing::info!(blocks = total, file = %file.display(), "replayed the recovery file into the write logs");
        return Ok(());
    }
    if kept.len() < total {
        cache::recovery::write(file, &kept).map_err(|e| at(e.to_string()))?;
    }
    let exports: std::collections::BTreeSet<String> =
        kept.iter().map(|b| b.export.clone()).collect();
    state
        .cache
        .adopt_recovery(cache::recovery::Pending::new(file.to_path_buf(), kept));
    for e in &exports {
        if let Err(err) = state.cache.flush(e) {
            tracing::warn!(export = %e, %err, "the backend refuses the replayed blocks; they stay dirty in the cache");
        }
    }
    let left = state.cache.pending_recovery().len();
    if left == 0 {
        tracing::info!(blocks = total, file = %file.display(), "replayed the recovery file");
    } else {
        tracing::warn!(blocks = total, left, file = %file.display(), "replayed the recovery file into the caches; the file keeps the blocks the backends still refuse until a flush succeeds");
    }
    Ok(())
}

/// Loads `path` (with `data_dir` overriding the file's) and starts the node.
pub async fn start_file(path: &Path, data_dir: Option<&Path>) -> Result<RunningNode, NodeError> {
    let cfg = NodeConfig::load(path, data_dir)?;
    start(&cfg).await
}
