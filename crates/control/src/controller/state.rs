//! What the controller carries from one interval to the next, as plain data keyed by
//! name: per tenant ([`TenantState`]), per node ([`NodeState`]), and the whole
//! ([`ControlState`]), with the restating of an old state into a new topology.

use crate::bandwidth::BandwidthState;
use crate::guard::GuardState;
use crate::model::WriteMix;
use crate::plan::{Plan, TenantPlan};
use crate::policy_choice::ChoiceState;
use crate::topology::{ServiceTimes, Topology};
use lachesis_alloc::boost::ThresholdState;
use lachesis_alloc::mlms::model::Sample;
use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};

/// MLMS samples kept per tenant.
pub(super) const SAMPLES: usize = 16;

/// Version of [`ControlState`]'s layout written by this code: 2 keys everything by name
/// (1, before it, kept per-tenant vectors by position).
pub const STATE_VERSION: u32 = 2;

/// What the controller remembers of one tenant, found again by its name.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TenantState {
    /// The tenant's name.
    pub name: String,
    /// Service times as last observed (smoothed).
    pub service: Option<ServiceTimes>,
    /// Intervals in a row without a request.
    pub idle: u32,
    /// (allocation, observed latency) samples for MLMS's regression.
    pub samples: Vec<Sample>,
    /// The last curve of the policy it runs.
    pub curve: Option<HitRatioCurve>,
    /// SOPA's decision state.
    pub choice: ChoiceState,
    /// Its write mix (smoothed), once writes were observed apart from reads; MLMS's
    /// samples then hold the latency of its reads.
    #[serde(default)]
    pub writes: Option<WriteMix>,
    /// The largest footprint its curves have shown (blocks; [`footprint`]).
    #[serde(default)]
    pub footprint: u64,
    /// Intervals since that footprint last grew.
    #[serde(default)]
    pub footprint_still: u32,
    /// The do-no-harm guard's memory of it ([`crate::guard`]).
    #[serde(default)]
    pub guard: GuardState,
    /// The quantiles of its misses' latency in the last interval that measured any: how
    /// many misses overrun a tail SLO's bound ([`crate::model::tail_target`]).
    #[serde(default)]
    pub miss_quantiles: Option<crate::observe::Quantiles>,
}

/// Intervals a footprint may stand still before its tenant no longer counts as warming.
pub const WARMING_INTERVALS: u32 = 3;

/// The footprint a curve shows: the smallest of its sizes from which the miss ratio no
/// longer falls (within half a percentage point of its last point), i.e. about how many
/// distinct blocks the profiler has seen reused. 0 for a curve that never falls (a scan).
pub fn footprint(curve: &HitRatioCurve) -> u64 {
    let pts = curve.points();
    let Some(last) = pts.last() else {
        return 0;
    };
    pts.iter()
        .find(|p| p.miss_ratio <= last.miss_ratio + 0.005)
        .map_or(0, |p| p.cache_size)
}

/// A node as the previous plan saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeState {
    /// Its name.
    pub name: String,
    /// Its capacity (blocks) when the previous plan was made.
    pub capacity: u64,
    /// Its hot tier's threshold state (servers with a controlled tier).
    #[serde(default)]
    pub boost: Option<ThresholdState>,
}

/// What the controller carries from one interval to the next (plain data). Everything is
/// keyed by name, so a tenant or node added, removed or reordered between steps neither
/// resets the others nor hands one tenant's history to another: [`Controller::resume`](super::Controller::resume)
/// matches tenants and nodes by name, starts new ones afresh, forgets the departed, and
/// restates the previous plan in the new topology's order and node indices. The bandwidth
/// learners (whose actions are proportions over one set of tenants) start afresh when the
/// set of tenants or nodes changes. A state written before names (no `version`) is read
/// by position, as it was written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ControlState {
    /// Layout version ([`STATE_VERSION`]; absent in states of the positional layout).
    #[serde(default)]
    pub version: u32,
    /// Steps taken.
    pub interval: u64,
    /// Per tenant, by name (in the topology's order once resumed).
    #[serde(default)]
    pub tenants: Vec<TenantState>,
    /// Level-1 hosts as of the previous plan (its partitions' `node` indices refer here).
    #[serde(default)]
    pub hosts: Vec<NodeState>,
    /// Level-2 servers as of the previous plan, with their hot-tier state.
    #[serde(default)]
    pub servers: Vec<NodeState>,
    /// The bandwidth learners.
    #[serde(default)]
    pub bandwidth: BandwidthState,
    /// The last plan (tenants in the order of `tenants`).
    #[serde(default)]
    pub previous: Option<Plan>,
    // The positional layout (version 1), read only to carry an old state over.
    #[serde(default, rename = "service", skip_serializing)]
    old_service: Vec<ServiceTimes>,
    #[serde(default, rename = "idle", skip_serializing)]
    old_idle: Vec<u32>,
    #[serde(default, rename = "samples", skip_serializing)]
    old_samples: Vec<Vec<Sample>>,
    #[serde(default, rename = "curves", skip_serializing)]
    old_curves: Vec<Option<HitRatioCurve>>,
    #[serde(default, rename = "choice", skip_serializing)]
    old_choice: Vec<ChoiceState>,
    #[serde(default, rename = "boost", skip_serializing)]
    old_boost: Vec<Option<ThresholdState>>,
}

