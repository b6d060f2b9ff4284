//! # controller
//!
//! The live controller of Lachesis: it owns a set of running cache nodes (level 1 and
//! level 2), holds tenants, volumes and SLOs, and every interval gathers what the nodes
//! observed, calls the `control` step (the code the simulator runs) and reconciles each
//! node's caches and rules to the plan. Decisions are kept as history with their numbers
//! and reasons; an HTTP API and a console show them.
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | `controller.toml`: listener, interval, scheme, nodes, tenants, volumes, SLOs, shared read-only images |
//! | [`store`] | persistence: the [`store::Store`] trait, embedded SQLite |
//! | [`etcd`] | the same state in etcd, and leader election among replicas |
//! | [`registry`] | nodes: registration, heartbeat, health, epochs (bodies from the `api` crate) |
//! | [`observe`] | nodes' cumulative observations (`api::node`) to one interval's `control::Observations` |
//! | [`bandwidth`] | `[controller.bandwidth]`: the bandwidth scheme (static shares, one level of learners, uncoordinated or coordinated learners) and each node's proportions from the plan |
//! | [`scaleout`] | Moirai's scale-out: a volume's planned total split over its host and servers as one global LRU (`alloc::scaleout`), after the step |
//! | [`consolidate`] | Moirai's consolidated cache: one read-only cache per shared image per server, sized on the image's own curve after the step, its readers' level-2 partitions set to 0 |
//! | [`counters`] | whether a node's counters can be believed (monotonic, bounded by the interval); suspect nodes planned at their last good interval |
//! | [`private`] | the modes of its files at rest (store, token: 0600; their directory: 0700) |
//! | [`reconcile`] | a node's actual caches and rules made to match the plan (through `api::client::NodeClient`) |
//! | [`service`] | the state behind the API, changes through it, and the interval's steps in order |
//! | [`placement`] | the tenants' volumes placed on the known nodes: the `control` topology |
//! | [`poll`] | asking every node for its counters and health; what the answers say, into the registry |
//! | [`views`] | what the API and console show: the interval's report, tenants, explanations, curves, history |
//! | [`wire`] | the plan, shortfalls and nodes in the contract's form (`api::controller`: by name) |
//! | [`error`] | the service's error (one HTTP status per variant) |
//! | [`fanout`] | one blocking call per node on a bounded number of threads (polls, reconciles) |
//! | [`api`], [`auth`], [`console`] | HTTP: JSON verbs, bearer token, operator's page |
//!
//! [`start`] opens the store's state, binds the API and runs the loop until stopped.

pub mod api;
pub mod auth;
pub mod bandwidth;
pub mod config;
pub mod console;
pub mod consolidate;
pub mod counters;
pub mod error;
pub mod etcd;
pub mod fanout;
pub mod history;
pub mod observe;
pub mod placement;
pub mod poll;
pub mod private;
pub mod reconcile;
pub mod registry;
pub mod scaleout;
pub mod service;
pub mod store;
pub mod views;
pub mod wire;

use std::net::SocketAddr;
use std::sync::Arc;

pub use config::ControllerConfig;
pub use service::{IntervalReport, Row, Service, ServiceError};
pub use store::{SqliteStore, Store};

/// A running controller.
pub struct RunningController {
    /// The service (for in-process use: ticks, views).
    pub service: Arc<service::Service>,
    /// Where the API and console listen.
    pub addr: SocketAddr,
    /// The API token.
    pub token: Arc<::api::auth::Token>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningController {
    /// The console's address with the token in its fragment.
    pub fn console_url(&self) -> String {
        format!("http://{}/#token={}", self.addr, self.token.secret())
    }

    /// Ends every task at once without a word to anyone (no lease revoked, no answer
    /// finished): what a crash looks like to the other replicas and the nodes. For tests.
    pub async fn abort(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }

    /// Stops the loop and the API (a leading replica hands over its lease).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// An error starting the controller.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Configuration or stored state.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Listener or token file.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// An API reachable from other machines with a token nobody chose.
    #[error("{0}")]
    Exposure(String),
}

/// Refuses an API bound to an address other machines can reach (`bound` not loopback)
/// unless `[controller] token_file` names a token the operator manages, as a node
/// refuses the same: a generated token sits in the data directory, and an API reachable
/// by anyone must not depend on a file nobody chose or distributed.
pub fn check_exposure(cfg: &ControllerConfig, bound: SocketAddr) -> Result<(), StartError> {
    if bound.ip().is_loopback() || cfg.controller.token_file.is_some() {
        return Ok(());
    }
    Err(StartError::Exposure(format!(
        "controller.listen = \"{}\" is reachable from other machines ({bound}); set \
         controller.token_file to a token file you manage, or listen on 127.0.0.1",
        cfg.controller.listen
    )))
}

/// Starts the API and, if `run_loop`, the interval loop (a caller that steps the service
/// itself, as the demo's benchmark does, passes `false`).
pub async fn start(
    cfg: &ControllerConfig,
    store: Arc<dyn Store>,
    run_loop: bool,
) -> Result<RunningController, StartError> {
    start_replica(cfg, store, run_loop, None).await
}

/// [`start`] for one replica of a replicated controller: with an `election` it also runs
/// the election (publishing this replica's API address) and leads only while it holds the
/// lease (see [`etcd`]).
pub async fn start_replica(
    cfg: &ControllerConfig,
    store: Arc<dyn Store>,
    run_loop: bool,
    election: Option<Arc<etcd::Election>>,
) -> Result<RunningController, StartError> {
    let listener = tokio::net::TcpListener::bind(&cfg.controller.listen)
        .await
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("controller.listen {}: {e}", cfg.controller.listen),
            )
        })?;
    let addr = listener.local_addr()?;
    check_exposure(cfg, addr)?;
    // Nothing is written (no token generated, no state stored) before the check.
    let token = Arc::new(auth::load(
        cfg.controller.token_file.as_deref(),
        &cfg.controller.data_dir,
    )?);
    let svc = Service::open_replica(cfg, store, election.clone())?;
    let (stop, rx) = tokio::sync::watch::channel(false);
    let app = api::router(svc.clone(), token.clone());
    let mut api_rx = rx.clone();
    let mut tasks = vec![tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = api_rx.changed().await;
            })
            .await;
    })];
    if let Some(e) = election {
        tasks.push(tokio::spawn(e.run(format!("http://{addr}"), rx.clone())));
    }
    if run_loop {
        tasks.push(tokio::spawn(svc.clone().run(rx)));
    }
    tracing::info!(%addr, store = %svc.store_description(), scheme = %svc.scheme_name(), "controller serving");
    Ok(RunningController {
        service: svc,
        addr,
        token,
        stop,
        tasks,
    })
}
