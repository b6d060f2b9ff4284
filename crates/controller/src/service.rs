//! The live loop and the state behind the API.
//!
//! [`Service`] holds the tenants, the node registry, the `control` state and what the last
//! intervals measured. [`Service::tick`] is one enforcement interval:
//! 1. poll every known node's `/v1/observations` and `/healthz` (a node failing
//!    `down_after` polls in a row is marked down and planned at capacity 0; a volume over
//!    a node down or reporting its export's upstream away is shown failing in its row);
//! 2. turn the cumulative counters into the interval's deltas and `control::Observations`
//!    ([`crate::observe`]), once [`crate::counters`] believes them (a node whose counters
//!    go backwards or jump beyond what the interval allows is suspect, and planned at its
//!    last good interval);
//! 3. call `control::Controller::step` (resumed from the persisted state: the same code the
//!    simulator runs);
//! 4. reconcile every node that is up to the plan ([`crate::reconcile`]), all nodes at
//!    once, reading caches and rules back first, so re-applying a plan changes nothing,
//!    and removing the caches no plan wants (a deleted tenant's);
//! 5. persist the state and append the decisions, with their numbers and reasons, to the
//!    history.
//!
//! Changes through the API (tenants, SLOs) are checked against the whole configuration
//! (references, numbers, and `control::Topology::validate`) before anything is written;
//! a rejected change writes nothing and touches no node. Accepted changes are written in
//! one store batch and take effect at the next interval.
//!
//! The `control` state is keyed by volume and node name (`control`'s state version 2), so
//! it is handed to the step as it is whatever changed since the last interval: a volume
//! added or deleted, a node registered, gone down (capacity 0) or back. `control` matches
//! it to the new topology by name, keeps every other volume's history (latency samples,
//! curves, policy choice) and hysteresis, and re-plans at once only the nodes whose
//! capacity or volumes changed. Views that name a volume ([`Service::explain`], the
//! console's curves) find it by name in the last observations.

use crate::config::{check_tenants, ControllerConfig, ControllerSection, TenantSpec};
use crate::counters::{Judge, Verdict};
use crate::etcd::{Election, LeaderView};
use crate::observe::{build, Deltas, Measured, Placement};
use crate::reconcile::{self, Action, Desired};
use crate::registry::{Heartbeat, NodeEntry, Registration};
use crate::store::{self, get_json, HistoryEntry, Store, StoreError};
use api::client::{CallError, NodeClient};
use control::{
    ControlState, Controller, Levels, Node, Plan, Scheme, ServiceTimes, Slo, Tenant, Topology,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Intervals kept in memory for the console and the demo.
const SERIES: usize = 240;

/// An error of the service, mapped to an HTTP status by the API.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or its values are invalid (400).
    #[error("{0}")]
    BadRequest(String),
    /// Unknown tenant or node (404).
    #[error("{0}")]
    NotFound(String),
    /// The change conflicts with the state (409).
    #[error("{0}")]
    Conflict(String),
    /// The store failed (500).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The control step failed (500).
    #[error("control: {0}")]
    Control(String),
}

/// One volume's row of an interval: the contract's type.
pub use api::controller::Row;

/// One interval as the console and the demo show it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IntervalReport {
    /// Interval number.
    pub interval: u64,
    /// Unix seconds.
    pub time: f64,
    /// Length (s).
    pub seconds: f64,
    /// Per volume.
    pub rows: Vec<Row>,
    /// Planned sizes per node: `node -> volume -> bytes`.
    pub allocations: BTreeMap<String, BTreeMap<String, u64>>,
    /// SLOs the plan cannot meet, with the shortfall.
    pub infeasible: Vec<control::Shortfall>,
    /// What reconciling changed on the nodes.
    pub actions: Vec<Action>,
}

/// A tenant as the API shows it: its configuration and its volumes' last rows.
pub type TenantView = api::controller::TenantView<TenantSpec>;