impl ControlState {
    /// The state restated for `topo`: see the type's doc.
    pub(super) fn fit(mut self, topo: &Topology) -> ControlState {
        if self.version < 2 {
            self.carry_positions(topo);
        }
        let shape_changed = self.tenants.len() != topo.tenants.len()
            || self
                .tenants
                .iter()
                .zip(&topo.tenants)
                .any(|(a, b)| a.name != b.name)
            || !same_names(&self.hosts, &topo.hosts)
            || !same_names(&self.servers, &topo.servers);
        if shape_changed {
            self.bandwidth = BandwidthState::default();
        }
        // Tenants by name.
        let mut old: std::collections::HashMap<String, TenantState> = self
            .tenants
            .drain(..)
            .map(|t| (t.name.clone(), t))
            .collect();
        self.tenants = topo
            .tenants
            .iter()
            .map(|t| {
                old.remove(&t.name).unwrap_or_else(|| TenantState {
                    name: t.name.clone(),
                    ..Default::default()
                })
            })
            .collect();
        // The previous plan in the new order and node indices; what it cannot place goes.
        if let Some(prev) = self.previous.take() {
            let index =
                |nodes: &[NodeState], now: &[crate::topology::Node]| -> Vec<Option<usize>> {
                    nodes
                        .iter()
                        .map(|n| now.iter().position(|m| m.name == n.name))
                        .collect()
                };
            let hosts = index(&self.hosts, &topo.hosts);
            let servers = index(&self.servers, &topo.servers);
            let mut by_name: std::collections::HashMap<String, TenantPlan> = prev
                .tenants
                .into_iter()
                .map(|t| (t.tenant.clone(), t))
                .collect();
            let mut tenants = Vec::with_capacity(topo.tenants.len());
            for t in &topo.tenants {
                let Some(mut tp) = by_name.remove(&t.name) else {
                    continue;
                };
                let Some(Some(h)) = hosts.get(tp.l1.node).copied() else {
                    continue;
                };
                tp.l1.node = h;
                tp.l2
                    .retain_mut(|p| match servers.get(p.node).copied().flatten() {
                        Some(s) => {
                            p.node = s;
                            true
                        }
                        None => false,
                    });
                tenants.push(tp);
            }
            self.previous = Some(Plan { tenants, ..prev });
        }
        // Nodes by name: hot-tier state kept, capacities as of the previous plan.
        let nodes = |old: &[NodeState], now: &[crate::topology::Node]| -> Vec<NodeState> {
            now.iter()
                .map(|n| {
                    old.iter()
                        .find(|o| o.name == n.name)
                        .cloned()
                        .unwrap_or_else(|| NodeState {
                            name: n.name.clone(),
                            capacity: n.capacity,
                            boost: None,
                        })
                })
                .collect()
        };
        self.hosts = nodes(&self.hosts, &topo.hosts);
        self.servers = nodes(&self.servers, &topo.servers);
        self.version = STATE_VERSION;
        self
    }

    /// Carries a positional (version 1) state over, position `i` being tenant `i` of
    /// `topo` (as it was written) and likewise for servers; node capacities are unknown,
    /// so they count as unchanged.
    fn carry_positions(&mut self, topo: &Topology) {
        self.tenants = topo
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| TenantState {
                name: t.name.clone(),
                service: self.old_service.get(i).copied(),
                idle: self.old_idle.get(i).copied().unwrap_or(0),
                samples: self.old_samples.get(i).cloned().unwrap_or_default(),
                curve: self.old_curves.get(i).cloned().flatten(),
                choice: self.old_choice.get(i).cloned().unwrap_or_default(),
                writes: None,
                footprint: 0,
                footprint_still: 0,
                guard: GuardState::default(),
                miss_quantiles: None,
            })
            .collect();
        let keep = |nodes: &[crate::topology::Node], boost: &[Option<ThresholdState>]| {
            nodes
                .iter()
                .enumerate()
                .map(|(k, n)| NodeState {
                    name: n.name.clone(),
                    capacity: n.capacity,
                    boost: boost.get(k).copied().flatten(),
                })
                .collect::<Vec<_>>()
        };
        self.hosts = keep(&topo.hosts, &[]);
        self.servers = keep(&topo.servers, &self.old_boost);
        self.old_service.clear();
        self.old_idle.clear();
        self.old_samples.clear();
        self.old_curves.clear();
        self.old_choice.clear();
        self.old_boost.clear();
    }
}

fn same_names(a: &[NodeState], b: &[crate::topology::Node]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.name == y.name)
}
