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
//! | [`mod@build`] | the state built from the configuration: backends, hot tiers, caches, rules |
//! | [`images`] | image files opened or created, and listed with their sizes |
//! | [`recovery`] | dirty blocks written back or kept at a stop, and replayed at the next start |
//! | [`error`] | the node's error |
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
//! | [`risk`] | dirty blocks neither the backend nor the data directory can take: writes refused, the stop waits |
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
//! When dirty blocks can be neither written back nor kept (a failing backend and no room
//! in the data directory), the node stays up refusing writes to their exports and the
//! stop waits, serving reads, until they can, or until a second signal or
//! `--discard-dirty` ([`risk`]).

pub mod api;
pub mod auth;
pub mod bandwidth;
pub mod build;
pub mod config;
pub mod demote;
pub mod error;
pub mod export;
pub mod hot_tier;
pub mod images;
pub mod latency;
pub mod metrics;
pub mod observe;
pub mod page;
pub mod recovery;
pub mod register;
pub mod replay;
pub mod reserve;
pub mod risk;
pub mod state;
pub use units;
pub mod upstream;

pub use build::build;
pub use error::NodeError;
pub use images::IMAGES_FILE;
pub use recovery::{StopError, RECOVERY_FILE, STOP_WRITERS};
pub use risk::Stop;

use crate::config::NodeConfig;
use crate::recovery::{replay_recovery, write_back_or_keep};
use crate::state::ControlPlane;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

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
    pub state: Arc<ControlPlane>,
    /// Where NBD clients connect.
    pub nbd_addr: SocketAddr,
    /// Where the HTTP API listens.
    pub api_addr: SocketAddr,
    /// The API's bearer token and the file holding it.
    pub api_token: Arc<::api::auth::Token>,
    stop: Stopper,
    task: JoinHandle<std::io::Result<()>>,
}

/// Asks a running node to stop ([`Stopper::stop`], a first signal) or to stop even if
/// acknowledged dirty blocks must be dropped ([`Stopper::discard`], a second signal).
#[derive(Clone)]
pub struct Stopper(Arc<watch::Sender<Stop>>);

impl Stopper {
    /// Stop: write every dirty block back or keep it; wait while neither can be done
    /// ([`risk`]).
    pub fn stop(&self) {
        self.0.send_if_modified(|s| {
            let was = *s;
            if was == Stop::Serve {
                *s = Stop::Stop;
            }
            was == Stop::Serve
        });
    }

    /// Stop without waiting for dirty blocks that can be neither written back nor kept:
    /// they are dropped, and the stop fails naming how many.
    pub fn discard(&self) {
        self.0.send_replace(Stop::Discard);
    }
}