struct Inner {
    tenants: Vec<TenantSpec>,
    nodes: BTreeMap<String, NodeEntry>,
    state: ControlState,
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
        let config_tokens = config_tokens(cfg)?;
        let loaded = load(cfg, &*store)?;
        let svc = Service {
            cfg: cfg.controller.clone(),
            config: cfg.clone(),
            scheme,
            store,
            inner: Mutex::new(Inner {
                tenants: loaded.tenants,
                nodes: loaded.nodes,
                state: loaded.state,
                deltas: Deltas::default(),
                judge: Judge::default(),
                last_poll: None,
                plan: loaded.plan,
                last_obs: None,
                series: VecDeque::new(),
                was_leading: false,
            }),
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
        Duration::from_secs_f64(self.cfg.interval_secs)
    }

    // ----- nodes -----

    /// `POST /v1/nodes/register`.
    pub fn register(&self, r: Registration) -> Result<NodeEntry, ServiceError> {
        self.must_lead()?;
        api::names::check("name", &r.name).map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        for (i, x) in r.exports.iter().enumerate() {
            api::names::check(&format!("exports[{i}].name"), &x.name)
                .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        }
        if r.level != 1 && r.level != 2 {
            return Err(ServiceError::BadRequest(format!(
                "level: {} must be 1 or 2",
                r.level
            )));
        }
        if r.block_size != self.cfg.block_size.0 {
            return Err(ServiceError::BadRequest(format!(
                "block_size: {} differs from the controller's {}",
                r.block_size, self.cfg.block_size.0
            )));
        }
        if r.token.is_empty() {
            return Err(ServiceError::BadRequest("token: must not be empty".into()));
        }
        let mut g = self.lock();
        if let Some(e) = g.nodes.get(&r.name) {
            if e.level != r.level && e.level != 0 {
                return Err(ServiceError::Conflict(format!(
                    "node `{}` is known as level {}, registration says {}",
                    r.name, e.level, r.level
                )));
            }
        }
        let e = g.nodes.entry(r.name.clone()).or_default();
        e.name = r.name.clone();
        e.register(&r, unix_now());
        let out = e.public();
        let nodes: Vec<&NodeEntry> = g.nodes.values().collect();
        self.store.put(&[(store::NODES, Some(to_json(&nodes)))])?;
        tracing::info!(node = %r.name, level = r.level, api = %r.api, epoch = %r.epoch, "node registered");
        Ok(out)
    }

