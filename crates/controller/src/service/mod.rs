//! The live loop and the state behind the API.
//!
//! [`Service`] holds the tenants, the node registry, the `control` state and what the last
//! intervals measured. [`Service::tick`] (in `interval.rs`) is one enforcement interval:
//! 1. poll every known node's `/v1/observations` and `/healthz` ([`crate::poll`]; a node
//!    failing `down_after` polls in a row is marked down and planned at capacity 0; a
//!    volume over a node down or reporting its export's upstream away is shown failing in
//!    its row);
//! 2. turn the cumulative counters into the interval's deltas and `control::Observations`
//!    ([`crate::observe`]), once [`crate::counters`] believes them (a node whose counters
//!    go backwards or jump beyond what the interval allows is suspect, and planned at its
//!    last good interval), the volumes placed on the nodes by [`crate::placement`];
//! 3. call `control::Controller::step` (resumed from the persisted state: the same code the
//!    simulator runs);
//! 4. reconcile every node that is up to the plan ([`crate::reconcile`]), all nodes at
//!    once, reading caches and rules back first, so re-applying a plan changes nothing,
//!    and removing the caches no plan wants (a deleted tenant's);
//! 5. persist the state and append the decisions, with their numbers and reasons, to the
//!    history ([`crate::views::report`] makes the interval's rows).
//!
//! Changes through the API (tenants, SLOs, in `changes.rs`) are checked against the whole
//! configuration (references, numbers, and `control::Topology::validate`) before anything
//! is written; a rejected change writes nothing and touches no node. Accepted changes are
//! written in one store batch and take effect at the next interval.
//!
//! The `control` state is keyed by volume and node name (`control`'s state version 2), so
//! it is handed to the step as it is whatever changed since the last interval: a volume
//! added or deleted, a node registered, gone down (capacity 0) or back. `control` matches
//! it to the new topology by name, keeps every other volume's history (latency samples,
//! curves, policy choice) and hysteresis, and re-plans at once only the nodes whose
//! capacity or volumes changed. Views that name a volume ([`Service::explain`], the
//! console's curves) find it by name in the last observations ([`crate::views`]).

mod changes;
mod interval;

use crate::config::{ControllerConfig, ControllerSection, TenantConfig};
use crate::counters::Judge;
use crate::etcd::{Election, LeaderView};
use crate::observe::Deltas;
use crate::registry::NodeEntry;
use crate::store::{self, get_json, HistoryEntry, Store};
use crate::views::View;
use control::{ControlState, Plan, Scheme};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::error::ServiceError;
pub use crate::placement::{topology, PlacedVolume};
pub use crate::views::{IntervalReport, Row, TenantView};

struct Inner {
    tenants: Vec<TenantConfig>,
    nodes: BTreeMap<String, NodeEntry>,
    state: ControlState,
    /// The `control` controller of the last interval, kept while the topology stays the
    /// same (its state is `state`): checked and fitted again only when the topology
    /// changes, not every interval.
    control: Option<control::Controller>,
    deltas: Deltas,
    /// Whether each node's counters are believed, and its last good interval.
    judge: Judge,
    last_poll: Option<Instant>,
    plan: Option<Plan>,
    /// The last interval's observations, with the volume each one is of.
    last_obs: Option<(Vec<String>, control::Observations)>,
    series: VecDeque<IntervalReport>,
    /// Whether this replica led at the last loop round.
    was_leading: bool,
    /// Per node, what its last complete reconcile applied
    /// ([`crate::reconcile::Reconciled`]): a node whose part of the plan has not changed
    /// since is not called again until its turn to be checked comes.
    reconciled: HashMap<String, crate::reconcile::Reconciled>,
}

/// The controller service.
pub struct Service {
    cfg: ControllerSection,
    scheme: Scheme,
    store: Arc<dyn Store>,
    inner: Mutex<Inner>,
    started: Instant,
    /// Node tokens read from the configuration's `token_file`s.
    config_tokens: HashMap<String, String>,
    /// The whole configuration (nodes and tenants to fall back on when reloading).
    config: ControllerConfig,
    /// Leader election among replicas (`None`: a sole controller).
    election: Option<Arc<Election>>,
    /// Each node's client, kept between intervals so its connections are reused (rebuilt
    /// when the node's address or token changes).
    clients: Mutex<HashMap<String, CachedClient>>,
    /// The decision history, written behind the intervals.
    history: crate::history::HistoryWriter,
}