impl RunningNode {
    /// Stops accepting, drains in-flight requests, writes dirty blocks back and returns.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        self.stop.stop();
        self.wait().await
    }

    /// Waits until the node stops (after [`RunningNode::shutdown`] or a fatal error).
    pub async fn wait(&mut self) -> std::io::Result<()> {
        (&mut self.task).await.map_err(std::io::Error::other)?
    }

    /// A handle that stops the node when used.
    pub fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    /// Runs until SIGINT or SIGTERM, then stops (see [`Stopper::stop`]); a second signal
    /// while the stop waits for dirty blocks at risk ends the wait ([`Stopper::discard`]).
    /// `said` is told each step ([`Stop::Stop`], [`Stop::Discard`]), for the operator.
    pub async fn run_until_signalled(mut self, said: impl Fn(Stop)) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            res = self.wait() => return res,
        }
        said(Stop::Stop);
        self.stop.stop();
        tokio::select! {
            res = self.wait() => return res,
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        said(Stop::Discard);
        self.stop.discard();
        self.wait().await
    }
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
    let api_token = Arc::new(auth::load(cfg)?);
    let server = nbd::ServerConfig {
        busy_poll: cfg.node.busy_poll,
        max_connections: cfg.node.max_connections,
        idle_timeout: (!cfg.node.idle_timeout.is_zero()).then_some(cfg.node.idle_timeout),
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
    let state = build::build_named(
        cfg,
        Some(register::default_name(api_addr)),
        Some(nbd_limits.clone()),
    )
    .await?;
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
    let reserve = Arc::new(reserve);
    cache::CacheNode::spawn_cleaner(state.cache_node(), std::time::Duration::from_millis(100))?;
    risk::spawn_monitor(&state, reserve.clone())?;
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
            every: cfg.node.heartbeat,
        }),
        None => None,
    };
    let (stop_tx, stop_rx) = watch::channel(Stop::Serve);
    let stopper = Stopper(Arc::new(stop_tx));
    let stop_timeout = cfg.node.stop_timeout;
    let discard_dirty = cfg.node.discard_dirty;
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
        // The stop's deadline runs from the moment it goes on (writes are refused from
        // the moment it is asked; while dirty blocks are at risk it waits first, serving
        // reads); every step of the stop (draining requests, the write-back) ends by it.
        let (asked_tx, asked_rx) = oneshot::channel::<std::time::Instant>();
        let (waiting_state, waiting_reserve) = (st.clone(), reserve.clone());
        let mut waiting_rx = stop_rx.clone();
        let mut serving = tokio::spawn(
            nbd::Server::builder()
                .config(server)
                .limits(nbd_limits)
                .tls(tls)
                .build(nbd_listener, provider)
                .serve(async move {
                    let _ = waiting_rx.wait_for(|s| *s != Stop::Serve).await;
                    waiting_state.risk().set_stopping();
                    risk::wait_while_at_risk(
                        &waiting_state,
                        &waiting_reserve,
                        &mut waiting_rx,
                        discard_dirty,
                    )
                    .await;
                    let _ = asked_tx.send(std::time::Instant::now());
                }),
        );
        let joined = |res: Result<std::io::Result<()>, tokio::task::JoinError>| {
            res.map_err(std::io::Error::other)?
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
        let _ = reg_stop_tx.send(());
        if let Some(mut b) = beating {
            if tokio::time::timeout_at(until, &mut b).await.is_err() {
                b.abort();
            }
        }
        // Write every dirty block back before the process may exit; what cannot be
        // written by the deadline is kept in the recovery file and the node stops with
        // an error. What can be neither is retried (the API still answers /healthz)
        // unless the operator said to drop it.
        let kept = stop_writing_back(
            &st,
            &recovery_file,
            &reserve,
            stop_rx,
            deadline,
            stop_timeout,
            discard_dirty,
        )
        .await;
        let _ = api_stop_tx.send(());
        let mut api = api;
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        if tokio::time::timeout_at(until, &mut api).await.is_err() {
            api.abort();
        }
        kept.map_err(std::io::Error::other)?;
        served
    });
    tracing::info!(%nbd_addr, %api_addr, "node serving");
    Ok(RunningNode {
        state,
        nbd_addr,
        api_addr,
        api_token,
        stop: stopper,
        task,
    })
}

/// The stop's write-back ([`write_back_or_keep`], by `deadline`); while its blocks can be
/// neither written back nor kept, tried again every [`risk::CHECK_EVERY`] (each time with
/// a new `timeout`), their exports shown at risk, unless `discard` or a second signal says
/// to drop them.
async fn stop_writing_back(
    state: &Arc<ControlPlane>,
    file: &Path,
    reserve: &Arc<reserve::Reserve>,
    mut stop: watch::Receiver<Stop>,
    mut deadline: std::time::Instant,
    timeout: std::time::Duration,
    discard: bool,
) -> Result<(), StopError> {
    loop {
        let (st, f, r) = (state.clone(), file.to_path_buf(), reserve.clone());
        let res =
            tokio::task::spawn_blocking(move || write_back_or_keep(&st, &f, &r, deadline, timeout))
                .await
                .map_err(std::io::Error::other)?;
        let Err(StopError::NotKept {
            blocks,
            why,
            file,
            source,
        }) = res
        else {
            state.risk().set(None);
            return res;
        };
        let dropped = discard || *stop.borrow() == Stop::Discard;
        let err = StopError::NotKept {
            blocks,
            why: why.clone(),
            file: file.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        };
        if dropped {
            tracing::error!(blocks, %err, "dropping acknowledged dirty blocks at the operator's request");
            return Err(StopError::NotKept {
                blocks,
                why: format!(
                    "{why}; dropped at the operator's request (--discard-dirty or a second signal)"
                ),
                file,
                source,
            });
        }
        tracing::error!(blocks, %err, "the stop waits: the dirty blocks exist nowhere else; retrying");
        state.risk().set(Some(risk::AtRisk {
            exports: state.exports().map(|e| e.name.clone()).collect(),
            blocks,
            backend_error: why,
            room_error: source.to_string(),
            disk_full: source.kind() == std::io::ErrorKind::StorageFull,
        }));
        tokio::select! {
            _ = tokio::time::sleep(risk::CHECK_EVERY) => {}
            Ok(_) = stop.wait_for(|s| *s == Stop::Discard) => {}
        }
        deadline = std::time::Instant::now() + timeout;
    }
}

/// Loads `path` (with `data_dir` overriding the file's) and starts the node.
pub async fn start_file(path: &Path, data_dir: Option<&Path>) -> Result<RunningNode, NodeError> {
    let cfg = NodeConfig::load(path, data_dir)?;
    start(&cfg).await
}