    /// `POST /v1/nodes/{name}/heartbeat`; `NotFound` means "register again".
    pub fn heartbeat(&self, name: &str, hb: Heartbeat) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        let e = g
            .nodes
            .get_mut(name)
            .filter(|e| e.token.is_some() || self.config_tokens.contains_key(name))
            .ok_or_else(|| ServiceError::NotFound(format!("unknown node `{name}`: register")))?;
        if e.epoch != hb.epoch {
            // Restarted: its registration will bring exports and token; make it register.
            return Err(ServiceError::NotFound(format!(
                "node `{name}` has a new epoch: register again"
            )));
        }
        e.last_seen = unix_now();
        Ok(())
    }

    /// The node registry (tokens left out).
    pub fn nodes(&self) -> Vec<NodeEntry> {
        self.lock().nodes.values().map(NodeEntry::public).collect()
    }

    // ----- tenants -----

    fn node_levels(g: &Inner) -> Vec<(String, u8)> {
        g.nodes
            .values()
            .map(|n| (n.name.clone(), n.level))
            .collect()
    }

    /// Checks a whole tenant list as it would be after a change.
    fn check_change(&self, g: &Inner, tenants: &[TenantSpec]) -> Result<(), ServiceError> {
        check_tenants(tenants, Some(&Self::node_levels(g))).map_err(ServiceError::BadRequest)?;
        let (topo, _) = topology(&self.cfg, tenants, &g.nodes, true);
        topo.validate()
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        Ok(())
    }

    fn commit_tenants(&self, g: &mut Inner, tenants: Vec<TenantSpec>) -> Result<(), ServiceError> {
        self.store
            .put(&[(store::TENANTS, Some(to_json(&tenants)))])?;
        g.tenants = tenants;
        Ok(())
    }

    /// The tenants with their last status.
    pub fn tenants(&self) -> Vec<TenantView> {
        let g = self.lock();
        let last = g.series.back();
        g.tenants
            .iter()
            .map(|t| TenantView {
                spec: t.clone(),
                status: last
                    .map(|r| {
                        r.rows
                            .iter()
                            .filter(|row| row.owner == t.name)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// One tenant.
    pub fn tenant(&self, name: &str) -> Result<TenantView, ServiceError> {
        self.tenants()
            .into_iter()
            .find(|t| t.spec.name == name)
            .ok_or_else(|| ServiceError::NotFound(format!("unknown tenant `{name}`")))
    }

    /// Creates (`create = true`: 409 if it exists) or replaces a tenant.
    pub fn put_tenant(&self, spec: TenantSpec, create: bool) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        let mut next = g.tenants.clone();
        match next.iter_mut().find(|t| t.name == spec.name) {
            Some(_) if create => {
                return Err(ServiceError::Conflict(format!(
                    "tenant `{}` exists (PUT /v1/tenants/{} replaces it)",
                    spec.name, spec.name
                )))
            }
            Some(t) => *t = spec,
            None => next.push(spec),
        }
        self.check_change(&g, &next)?;
        self.commit_tenants(&mut g, next)
    }

    /// Removes a tenant; the next interval's reconcile removes its caches from the nodes.
    pub fn delete_tenant(&self, name: &str) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        if !g.tenants.iter().any(|t| t.name == name) {
            return Err(ServiceError::NotFound(format!("unknown tenant `{name}`")));
        }
        let next: Vec<TenantSpec> = g
            .tenants
            .iter()
            .filter(|t| t.name != name)
            .cloned()
            .collect();
        self.commit_tenants(&mut g, next)
    }

    /// Sets (or clears) a tenant's SLO and class.
    pub fn set_slo(
        &self,
        name: &str,
        slo: Option<Slo>,
        class: Option<String>,
    ) -> Result<(), ServiceError> {
        self.must_lead()?;
        let mut g = self.lock();
        let mut next = g.tenants.clone();
        let t = next
            .iter_mut()
            .find(|t| t.name == name)
            .ok_or_else(|| ServiceError::NotFound(format!("unknown tenant `{name}`")))?;
        t.slo = slo;
        if class.is_some() {
            t.class = class;
        }
        self.check_change(&g, &next)?;
        self.commit_tenants(&mut g, next)
    }

    // ----- views -----

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
        if let Some(t) = tenant {
            let g = self.lock();
            let known = g
                .tenants
                .iter()
                .any(|s| s.name == t || s.volumes.iter().any(|v| v.name == t));
            if !known {
                return Err(ServiceError::NotFound(format!("unknown tenant `{t}`")));
            }
            let vols: Vec<String> = g
                .tenants
                .iter()
                .filter(|s| s.name == t)
                .flat_map(|s| s.volumes.iter().map(|v| v.name.clone()))
                .collect();
            drop(g);
            if !vols.is_empty() && !vols.iter().any(|v| v == t) {
                let mut all = Vec::new();
                for v in vols {
                    all.extend(self.store.history(Some(&v), limit)?);
                }
                all.sort_by_key(|h| h.interval);
                let skip = all.len().saturating_sub(limit);
                return Ok(all.split_off(skip));
            }
        }
        Ok(self.store.history(tenant, limit)?)
    }

    /// Why a tenant's volumes have the sizes they have: the plan's numbers and reasons,
    /// what was measured, its curve and its shortfall.
    pub fn explain(&self, name: &str) -> Result<serde_json::Value, ServiceError> {
        let g = self.lock();
        let t = g
            .tenants
            .iter()
            .find(|t| t.name == name || t.volumes.iter().any(|v| v.name == name))
            .cloned()
            .ok_or_else(|| ServiceError::NotFound(format!("unknown tenant `{name}`")))?;
        let mut vols = Vec::new();
        for v in &t.volumes {
            let plan = g
                .plan
                .as_ref()
                .and_then(|p| p.tenants.iter().find(|tp| tp.tenant == v.name))
                .cloned();
            let row = g
                .series
                .back()
                .and_then(|r| r.rows.iter().find(|r| r.tenant == v.name))
                .cloned();
            let shortfall = g
                .plan
                .as_ref()
                .and_then(|p| p.infeasible.iter().find(|s| s.tenant == v.name))
                .cloned();
            let curves = self.curves_of(&g, &v.name);
            vols.push(serde_json::json!({
                "volume": v.name, "host": v.host, "hosts": v.hosts, "servers": v.servers,
                "plan": plan, "measured": row, "shortfall": shortfall, "curves": curves,
            }));
        }
        Ok(
            serde_json::json!({"tenant": t.name, "slo": t.slo, "class": t.class,
            "scheme": self.scheme.name, "volumes": vols}),
        )
    }

    fn curves_of(&self, g: &Inner, volume: &str) -> serde_json::Value {
        let Some((names, obs)) = &g.last_obs else {
            return serde_json::Value::Null;
        };
        let Some(i) = names.iter().position(|n| n == volume) else {
            return serde_json::Value::Null;
        };
        let bs = self.cfg.block_size.0;
        obs.tenants
            .get(i)
            .map(|o| {
                serde_json::Value::Array(
                    o.curves
                        .iter()
                        .map(|c| {
                            let pts: Vec<(u64, f64)> = c
                                .curve
                                .points()
                                .iter()
                                .map(|p| (p.cache_size * bs, p.miss_ratio))
                                .collect();
                            serde_json::json!({"policy": c.policy, "points": pts})
                        })
                        .collect(),
                )
            })
            .unwrap_or(serde_json::Value::Null)
    }

    /// Per volume, its curves (bytes, miss ratio) and the planned total size, for the
    /// console.
    pub fn curves(&self) -> serde_json::Value {
        let g = self.lock();
        let mut out = serde_json::Map::new();
        for t in &g.tenants {
            for v in &t.volumes {
                let planned = g
                    .plan
                    .as_ref()
                    .and_then(|p| p.tenants.iter().find(|tp| tp.tenant == v.name))
                    .map(|tp| (tp.l1.size + tp.l2_total()) * self.cfg.block_size.0);
                out.insert(
                    v.name.clone(),
                    serde_json::json!({"curves": self.curves_of(&g, &v.name),
                        "chosen_bytes": planned}),
                );
            }
        }
        serde_json::Value::Object(out)
    }

    // ----- the loop -----

    fn client_for(&self, e: &NodeEntry) -> Option<NodeClient> {
        let api = e.api.as_deref()?;
        let token = e
            .token
            .clone()
            .or_else(|| self.config_tokens.get(&e.name).cloned())?;
        let timeout = Duration::from_secs_f64((self.cfg.interval_secs / 2.0).clamp(0.2, 5.0));
        Some(NodeClient::new(api, Some(&token), timeout))
    }

    /// One enforcement interval (blocking: polls and programs the nodes).
    pub fn tick(&self) -> Result<IntervalReport, ServiceError> {
        self.must_lead()?;
        // 1. Poll.
        let targets: Vec<(String, Option<NodeClient>)> = {
            let g = self.lock();
            g.nodes
                .values()
                .map(|e| (e.name.clone(), self.client_for(e)))
                .collect()
        };
        // Every node at once (bounded): the poll takes the slowest answer, not the sum.
        // A node that answers is also asked whether it is healthy (`/healthz`: its
        // upstream links); a node that cannot say keeps what it said last.
        type Polled = Result<(api::node::NodeObservations, Option<api::node::Health>), String>;
        let polled: Vec<(String, Polled)> = crate::fanout::map_bounded(
            &targets,
            crate::fanout::MAX_CONCURRENT_NODE_CALLS,
            |(name, c)| {
                let r = match c {
                    Some(c) => c
                        .observations()
                        .map(|o| (o, c.health().ok()))
                        .map_err(|e| e.to_string()),
                    None => Err("no API address or token yet (not registered)".into()),
                };
                (name.clone(), r)
            },
        );
        let now = unix_now();
        let mut g = self.lock();
        let seconds = g
            .last_poll
            .map(|t| t.elapsed().as_secs_f64())
            .unwrap_or(self.cfg.interval_secs)
            .max(1e-3);
        g.last_poll = Some(Instant::now());
        let mut by_node = HashMap::new();
        for (name, r) in polled {
            match r {
                Ok((o, health)) => {
                    let inner = &mut *g;
                    let (d, verdict) =
                        inner
                            .judge
                            .judge(&mut inner.deltas, &name, &o, Instant::now());
                    if let Some(e) = g.nodes.get_mut(&name) {
                        if o.block_size != 0 && o.block_size != self.cfg.block_size.0 {
                            e.failed(
                                &format!(
                                    "block size {} differs from the controller's",
                                    o.block_size
                                ),
                                self.cfg.down_after,
                            );
                            continue;
                        }
                        e.answered(&o.epoch, o.cache_size, now);
                        note_verdict(e, verdict);
                        if let Some(h) = health {
                            note_health(e, h);
                        }
                    }
                    by_node.insert(name, d);
                }
                Err(err) => {
                    g.deltas.forget(&name);
                    g.judge.forget(&name);
                    let down = self.cfg.down_after;
                    if let Some(e) = g.nodes.get_mut(&name) {
                        if e.failed(&err, down) {
                            tracing::warn!(node = %name, %err, "node marked down");
                        }
                    }
                }
            }
        }
        // 2. Observations and 3. the step.
        let (topo, vols) = topology(&self.cfg, &g.tenants, &g.nodes, false);
        let placements: Vec<Placement> = vols
            .iter()
            .map(|v| Placement {
                name: &v.name,
                cache: &v.cache,
                host: &v.host,
                servers: v.servers.iter().map(String::as_str).collect(),
            })
            .collect();
        let (obs, measured) = build(&placements, &by_node, self.cfg.block_size.0, seconds);
        let t = self.started.elapsed().as_secs_f64();
        let plan = if topo.tenants.is_empty() {
            None
        } else {
            let mut ctl = Controller::resume(topo.clone(), self.scheme.clone(), g.state.clone())
                .map_err(|e| ServiceError::Control(e.to_string()))?;
            let mut plan = ctl
                .step(t, &obs)
                .map_err(|e| ServiceError::Control(e.to_string()))?;
            self.cfg.bandwidth.fill(&topo, &vols, &mut plan);
            g.state = ctl.state().clone();
            for (i, o) in obs.tenants.iter().enumerate() {
                let tp = &plan.tenants[i];
                tracing::debug!(
                    tenant = %vols[i].name,
                    requests = o.requests,
                    writes = o.writes,
                    mean_ms = o.mean_latency_ms,
                    read_ms = ?o.read_latency_ms,
                    write_ms = ?o.write_latency_ms,
                    l1_hit_ms = ?o.service.l1_hit_ms,
                    l2_hit_ms = ?o.service.l2_hit_ms,
                    miss_ms = ?o.service.miss_ms,
                    predicted_ms = tp.predicted_latency_ms,
                    target_ms = ?tp.target_latency_ms,
                    "observed and planned"
                );
            }
            Some(plan)
        };
        // 4. Reconcile (outside the lock).
        // With no tenant at all there is no plan, and no cache is wanted anywhere.
        let work: Vec<(String, NodeClient, Desired, bool)> = g
            .nodes
            .values()
            .filter(|e| e.up)
            .filter_map(|e| {
                let c = self.client_for(e)?;
                let d = match &plan {
                    Some(p) => reconcile::desired(&topo, p, &vols, e, self.cfg.block_size.0),
                    None => Desired::default(),
                };
                Some((
                    e.name.clone(),
                    c,
                    d,
                    e.programmed.as_deref() != Some(e.epoch.as_str()),
                ))
            })
            .collect();
        let epochs: HashMap<String, String> = g
            .nodes
            .values()
            .map(|e| (e.name.clone(), e.epoch.clone()))
            .collect();
        drop(g);
        // Every node at once (bounded): a node busy writing back what a shrink evicts holds
        // up only its own reconcile.
        let done: Vec<_> = crate::fanout::map_bounded(
            &work,
            crate::fanout::MAX_CONCURRENT_NODE_CALLS,
            |(name, client, want, fresh)| {
                if *fresh {
                    tracing::info!(node = %name, "programming the node from the plan");
                }
                (name.clone(), reconcile::apply(client, name, want))
            },
        );
        let mut actions = Vec::new();
        let mut programmed = Vec::new();
        for (name, r) in done {
            match r {
                Ok(a) => {
                    actions.extend(a);
                    programmed.push((name, Ok(())));
                }
                Err((a, e)) => {
                    actions.extend(a);
                    programmed.push((name, Err(e)));
                }
            }
        }
        // 5. Persist and record.
        let mut g = self.lock();
        for (name, r) in programmed {
            if let Some(e) = g.nodes.get_mut(&name) {
                match r {
                    Ok(()) => e.programmed = epochs.get(&name).cloned(),
                    Err(err) => {
                        tracing::warn!(node = %name, %err, "reconcile failed; retried next interval");
                        e.last_error = Some(err.to_string());
                    }
                }
            }
        }
        let report = self.report(
            &g,
            plan.as_ref(),
            &vols,
            &measured,
            &topo,
            now,
            seconds,
            actions,
        );
        let nodes: Vec<&NodeEntry> = g.nodes.values().collect();
        let mut batch = vec![
            (store::STATE, Some(to_json(&g.state))),
            (store::NODES, Some(to_json(&nodes))),
        ];
        if let Some(p) = &plan {
            batch.push(("plan", Some(to_json(p))));
        }
        self.store.put(&batch)?;
        let hist: Vec<HistoryEntry> = report
            .rows
            .iter()
            .map(|r| HistoryEntry {
                interval: report.interval,
                time: now,
                tenant: r.tenant.clone(),
                detail: serde_json::to_value(r).unwrap_or_default(),
            })
            .chain(std::iter::once(HistoryEntry {
                interval: report.interval,
                time: now,
                tenant: "*".into(),
                detail: serde_json::json!({"scheme": self.scheme.name,
                    "infeasible": report.infeasible, "actions": report.actions,
                    "allocations": report.allocations,
                    "predicted_fair_speedup": plan.as_ref().map(|p| p.predicted_fair_speedup)}),
            }))
            .collect();
        self.store.append_history(&hist)?;
        g.plan = plan;
        g.last_obs = Some((vols.iter().map(|v| v.name.clone()).collect(), obs));
        g.series.push_back(report.clone());
        while g.series.len() > SERIES {
            g.series.pop_front();
        }
        Ok(report)
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        g: &Inner,
        plan: Option<&Plan>,
        vols: &[Volume],
        measured: &[Measured],
        topo: &Topology,
        now: f64,
        seconds: f64,
        actions: Vec<Action>,
    ) -> IntervalReport {
        let bs = self.cfg.block_size.0;
        let mut rows = Vec::new();
        let mut allocations: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (i, v) in vols.iter().enumerate() {
            let owner = g.tenants.iter().find(|t| t.name == v.owner);
            let tp = plan.and_then(|p| p.tenants.get(i));
            let m = &measured[i];
            // The measured mean is held against the target in the interval's own terms
            // (`TenantPlan::interval_target_ms`: for a degradation SLO, scaled by what the
            // interval's workload would have cost at fair share).
            let target = tp.and_then(|t| t.interval_target_ms.or(t.target_latency_ms));
            // A tail SLO is judged on the interval's measured quantile against its bound.
            let tail = owner.and_then(|o| o.slo.as_ref()?.tail());
            let tail_ms = tail.and_then(|(q, _)| m.quantiles?.at(q));
            let met = match (tail, target, m.latency_ms) {
                (Some((_, bound)), _, Some(_)) => tail_ms.map(|v| v <= bound),
                (None, Some(t), Some(l)) => Some(l <= t),
                _ => None,
            };
            if let Some(tp) = tp {
                allocations
                    .entry(topo.hosts[tp.l1.node].name.clone())
                    .or_default()
                    .insert(v.cache.clone(), tp.l1.size * bs);
                for p in &tp.l2 {
                    *allocations
                        .entry(topo.servers[p.node].name.clone())
                        .or_default()
                        .entry(v.cache.clone())
                        .or_default() += p.size * bs;
                }
            }
            rows.push(Row {
                tenant: v.name.clone(),
                owner: v.owner.clone(),
                slo: owner.and_then(|o| o.slo).map(|s| s.to_string()),
                target_ms: target,
                latency_ms: m.latency_ms,
                p99_ms: m.p99_ms,
                tail_ms,
                l1_hit_ratio: m.l1_hit_ratio,
                l2_hit_ratio: m.l2_hit_ratio,
                l1_size: tp.map_or(0, |t| t.l1.size * bs),
                l2_size: tp.map_or(0, |t| t.l2_total() * bs),
                l1_applied: m.l1_size,
                l2_applied: m.l2_size,
                slo_met: met,
                predicted_ms: tp.map_or(0.0, |t| t.predicted_latency_ms),
                l1_reason: tp.map_or(String::new(), |t| t.l1.reason.to_string()),
                l2_reason: tp
                    .and_then(|t| t.l2.first())
                    .map_or(String::new(), |p| p.reason.to_string()),
                eviction: tp.map_or(String::new(), |t| {
                    format!("{} ({})", t.eviction, t.eviction_reason)
                }),
                failing: failing(v, &g.nodes),
                requests: m.requests,
                iops: m.iops,
                mbps: m.mbps,
            });
        }
        IntervalReport {
            interval: plan.map_or(0, |p| p.interval),
            time: now,
            seconds,
            rows,
            allocations,
            infeasible: plan.map(|p| p.infeasible.clone()).unwrap_or_default(),
            actions,
        }
    }

    /// One round of the loop: a leader (or a sole controller) runs [`Service::tick`],
    /// first reloading the store's state if it has just started leading; a standby
    /// reloads the state so its read API follows the leader's.
    fn round(&self) -> Result<IntervalReport, ServiceError> {
        let leading = self.leading();
        let was = std::mem::replace(&mut self.lock().was_leading, leading);
        if self.election.is_some() && (!leading || !was) {
            self.reload()?;
            if !leading {
                return Err(ServiceError::Conflict("standby".into()));
            }
            tracing::info!("took over: state loaded from the store");
            self.persist_config()?;
        }
        self.tick()
    }

    /// Runs [`Service::round`] every interval until `stop` says so (on the blocking pool).
    pub async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut every = tokio::time::interval(self.interval());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
            let s = self.clone();
            match tokio::task::spawn_blocking(move || s.round()).await {
                Ok(Ok(r)) => tracing::debug!(interval = r.interval, "interval done"),
                Ok(Err(_)) if !self.leading() => {}
                Ok(Err(e)) => tracing::error!(%e, "interval failed"),
                Err(e) => tracing::error!(%e, "interval panicked"),
            }
        }
    }
}