/// A node's client with the address and token it was made for.
struct CachedClient {
    api: String,
    token: String,
    client: api::client::NodeClient,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Service {
    /// Opens the service: state from the store if it has any, else from the configuration.
    pub fn open(
        cfg: &ControllerConfig,
        store: Arc<dyn Store>,
    ) -> Result<Arc<Service>, ServiceError> {
        Self::open_replica(cfg, store, None)
    }

    /// Opens one replica of a replicated controller: it polls and programs nodes, and
    /// accepts changes, only while `election` says it leads (see [`crate::etcd`]); until
    /// then it answers the read API from the store. `None` is a sole controller.
    pub fn open_replica(
        cfg: &ControllerConfig,
        store: Arc<dyn Store>,
        election: Option<Arc<Election>>,
    ) -> Result<Arc<Service>, ServiceError> {
        let mut scheme = Scheme::named(&cfg.controller.scheme)
            .map_err(|e| ServiceError::BadRequest(format!("controller.scheme: {e}")))?;
        cfg.controller.bandwidth.apply_to(&mut scheme);
        if let Some(b) = cfg.controller.boost {
            scheme.boost = b;
        }
        match cfg.controller.policy_choice {
            Some(true) if scheme.policy_choice.is_none() => {
                scheme.policy_choice = Some(Default::default());
            }
            Some(false) => scheme.policy_choice = None,
            _ => {}
        }
        let config_tokens = config_tokens(cfg)?;
        let loaded = load(cfg, &*store)?;
        let history = crate::history::HistoryWriter::start(store.clone())
            .map_err(|e| ServiceError::Internal(format!("the history writer: {e}")))?;
        let svc = Service {
            cfg: cfg.controller.clone(),
            config: cfg.clone(),
            scheme,
            store,
            inner: Mutex::new(Inner {
                tenants: loaded.tenants,
                nodes: loaded.nodes,
                state: loaded.state,
                control: None,
                deltas: Deltas::default(),
                judge: Judge::default(),
                last_poll: None,
                plan: loaded.plan,
                last_obs: None,
                series: VecDeque::new(),
                was_leading: false,
                reconciled: HashMap::new(),
            }),
            clients: Mutex::new(HashMap::new()),
            history,
            started: Instant::now(),
            config_tokens,
            election,
        };
        if svc.election.is_none() {
            svc.persist_config()?;
        }
        Ok(Arc::new(svc))
    }

    /// Whether this replica leads (a sole controller always does).
    pub fn leading(&self) -> bool {
        self.election.as_ref().map_or(true, |e| e.leading())
    }

    /// Who leads, as this replica sees it (`None`: a sole controller).
    pub fn leader_view(&self) -> Option<LeaderView> {
        self.election.as_ref().map(|e| e.view())
    }

    fn must_lead(&self) -> Result<(), ServiceError> {
        if self.leading() {
            return Ok(());
        }
        let v = self.leader_view().unwrap_or_default();
        Err(ServiceError::Conflict(format!(
            "replica `{}` is a standby: send changes to the leader ({})",
            v.me,
            match (v.leader, v.leader_api) {
                (Some(id), Some(api)) => format!("`{id}` at {api}"),
                _ => "none yet: retry".into(),
            }
        )))
    }

    /// Reloads tenants, nodes, the `control` state and the last plan from the store: a
    /// replica that starts leading takes over exactly what the previous leader committed,
    /// and a standby keeps its read API current.
    pub fn reload(&self) -> Result<(), ServiceError> {
        let loaded = load(&self.config, &*self.store)?;
        let mut g = self.lock();
        g.tenants = loaded.tenants;
        g.nodes = loaded.nodes;
        g.state = loaded.state;
        g.control = None;
        g.plan = loaded.plan;
        g.deltas = Deltas::default();
        g.judge = Judge::default();
        g.last_poll = None;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The configuration section in force.
    pub fn config(&self) -> &ControllerSection {
        &self.cfg
    }

    /// The scheme's name.
    pub fn scheme_name(&self) -> &str {
        &self.scheme.name
    }

    /// The store's description.
    pub fn store_description(&self) -> String {
        self.store.describe()
    }

    fn persist_config(&self) -> Result<(), ServiceError> {
        let g = self.lock();
        let nodes: Vec<&NodeEntry> = g.nodes.values().collect();
        self.store.put(&[
            (store::TENANTS, Some(to_json(&g.tenants))),
            (store::NODES, Some(to_json(&nodes))),
        ])?;
        Ok(())
    }

    /// The interval length.
    pub fn interval(&self) -> Duration {
        self.cfg.interval
    }

    // ----- views -----

    fn view<'a>(&'a self, g: &'a Inner) -> View<'a> {
        View {
            tenants: &g.tenants,
            plan: g.plan.as_ref(),
            last: g.series.back(),
            last_obs: g.last_obs.as_ref(),
            scheme: &self.scheme.name,
            block_size: self.cfg.block_size.0,
        }
    }

    /// The tenants with their last status.
    pub fn tenants(&self) -> Vec<TenantView> {
        self.view(&self.lock()).tenants()
    }

    /// One tenant.
    pub fn tenant(&self, name: &str) -> Result<TenantView, ServiceError> {
        self.tenants()
            .into_iter()
            .find(|t| t.spec.name == name)
            .ok_or_else(|| ServiceError::NotFound(format!("unknown tenant `{name}`")))
    }

    /// The node registry (tokens left out).
    pub fn nodes(&self) -> Vec<NodeEntry> {
        self.lock().nodes.values().map(NodeEntry::public).collect()
    }

    /// The `control` state carried to the next interval.
    pub fn control_state(&self) -> ControlState {
        self.lock().state.clone()
    }

    /// The last plan.
    pub fn plan(&self) -> Option<Plan> {
        self.lock().plan.clone()
    }

    /// The intervals kept in memory, oldest first.
    pub fn series(&self) -> Vec<IntervalReport> {
        self.lock().series.iter().cloned().collect()
    }

    /// The last interval.
    pub fn last(&self) -> Option<IntervalReport> {
        self.lock().series.back().cloned()
    }

    /// Decisions kept in the store.
    pub fn history(
        &self,
        tenant: Option<&str>,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, ServiceError> {
        let tenants = self.lock().tenants.clone();
        self.history.flush()?;
        crate::views::history(&*self.store, &tenants, tenant, limit)
    }

    /// Why a tenant's volumes have the sizes they have: the plan's numbers and reasons,
    /// what was measured, its curve and its shortfall.
    pub fn explain(
        &self,
        name: &str,
    ) -> Result<api::controller::Explanation<control::Slo>, ServiceError> {
        let g = self.lock();
        let topo = self.topology_of(&g);
        self.view(&g).explain(name, &topo)
    }

    /// Per volume, its curves (bytes, miss ratio) and the planned total size, for the
    /// console.
    pub fn curves(&self) -> BTreeMap<String, api::controller::VolumeCurves> {
        self.view(&self.lock()).curves()
    }

    /// The last plan in the contract's form (nodes and volumes by name).
    pub fn plan_view(&self) -> Option<api::controller::PlanView> {
        let g = self.lock();
        let plan = g.plan.as_ref()?;
        let mut v = crate::wire::plan_view(&self.topology_of(&g), plan);
        // The consolidated caches as their servers held them after the last reconcile.
        if let Some(last) = g.series.back().filter(|r| r.interval == plan.interval) {
            for c in &mut v.consolidated {
                c.applied = last
                    .consolidated
                    .iter()
                    .find(|r| r.image == c.image && r.server == c.server)
                    .map(|r| r.applied);
            }
        }
        Some(v)
    }

    /// What `GET /v1/status` answers.
    pub fn status(&self) -> api::controller::Status {
        api::controller::Status {
            scheme: self.scheme_name().to_string(),
            store: self.store_description(),
            interval_secs: self.cfg.interval.as_secs_f64(),
            leading: self.leading(),
            replica: self.leader_view(),
            last: self.last(),
        }
    }

    /// The topology the last plan was made on (the controller's, while it is kept), else
    /// the one of the tenants and nodes now.
    fn topology_of(&self, g: &Inner) -> control::Topology {
        match &g.control {
            Some(c) => c.topology().clone(),
            None => topology(&self.cfg, &g.tenants, &g.nodes, false).0,
        }
    }
}

/// What the store holds, or the configuration where it holds nothing yet.
struct Loaded {
    tenants: Vec<TenantConfig>,
    nodes: BTreeMap<String, NodeEntry>,
    state: ControlState,
    plan: Option<Plan>,
}

fn load(cfg: &ControllerConfig, store: &dyn Store) -> Result<Loaded, ServiceError> {
    let tenants: Vec<TenantConfig> =
        get_json(store, store::TENANTS)?.unwrap_or_else(|| cfg.tenants.clone());
    let saved: Vec<NodeEntry> = get_json(store, store::NODES)?.unwrap_or_default();
    let mut nodes: BTreeMap<String, NodeEntry> =
        saved.into_iter().map(|n| (n.name.clone(), n)).collect();
    for n in &cfg.nodes {
        let e = nodes.entry(n.name.clone()).or_insert_with(|| NodeEntry {
            name: n.name.clone(),
            level: n.level,
            block_size: cfg.controller.block_size.0,
            ..Default::default()
        });
        e.level = n.level;
        if let Some(a) = &n.api {
            e.api = Some(a.clone());
        }
        if let Some(s) = n.cache_size {
            e.cache_size = s.0;
        }
        // Configured nodes start up until polls say otherwise.
        if e.api.is_some() {
            e.up = true;
        }
    }
    Ok(Loaded {
        tenants,
        nodes,
        state: get_json(store, store::STATE)?.unwrap_or_default(),
        plan: get_json(store, "plan")?,
    })
}

/// Node tokens read from the configuration's `token_file`s.
fn config_tokens(cfg: &ControllerConfig) -> Result<HashMap<String, String>, ServiceError> {
    let mut out = HashMap::new();
    for n in &cfg.nodes {
        if let Some(f) = &n.token_file {
            let path = cfg.controller.data_dir.join(f);
            let t = std::fs::read_to_string(&path).map_err(|e| {
                ServiceError::BadRequest(format!(
                    "node \"{}\".token_file: {}: {e}",
                    n.name,
                    path.display()
                ))
            })?;
            out.insert(n.name.clone(), t.trim().to_string());
        }
    }
    Ok(out)
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serialises")
}