/// Keeps a node's verdict on its registry entry, logging a change.
fn note_verdict(e: &mut NodeEntry, v: Verdict) {
    match v {
        Verdict::Suspect(reason) => {
            if e.suspect.is_none() {
                tracing::warn!(node = %e.name, %reason, "node suspect: its counters are not believed; its tenants are planned at their last good interval");
            }
            e.suspect = Some(reason);
        }
        Verdict::Honest | Verdict::Resynced => {
            if let Some(was) = e.suspect.take() {
                tracing::info!(node = %e.name, was = %was, resynced = (v == Verdict::Resynced), "node's counters believed again");
            }
        }
    }
}

/// Keeps what a node's `/healthz` said, logging a change.
fn note_health(e: &mut NodeEntry, h: api::node::Health) {
    let down = h.upstreams_down;
    let names = |d: &[api::node::UpstreamDown]| {
        d.iter()
            .map(|u| u.export.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !down.is_empty() && names(&down) != names(&e.degraded) {
        tracing::warn!(node = %e.name, exports = %names(&down), "node degraded: upstream links away; their volumes are failing");
    } else if down.is_empty() && !e.degraded.is_empty() {
        tracing::info!(node = %e.name, exports = %names(&e.degraded), "node healthy again");
    }
    e.degraded = down;
}

/// Why volume `v` is failing: its host or a server is down, or reports the link under
/// the volume's export down; `None` if none is.
fn failing(v: &Volume, nodes: &BTreeMap<String, NodeEntry>) -> Option<String> {
    let mut why = Vec::new();
    for n in std::iter::once(&v.host).chain(&v.servers) {
        let Some(e) = nodes.get(n) else { continue };
        if !e.up {
            why.push(format!("node `{n}` is down"));
            continue;
        }
        for u in e.degraded.iter().filter(|u| u.export == v.cache) {
            why.push(format!(
                "node `{n}`: upstream {} of export `{}` away for {:.1} s{}",
                u.upstream,
                u.export,
                u.down_secs,
                u.error
                    .as_deref()
                    .map(|x| format!(" ({x})"))
                    .unwrap_or_default()
            ));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// What the store holds, or the configuration where it holds nothing yet.
struct Loaded {
    tenants: Vec<TenantSpec>,
    nodes: BTreeMap<String, NodeEntry>,
    state: ControlState,
    plan: Option<Plan>,
}

fn load(cfg: &ControllerConfig, store: &dyn Store) -> Result<Loaded, ServiceError> {
    let tenants: Vec<TenantSpec> =
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

/// A volume placed on nodes as one `control` tenant: a volume exported on several hosts
/// is one of these per host (the first named as the volume, the others `VOLUME@HOST`).
#[derive(Clone, Debug)]
pub struct Volume {
    /// The `control` tenant's name.
    pub name: String,
    /// The volume's name: its export and its cache on every node.
    pub cache: String,
    /// Its owner.
    pub owner: String,
    /// Level-1 node.
    pub host: String,
    /// Level-2 nodes.
    pub servers: Vec<String>,
    /// Whether its levels are exclusive (its caches are created so).
    pub exclusive: bool,
}

/// The `control` topology of the known nodes and the tenants' volumes. Nodes are in name
/// order per level; a down node has capacity 0. Volumes naming a node the registry does
/// not know are left out (and logged) unless `strict`, where they are kept so
/// validation names them.
pub fn topology(
    cfg: &ControllerSection,
    tenants: &[TenantSpec],
    nodes: &BTreeMap<String, NodeEntry>,
    strict: bool,
) -> (Topology, Vec<Volume>) {
    let bs = cfg.block_size.0;
    let level = |l: u8| -> Vec<Node> {
        nodes
            .values()
            .filter(|n| n.level == l)
            .map(|n| Node {
                name: n.name.clone(),
                capacity: n.capacity(bs),
                hot_tier: false,
            })
            .collect()
    };
    let hosts = level(1);
    let servers = level(2);
    let mut out = Vec::new();
    let mut vols = Vec::new();
    for t in tenants {
        let class = t.class().unwrap_or_default();
        for v in &t.volumes {
            for (k, vhost) in std::iter::once(&v.host).chain(&v.hosts).enumerate() {
                let cname = if k == 0 {
                    v.name.clone()
                } else {
                    format!("{}@{vhost}", v.name)
                };
                let host = hosts.iter().position(|h| &h.name == vhost);
                let srv: Option<Vec<usize>> = v
                    .servers
                    .iter()
                    .map(|s| servers.iter().position(|x| &x.name == s))
                    .collect();
                let (host, srv) = match (host, srv) {
                    (Some(h), Some(s)) => (h, s),
                    _ if strict => (usize::MAX, Vec::new()),
                    _ => {
                        tracing::warn!(volume = %v.name, "volume names an unknown node; left out");
                        continue;
                    }
                };
                let exclusive = v.exclusive.unwrap_or(cfg.exclusive);
                out.push(Tenant {
                    name: cname.clone(),
                    host,
                    servers: srv,
                    stripe_unit: (v.stripe_unit.map_or(1 << 20, |s| s.0) / bs).max(1),
                    slo: t.slo,
                    class,
                    depth: t.depth,
                    levels: (exclusive != cfg.exclusive).then_some(if exclusive {
                        Levels::Exclusive
                    } else {
                        Levels::Inclusive
                    }),
                });
                vols.push(Volume {
                    name: cname,
                    cache: v.name.clone(),
                    owner: t.name.clone(),
                    host: vhost.clone(),
                    servers: v.servers.clone(),
                    exclusive,
                });
            }
        }
    }
    let [a, b, c] = cfg.service_ms;
    (
        Topology {
            block_size: bs,
            hosts,
            servers,
            levels: if cfg.exclusive {
                Levels::Exclusive
            } else {
                Levels::Inclusive
            },
            service: ServiceTimes {
                l1_hit_ms: a,
                l2_hit_ms: b,
                miss_ms: c,
            },
            tenants: out,
        },
        vols,
    )
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serialises")
}

impl From<CallError> for ServiceError {
    fn from(e: CallError) -> Self {
        ServiceError::Conflict(e.to_string())
    }
}
