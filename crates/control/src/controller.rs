//! The controller: topology, scheme and state, and the enforcement step that joins the
//! stages (see the crate doc for the pipeline).

use crate::allocate::{self, Floor, Inputs, Sizes};
use crate::bandwidth::BandwidthState;
use crate::guard::{GuardState, Held, Limit};
use crate::hysteresis::limit_moves;
use crate::model::{latency_target, LatencyModel, WriteMix};
use crate::observe::Observations;
use crate::plan::{BoostPlan, Layout, Partition, Plan, Reason, Shortfall, TenantPlan};
use crate::policy_choice::ChoiceState;
use crate::scheme::{Allocation, MlmsModel, Scheme};
use crate::topology::{ServiceTimes, Slo, Topology};
use crate::ControlError;
use lachesis_alloc::boost::{step as boost_step, PeriodObservation, ThresholdState};
use lachesis_alloc::mlms::model::{Regression, Sample};
use lachesis_alloc::monotone_envelope;
use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};

/// MLMS samples kept per tenant.
const SAMPLES: usize = 16;

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
/// resets the others nor hands one tenant's history to another: [`Controller::resume`]
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
    fn fit(mut self, topo: &Topology) -> ControlState {
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

/// One controller: what it controls, how, and what it remembers.
#[derive(Clone, Debug)]
pub struct Controller {
    topology: Topology,
    scheme: Scheme,
    state: ControlState,
}

impl Controller {
    /// A controller with fresh state; the topology is checked.
    pub fn new(topology: Topology, scheme: Scheme) -> Result<Controller, ControlError> {
        Controller::resume(topology, scheme, ControlState::default())
    }

    /// A controller continuing from `state` (as persisted by the live controller), in a
    /// topology that may have gained, lost or reordered tenants and nodes since: the state
    /// is matched to it by name (see [`ControlState`]).
    pub fn resume(
        topology: Topology,
        scheme: Scheme,
        state: ControlState,
    ) -> Result<Controller, ControlError> {
        topology.validate()?;
        let state = state.fit(&topology);
        Ok(Controller {
            topology,
            scheme,
            state,
        })
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The state to persist.
    pub fn state(&self) -> &ControlState {
        &self.state
    }

    /// The plan before anything was observed: fair share (or the shared / alone layouts of
    /// those baselines), each partition running the first candidate policy or LRU.
    pub fn initial_plan(&self) -> Plan {
        let n = self.topology.tenants.len();
        let sizes = allocate::fair(&self.topology, &vec![true; n], 0);
        let models = self.models();
        let targets = vec![None; n];
        self.build_plan(0.0, sizes, &models, &targets, &vec![1.0; n])
    }

    /// One enforcement step at time `now` (seconds) with the interval's observations.
    pub fn step(&mut self, now: f64, obs: &Observations) -> Result<Plan, ControlError> {
        let n = self.topology.tenants.len();
        if obs.tenants.len() != n {
            return Err(ControlError::Observations(format!(
                "{} tenants observed, the topology has {n}",
                obs.tenants.len()
            )));
        }
        if !(obs.seconds.is_finite() && obs.seconds > 0.0) {
            return Err(ControlError::Observations(format!(
                "interval length {} s must be above 0",
                obs.seconds
            )));
        }
        self.observe(obs);
        let topo = &self.topology;
        let models = self.models();
        let all = vec![true; n];
        let fair_all = allocate::fair(topo, &all, 0);
        let probe = Inputs {
            topo,
            models: &models,
            active: &all,
            idle_floor: 0,
            targets: &vec![None; n],
            lat_fair: &vec![1.0; n],
            rates: &vec![1.0; n],
            floors: &[],
            guards: &[],
        };
        let lat_fair: Vec<f64> = (0..n)
            .map(|i| probe.latency(i, fair_all.l1[i], &fair_all.l2[i]))
            .collect();
        let targets: Vec<Option<f64>> = (0..n)
            .map(|i| {
                let o = &obs.tenants[i];
                latency_target(
                    &topo.tenants[i],
                    lat_fair[i],
                    (o.requests > 0).then_some((o.requests, o.bytes, o.mean_latency_ms)),
                    obs.seconds,
                )
            })
            .collect();
        let rates: Vec<f64> = obs
            .tenants
            .iter()
            .map(|o| o.requests as f64 / obs.seconds)
            .collect();
        let idle_cfg = self.scheme.idle;
        let active: Vec<bool> = (0..n)
            .map(|i| idle_cfg.map_or(true, |c| self.state.tenants[i].idle < c.intervals))
            .collect();
        let floors = self.floors(&active);
        let guarding = if self.scheme.guard {
            guard(
                topo,
                &self.scheme,
                &mut self.state,
                &models,
                &fair_all,
                &active,
                obs,
            )
        } else {
            Guarding::default()
        };
        let inp = Inputs {
            topo,
            models: &models,
            active: &active,
            idle_floor: idle_cfg.map_or(0, |c| c.floor),
            targets: &targets,
            lat_fair: &lat_fair,
            rates: &rates,
            floors: &floors,
            guards: &guarding.floors,
        };
        let mut sizes = match self.scheme.allocation {
            Allocation::Alone | Allocation::Shared | Allocation::Fair => {
                allocate::fair(topo, &active, inp.idle_floor)
            }
            Allocation::Mlms { levels, model } => {
                let regs: Vec<Option<Regression>> = (0..n)
                    .map(|i| match model {
                        MlmsModel::Curve => None,
                        MlmsModel::Regression => {
                            self.regression(i, fair_all.l1[i], fair_all.l2_total(i))
                        }
                    })
                    .collect();
                allocate::mlms::allocate(&inp, levels, &regs)
            }
            Allocation::Moirai { slo_minimums } => {
                let fair_l2: Vec<u64> = (0..n).map(|i| fair_all.l2_total(i)).collect();
                allocate::moirai::allocate(&inp, slo_minimums, &fair_l2)
            }
            Allocation::Lachesis => allocate::lachesis::allocate(&inp),
        };
        for (i, &on) in active.iter().enumerate() {
            if !on {
                let r = Reason::Idle {
                    intervals: self.state.tenants[i].idle,
                };
                sizes.l1_reason[i] = r.clone();
                sizes.l2_reason[i] = r;
            }
        }
        guarding.apply(topo, &mut sizes, &fair_all);
        if let (Some(h), Some(prev)) = (self.scheme.hysteresis, self.state.previous.as_ref()) {
            if prev.layout == Layout::Partitioned {
                let was = Previous::new(topo, prev, &self.state);
                let returned = (0..n).any(|i| {
                    self.state.tenants[i].idle == 0
                        && was.tenant[i].is_some_and(|tp| tp.l1.reason.is_idle())
                });
                let at_risk = returned
                    || guarding.any_fallback()
                    || (0..n).any(|i| match targets[i] {
                        Some(t) => {
                            let o = &obs.tenants[i];
                            (o.requests > 0 && o.mean_latency_ms > t)
                                || was
                                    .sizes(topo, i)
                                    .is_some_and(|(l1, l2)| inp.latency(i, l1, &l2) > t)
                        }
                        None => false,
                    });
                damp(&inp, &mut sizes, &was, h, at_risk);
                if h.write_back_share > 0.0 {
                    // Blocks one server's disk writes back in the budgeted share of an
                    // interval, at the nominal cost of a disk operation.
                    let per_block_s = topo.service.miss_ms.max(1e-6) / 1e3;
                    let budget = h.write_back_share * obs.seconds / per_block_s;
                    // The share of what a shrink evicts that is dirty: the share of its
                    // resident blocks that are, where the nodes count them (a write-back
                    // cache keeps every block written since its last write-back dirty,
                    // far more than the share of requests that write: a reclaim paced by
                    // that share flooded the disk with write-backs). Else the share of
                    // its requests that write, where observed. Else all of an idle
                    // tenant's blocks are taken to be (its reclaim delays no request of
                    // its own), none of an active one's (its shrink is what the plan
                    // needs now, and pacing it on a guess would hold its space from
                    // tenants that gain from it).
                    let dirty: Vec<f64> = (0..n)
                        .map(
                            |i| match (obs.tenants[i].dirty_share, self.state.tenants[i].writes) {
                                (Some(d), _) if d.is_finite() => d.clamp(0.0, 1.0),
                                (_, Some(w)) => w.share,
                                (_, None) if !active[i] => 1.0,
                                (_, None) => 0.0,
                            },
                        )
                        .collect();
                    pace_write_backs(&inp, &mut sizes, &was, &dirty, budget);
                }
            }
        }
        let interval_targets = self.interval_targets(&inp, obs, &targets, &fair_all);
        let mut plan = self.build_plan(now, sizes, &models, &targets, &lat_fair);
        for (tp, t) in plan.tenants.iter_mut().zip(interval_targets) {
            tp.interval_target_ms = t;
        }
        // Eviction policy per tenant.
        if let Some(cfg) = self.scheme.policy_choice.clone() {
            for (i, tp) in plan.tenants.iter_mut().enumerate() {
                if guarding.floors.get(i).is_some_and(Option::is_some) {
                    // Guarded: the fair scheme's policy, and SOPA starts afresh once the
                    // guard lets go.
                    self.state.tenants[i].choice = ChoiceState::default();
                    tp.eviction = baseline_policy(&self.scheme);
                    tp.eviction_reason =
                        "do no harm: the fair scheme's policy while held at fair share".into();
                    continue;
                }
                let size = (tp.l1.size + tp.l2_total()) as f64;
                let (p, why) = self.state.tenants[i]
                    .choice
                    .step(&cfg, &obs.tenants[i], size);
                tp.eviction = p;
                tp.eviction_reason = why;
            }
        }
        if let Some(cfg) = self.scheme.automata {
            let observed: Vec<f64> = obs.tenants.iter().map(|o| o.mean_latency_ms).collect();
            plan.bandwidth =
                self.state
                    .bandwidth
                    .step(&cfg, topo, &targets, &observed, self.state.interval);
        }
        if self.scheme.boost {
            for (s, server) in topo.servers.iter().enumerate() {
                if !server.hot_tier {
                    continue;
                }
                let st = self.state.servers[s]
                    .boost
                    .get_or_insert_with(ThresholdState::default);
                if let Some(t) = obs.tiers.get(s) {
                    *st = boost_step(
                        *st,
                        PeriodObservation {
                            hits: t.hits,
                            migrations: t.migrations,
                        },
                    );
                }
                plan.boost.push(BoostPlan {
                    server: s,
                    threshold: st.threshold,
                    justify: st.justify,
                });
            }
        }
        self.state.interval += 1;
        plan.interval = self.state.interval;
        self.state.previous = Some(plan.clone());
        for (rec, node) in self.state.hosts.iter_mut().zip(&topo.hosts) {
            rec.capacity = node.capacity;
        }
        for (rec, node) in self.state.servers.iter_mut().zip(&topo.servers) {
            rec.capacity = node.capacity;
        }
        Ok(plan)
    }

    /// Per tenant, its [`Floor`], if any. Empty unless the scheme holds floors
    /// ([`crate::scheme::Hysteresis::hold_floors`]) and the previous plan was partitioned.
    ///
    /// * Warming: an active tenant whose curve's footprint grew within the last
    ///   [`WARMING_INTERVALS`] and is still below the space it held (both levels
    ///   together) keeps both levels. Its curve says nothing yet of the blocks it holds
    ///   beyond what it has been seen to reuse: a cold cache, or a working set still being
    ///   touched for the first time, makes a young curve flat past its footprint, and
    ///   taking that space away on such a curve throws out the blocks it is filling (the
    ///   tenant then refills them later, from the disk).
    /// * Write buffer: an active tenant whose level 1 is write-back, whose writes were
    ///   seen to pay for the blocks they add ([`WriteMix::per_miss_ms`] learned) and cost
    ///   more than a level-2 hit, keeps its level 2. A write-back level 2 absorbs its
    ///   level-1 write-backs up to its dirty limit, which grows with its size: shrinking
    ///   it makes those writes wait for the disk sooner, whatever the curve (which counts
    ///   reuse, not buffering) says.
    fn floors(&self, active: &[bool]) -> Vec<Option<Floor>> {
        let topo = &self.topology;
        let (Some(h), Some(prev)) = (self.scheme.hysteresis, self.state.previous.as_ref()) else {
            return Vec::new();
        };
        if !h.hold_floors || prev.layout != Layout::Partitioned {
            return Vec::new();
        }
        let was = Previous::new(topo, prev, &self.state);
        (0..topo.tenants.len())
            .map(|i| {
                let st = &self.state.tenants[i];
                if !active[i] {
                    return None;
                }
                let (l1, l2) = was.sizes(topo, i)?;
                let held = l1 + l2.iter().sum::<u64>();
                if st.footprint > 0 && st.footprint_still < WARMING_INTERVALS && st.footprint < held
                {
                    return Some(Floor {
                        l1,
                        l2,
                        reason: Reason::Warming {
                            footprint: st.footprint,
                        },
                    });
                }
                let w = st.writes?;
                let l2_hit = st.service.unwrap_or(topo.service).l2_hit_ms;
                (w.per_miss_ms.is_some() && w.share > 0.0 && w.ms > l2_hit).then_some(Floor {
                    l1: 0,
                    l2,
                    reason: Reason::WriteBuffer { write_ms: w.ms },
                })
            })
            .collect()
    }

    /// Each tenant's [`TenantPlan::interval_target_ms`]: the sizes it held are the
    /// previous plan's (fair share before the first).
    fn interval_targets(
        &self,
        inp: &Inputs,
        obs: &Observations,
        targets: &[Option<f64>],
        fair: &Sizes,
    ) -> Vec<Option<f64>> {
        let topo = inp.topo;
        let was = self
            .state
            .previous
            .as_ref()
            .map(|prev| Previous::new(topo, prev, &self.state));
        (0..topo.tenants.len())
            .map(|i| {
                let o = &obs.tenants[i];
                if o.requests == 0 {
                    return None;
                }
                let target = targets[i]?;
                let Some(Slo::Degradation(x)) = topo.tenants[i].slo else {
                    return Some(target);
                };
                let (l1, l2) = was
                    .as_ref()
                    .and_then(|w| w.sizes(topo, i))
                    .unwrap_or_else(|| (fair.l1[i], fair.l2[i].clone()));
                let held = inp.latency(i, l1, &l2);
                let at_fair = inp.lat_fair[i];
                if !(held > 0.0 && at_fair > 0.0 && o.mean_latency_ms.is_finite()) {
                    return Some(target);
                }
                Some((1.0 + x) * o.mean_latency_ms * at_fair / held)
            })
            .collect()
    }

    fn observe(&mut self, obs: &Observations) {
        let prev: std::collections::HashMap<&str, &TenantPlan> = self
            .state
            .previous
            .iter()
            .flat_map(|p| &p.tenants)
            .map(|tp| (tp.tenant.as_str(), tp))
            .collect();
        for (i, o) in obs.tenants.iter().enumerate() {
            let st = &mut self.state.tenants[i];
            let s = st.service.get_or_insert(self.topology.service);
            let blend = |old: &mut f64, new: Option<f64>| {
                if let Some(v) = new.filter(|v| v.is_finite() && *v > 0.0) {
                    *old = 0.5 * *old + 0.5 * v;
                }
            };
            blend(&mut s.l1_hit_ms, o.service.l1_hit_ms);
            blend(&mut s.l2_hit_ms, o.service.l2_hit_ms);
            blend(&mut s.miss_ms, o.service.miss_ms);
            // Keep the levels ordered, so more space never predicts more latency.
            s.l2_hit_ms = s.l2_hit_ms.max(s.l1_hit_ms);
            s.miss_ms = s.miss_ms.max(s.l2_hit_ms);
            st.idle = if o.requests == 0 {
                st.idle.saturating_add(1)
            } else {
                0
            };
            // Writes observed apart from reads: the mix is smoothed as the service times
            // are, and the sample's latency is that of the reads (what the sizes change).
            let split = match (o.read_latency_ms, o.write_latency_ms) {
                (Some(r), Some(w)) if o.requests > 0 && r.is_finite() && w.is_finite() => {
                    Some((r, w))
                }
                _ => None,
            };
            if let Some((_, w)) = split {
                let share = (o.writes as f64 / o.requests as f64).clamp(0.0, 1.0);
                let m = st.writes.get_or_insert(WriteMix {
                    share,
                    ms: w,
                    per_miss_ms: None,
                });
                m.share = 0.5 * m.share + 0.5 * share;
                if o.writes > 0 && w > 0.0 {
                    m.ms = 0.5 * m.ms + 0.5 * w;
                }
                if !o.write_back {
                    m.per_miss_ms = None;
                }
            }
            if o.requests > 0 {
                if let Some(tp) = prev.get(st.name.as_str()) {
                    let v = &mut st.samples;
                    if v.len() == SAMPLES {
                        v.remove(0);
                    }
                    v.push(Sample {
                        c1: tp.l1.size as f64,
                        c2: tp.l2_total() as f64,
                        latency: split.map_or(o.mean_latency_ms, |(r, _)| r),
                    });
                }
            }
            let running = st.choice.active.as_deref();
            let curve = running
                .and_then(|p| o.curve(p))
                .or_else(|| o.curves.first().map(|c| &c.curve));
            if let Some(c) = curve {
                let f = footprint(c);
                if f > st.footprint {
                    st.footprint = f;
                    st.footprint_still = 0;
                } else {
                    st.footprint_still = st.footprint_still.saturating_add(1);
                }
                st.curve = Some(monotone_envelope(c));
            }
            // A write-back level 1: what this interval's writes paid beyond a level-1 hit,
            // per write that found its block not resident at the size the tenant held (its
            // curve at that size). Where the curve says nearly every block was resident,
            // misses cannot be what writes paid for: sizes are taken not to change it.
            if let (true, Some((_, w)), Some(tp), Some(c), Some(m)) = (
                o.write_back && o.writes > 0,
                split,
                prev.get(st.name.as_str()),
                st.curve.as_ref(),
                st.writes.as_mut(),
            ) {
                let a = st
                    .service
                    .map_or(self.topology.service.l1_hit_ms, |s| s.l1_hit_ms);
                let missed = 1.0 - c.hit_ratio(tp.l1.size as f64);
                m.per_miss_ms = (missed >= 0.05).then(|| {
                    let p = (w - a).max(0.0) / missed;
                    m.per_miss_ms.map_or(p, |old| 0.5 * old + 0.5 * p)
                });
            }
        }
    }

    fn models(&self) -> Vec<LatencyModel> {
        let flat = HitRatioCurve::from_pairs([(0, 1.0), (1, 1.0)]).expect("valid");
        (0..self.topology.tenants.len())
            .map(|i| LatencyModel {
                curve: self.state.tenants[i]
                    .curve
                    .clone()
                    .unwrap_or_else(|| flat.clone()),
                service: self.state.tenants[i]
                    .service
                    .unwrap_or(self.topology.service),
                levels: self.topology.tenants[i]
                    .levels
                    .unwrap_or(self.topology.levels),
                writes: self.state.tenants[i].writes,
            })
            .collect()
    }

    /// MLMS's regression for tenant `i`, once three distinct allocations were observed.
    /// A tenant whose writes are observed apart has samples of its reads' latency; they
    /// are restated at its current write mix (`(1 − w)·reads + w·W`), so the fit predicts
    /// its whole latency, as its target is.
    fn regression(&self, i: usize, k1: u64, k2: u64) -> Option<Regression> {
        let st = &self.state.tenants[i];
        let restated: Vec<Sample>;
        let v = match st.writes {
            Some(w) => {
                let share = w.share.clamp(0.0, 1.0);
                restated = st
                    .samples
                    .iter()
                    .map(|s| Sample {
                        latency: (1.0 - share) * s.latency + share * w.ms,
                        ..*s
                    })
                    .collect();
                &restated
            }
            None => &st.samples,
        };
        let mut distinct: Vec<(u64, u64)> = v.iter().map(|s| (s.c1 as u64, s.c2 as u64)).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 3 {
            return None;
        }
        let r = Regression::fit(v, k1.max(1) as f64, k2.max(1) as f64).ok()?;
        // A fit in which more space means more latency, or that misses its own samples by
        // more than a quarter on average (cold caches, phase changes), plans worse than
        // the curve model: keep the curve model until the samples support a regression.
        let err = v
            .iter()
            .map(|s| (r.latency(s.c1, s.c2) - s.latency).abs() / s.latency.max(1e-9))
            .sum::<f64>()
            / v.len() as f64;
        (r.theta[1] >= 0.0 && r.theta[2] >= 0.0 && err <= 0.25).then_some(r)
    }

    fn build_plan(
        &self,
        now: f64,
        sizes: Sizes,
        models: &[LatencyModel],
        targets: &[Option<f64>],
        lat_fair: &[f64],
    ) -> Plan {
        let topo = &self.topology;
        let n = topo.tenants.len();
        let layout = match self.scheme.allocation {
            Allocation::Shared => Layout::Shared,
            Allocation::Alone => Layout::Alone,
            _ => Layout::Partitioned,
        };
        let active = vec![true; n];
        let inp = Inputs {
            topo,
            models,
            active: &active,
            idle_floor: 0,
            targets,
            lat_fair,
            rates: &active.iter().map(|_| 1.0).collect::<Vec<_>>(),
            floors: &[],
            guards: &[],
        };
        let mut infeasible = sizes.shortfalls.clone();
        let reported: std::collections::HashSet<&str> =
            sizes.shortfalls.iter().map(|s| s.tenant.as_str()).collect();
        let mut speed = 0.0;
        let tenants: Vec<TenantPlan> = (0..n)
            .map(|i| {
                let t = &topo.tenants[i];
                let (l1, l2, r1, r2) = match layout {
                    Layout::Partitioned => (
                        sizes.l1[i],
                        sizes.l2[i].clone(),
                        sizes.l1_reason[i].clone(),
                        sizes.l2_reason[i].clone(),
                    ),
                    Layout::Shared | Layout::Alone => {
                        let r = if layout == Layout::Shared {
                            Reason::Shared
                        } else {
                            Reason::Alone
                        };
                        let l2 = t
                            .servers
                            .iter()
                            .map(|&s| topo.servers[s].capacity)
                            .collect();
                        (topo.hosts[t.host].capacity, l2, r.clone(), r)
                    }
                };
                let predicted = inp.latency(i, l1, &l2);
                speed += predicted / lat_fair[i].max(1e-12);
                let met = targets[i].map(|tg| predicted <= tg * (1.0 + 1e-9));
                if met == Some(false) && !reported.contains(t.name.as_str()) {
                    infeasible.push(Shortfall {
                        tenant: t.name.clone(),
                        target_ms: targets[i].unwrap_or(0.0),
                        predicted_ms: predicted,
                        reason: "the allocation predicted for it is short of its target".into(),
                    });
                }
                let running = self.state.tenants[i]
                    .choice
                    .active
                    .clone()
                    .or_else(|| {
                        self.scheme
                            .policy_choice
                            .as_ref()
                            .and_then(|c| c.candidates.first().cloned())
                    })
                    .unwrap_or_else(|| "lru".into());
                TenantPlan {
                    tenant: t.name.clone(),
                    l1: Partition {
                        node: t.host,
                        size: l1,
                        reason: r1,
                    },
                    l2: t
                        .servers
                        .iter()
                        .zip(l2)
                        .map(|(&s, size)| Partition {
                            node: s,
                            size,
                            reason: r2.clone(),
                        })
                        .collect(),
                    eviction: running,
                    eviction_reason: "configured".into(),
                    admission: "demand".into(),
                    predicted_latency_ms: predicted,
                    target_latency_ms: targets[i],
                    slo_met: met,
                    interval_target_ms: None,
                }
            })
            .collect();
        Plan {
            interval: self.state.interval,
            time: now,
            layout,
            tenants,
            bandwidth: Vec::new(),
            boost: Vec::new(),
            infeasible,
            predicted_fair_speedup: if speed > 0.0 { n as f64 / speed } else { 1.0 },
        }
    }
}

impl Reason {
    fn is_idle(&self) -> bool {
        matches!(self, Reason::Idle { .. })
    }
}

/// The previous plan as the current topology sees it: each tenant's part (by name) and
/// which nodes changed since (see [`damp`]).
struct Previous<'a> {
    /// Per tenant, its part of the previous plan.
    tenant: Vec<Option<&'a TenantPlan>>,
    /// Per host, whether it changed.
    host_changed: Vec<bool>,
    /// Per server, whether it changed.
    server_changed: Vec<bool>,
}

impl<'a> Previous<'a> {
    fn new(topo: &Topology, prev: &'a Plan, state: &ControlState) -> Previous<'a> {
        let by_name: std::collections::HashMap<&str, &TenantPlan> = prev
            .tenants
            .iter()
            .map(|tp| (tp.tenant.as_str(), tp))
            .collect();
        let tenant: Vec<Option<&TenantPlan>> = topo
            .tenants
            .iter()
            .map(|t| by_name.get(t.name.as_str()).copied())
            .collect();
        // Partitions the previous plan had on each node, and members that had one there.
        let mut had_h = vec![0usize; topo.hosts.len()];
        let mut had_s = vec![0usize; topo.servers.len()];
        for tp in &prev.tenants {
            if let Some(c) = had_h.get_mut(tp.l1.node) {
                *c += 1;
            }
            for p in &tp.l2 {
                if let Some(c) = had_s.get_mut(p.node) {
                    *c += 1;
                }
            }
        }
        let place = topo.placement();
        let host_changed = (0..topo.hosts.len())
            .map(|h| {
                let kept = place.hosts[h]
                    .iter()
                    .filter(|&&i| tenant[i].is_some_and(|tp| tp.l1.node == h))
                    .count();
                let cap = state.hosts.get(h).map(|n| n.capacity);
                cap != Some(topo.hosts[h].capacity)
                    || kept != place.hosts[h].len()
                    || had_h[h] != kept
            })
            .collect();
        let server_changed = (0..topo.servers.len())
            .map(|s| {
                let kept = place.servers[s]
                    .iter()
                    .filter(|&&(i, _)| {
                        tenant[i].is_some_and(|tp| tp.l2.iter().any(|p| p.node == s))
                    })
                    .count();
                let cap = state.servers.get(s).map(|n| n.capacity);
                cap != Some(topo.servers[s].capacity)
                    || kept != place.servers[s].len()
                    || had_s[s] != kept
            })
            .collect();
        Previous {
            tenant,
            host_changed,
            server_changed,
        }
    }

    /// Tenant `i`'s previous level-1 size on its host, if it had a partition there.
    fn l1(&self, topo: &Topology, i: usize) -> Option<u64> {
        let tp = self.tenant[i]?;
        (tp.l1.node == topo.tenants[i].host).then_some(tp.l1.size)
    }

    /// Tenant `i`'s previous level-2 size on its `k`-th server.
    fn l2(&self, topo: &Topology, i: usize, k: usize) -> Option<u64> {
        let s = topo.tenants[i].servers[k];
        let tp = self.tenant[i]?;
        tp.l2.iter().find(|p| p.node == s).map(|p| p.size)
    }

    /// Tenant `i`'s previous sizes, if it had a partition on each of its nodes.
    fn sizes(&self, topo: &Topology, i: usize) -> Option<(u64, Vec<u64>)> {
        let l1 = self.l1(topo, i)?;
        let l2 = (0..topo.tenants[i].servers.len())
            .map(|k| self.l2(topo, i, k))
            .collect::<Option<Vec<u64>>>()?;
        Some((l1, l2))
    }
}

/// What the do-no-harm guard ([`crate::guard`]) decided this interval.
#[derive(Default)]
struct Guarding {
    /// Per tenant, its floor (its fair share) while the guard holds it there.
    floors: Vec<Option<Floor>>,
    /// Per host, the guarded tenant for whom every tenant on it falls back to its fair
    /// share there.
    hosts: Vec<Option<usize>>,
    /// Per server, the same.
    servers: Vec<Option<usize>>,
}

impl Guarding {
    /// Whether any node falls back.
    fn any_fallback(&self) -> bool {
        self.hosts.iter().chain(&self.servers).any(Option::is_some)
    }

    /// Sets every tenant on a node that falls back to its fair share there.
    fn apply(&self, topo: &Topology, sizes: &mut Sizes, fair: &Sizes) {
        let place = topo.placement();
        let why = |j: usize| Reason::Guarded {
            why: format!("node held at fair share for `{}`", topo.tenants[j].name),
        };
        for (h, members) in place.hosts.iter().enumerate() {
            let Some(j) = self.hosts.get(h).copied().flatten() else {
                continue;
            };
            for &i in members {
                if sizes.l1[i] != fair.l1[i] {
                    sizes.l1[i] = fair.l1[i];
                    sizes.l1_reason[i] = why(j);
                }
            }
        }
        for (s, members) in place.servers.iter().enumerate() {
            let Some(j) = self.servers.get(s).copied().flatten() else {
                continue;
            };
            for &(i, k) in members {
                if sizes.l2[i][k] != fair.l2[i][k] {
                    sizes.l2[i][k] = fair.l2[i][k];
                    sizes.l2_reason[i] = why(j);
                }
            }
        }
    }
}

/// The guard's step for every tenant: only active tenants with a degradation or latency
/// SLO are guarded. Updates each guarded tenant's [`GuardState`] from this interval's
/// observation at the sizes and policy the previous plan gave it (and whether its
/// neighbours held their fair shares), and returns the floors and the nodes that fall
/// back to fair share.
fn guard(
    topo: &Topology,
    scheme: &Scheme,
    state: &mut ControlState,
    models: &[LatencyModel],
    fair: &Sizes,
    active: &[bool],
    obs: &Observations,
) -> Guarding {
    let baseline = baseline_policy(scheme);
    let n = topo.tenants.len();
    let place = topo.placement();
    let mut held: Vec<Option<(u64, Vec<u64>, bool)>> = vec![None; n];
    let mut host_at_fair = vec![false; topo.hosts.len()];
    let mut server_at_fair = vec![false; topo.servers.len()];
    if let Some(prev) = state
        .previous
        .as_ref()
        .filter(|p| p.layout == Layout::Partitioned)
    {
        let was = Previous::new(topo, prev, state);
        for (i, slot) in held.iter_mut().enumerate() {
            *slot = was.sizes(topo, i).map(|(l1, l2)| {
                let policy = was.tenant[i].is_some_and(|tp| tp.eviction == baseline);
                (l1, l2, policy)
            });
        }
        for (h, members) in place.hosts.iter().enumerate() {
            host_at_fair[h] = members.iter().all(|&i| was.l1(topo, i) == Some(fair.l1[i]));
        }
        for (s, members) in place.servers.iter().enumerate() {
            server_at_fair[s] = members
                .iter()
                .all(|&(i, k)| was.l2(topo, i, k) == Some(fair.l2[i][k]));
        }
    }
    let mut out = Guarding {
        floors: vec![None; n],
        hosts: vec![None; topo.hosts.len()],
        servers: vec![None; topo.servers.len()],
    };
    for i in 0..n {
        let t = &topo.tenants[i];
        let limit = match t.slo {
            Some(Slo::Degradation(x)) => Limit::Degradation(x),
            Some(Slo::LatencyMs(ms)) => Limit::LatencyMs(ms),
            _ => continue,
        };
        if !active[i] {
            continue;
        }
        let neighbours_at_fair =
            host_at_fair[t.host] && t.servers.iter().all(|&s| server_at_fair[s]);
        let sizes = held[i].as_ref().map(|(l1, l2, policy)| Held {
            held: (*l1, l2),
            fair: (fair.l1[i], &fair.l2[i]),
            fair_policy: *policy,
            neighbours_at_fair,
        });
        let st = &mut state.tenants[i].guard;
        let verdict = crate::guard::step(st, limit, &models[i], sizes, &obs.tenants[i]);
        if verdict.falls_back() {
            out.hosts[t.host].get_or_insert(i);
            for &s in &t.servers {
                out.servers[s].get_or_insert(i);
            }
        }
        out.floors[i] = verdict.why().map(|why| Floor {
            l1: fair.l1[i],
            l2: fair.l2[i].clone(),
            reason: Reason::Guarded { why },
        });
    }
    out
}

/// The eviction policy the fair scheme runs where `scheme` chooses none: its first
/// candidate, or LRU.
fn baseline_policy(scheme: &Scheme) -> String {
    scheme
        .policy_choice
        .as_ref()
        .and_then(|c| c.candidates.first().cloned())
        .unwrap_or_else(|| "lru".into())
}

/// Applies hysteresis to `sizes` against the previous plan. A node is *changed* when its
/// capacity is not the one the previous plan was made for, or its tenants are not those
/// the previous plan placed there: its partitions take the new sizes at once, whatever the
/// gain (a shrunk node fits its new capacity now, a grown one's new space is given out, a
/// new tenant gets its share). The other nodes are held when the predicted gain is below
/// the threshold and no SLO is at risk, and otherwise moved at most `max_move` per interval.
fn damp(
    inp: &Inputs,
    sizes: &mut Sizes,
    was: &Previous,
    h: crate::scheme::Hysteresis,
    at_risk: bool,
) {
    let topo = inp.topo;
    let n = topo.tenants.len();
    let (mut old, mut new) = (0.0, 0.0);
    for i in (0..n).filter(|&i| inp.active[i]) {
        let Some((l1, l2)) = was.sizes(topo, i) else {
            continue;
        };
        let (w, fair) = (topo.tenants[i].class.weight(), inp.lat_fair[i].max(1e-12));
        old += w * inp.latency(i, l1, &l2) / fair;
        new += w * inp.latency(i, sizes.l1[i], &sizes.l2[i]) / fair;
    }
    let gain = if old > 0.0 { (old - new) / old } else { 0.0 };
    let hold = !at_risk && gain < h.min_gain;
    let place = topo.placement();
    for (hx, host) in topo.hosts.iter().enumerate() {
        if was.host_changed[hx] {
            continue;
        }
        let members = &place.hosts[hx];
        let before: Vec<u64> = members
            .iter()
            .map(|&i| was.l1(topo, i).unwrap_or(0))
            .collect();
        let target: Vec<u64> = members.iter().map(|&i| sizes.l1[i]).collect();
        if hold {
            for (k, &i) in members.iter().enumerate() {
                if target[k] != before[k] {
                    sizes.l1_reason[i] = Reason::Hysteresis { gain };
                }
                sizes.l1[i] = before[k];
            }
            continue;
        }
        let (got, limited) = limit_moves(&before, &target, host.capacity, h.max_move);
        for (k, &i) in members.iter().enumerate() {
            if limited && got[k] != target[k] {
                sizes.l1_reason[i] = Reason::MoveLimited { target: target[k] };
            }
            sizes.l1[i] = got[k];
        }
    }
    for (s, server) in topo.servers.iter().enumerate() {
        if was.server_changed[s] {
            continue;
        }
        let members = &place.servers[s];
        let before: Vec<u64> = members
            .iter()
            .map(|&(i, k)| was.l2(topo, i, k).unwrap_or(0))
            .collect();
        let target: Vec<u64> = members.iter().map(|&(i, k)| sizes.l2[i][k]).collect();
        if hold {
            for (j, &(i, k)) in members.iter().enumerate() {
                if target[j] != before[j] {
                    sizes.l2_reason[i] = Reason::Hysteresis { gain };
                }
                sizes.l2[i][k] = before[j];
            }
            continue;
        }
        let (got, limited) = limit_moves(&before, &target, server.capacity, h.max_move);
        for (j, &(i, k)) in members.iter().enumerate() {
            if limited && got[j] != target[j] {
                sizes.l2_reason[i] = Reason::MoveLimited { target: target[j] };
            }
            sizes.l2[i][k] = got[j];
        }
    }
}

/// Paces shrinks that force write-backs. A shrink evicts a tenant's least recently used
/// blocks at once, and the dirty ones among them go to the disk of the server their
/// stripe lives on, ahead of every request that queues there after them: a few thousand
/// at once hold a disk for most of an interval and stall every tenant striped over it.
/// So, per server, the dirty blocks the plan's shrinks evict must fit in `budget` disk
/// operations. Tenant `i`'s blocks leaving its cache at server `s` are the fall of its
/// level 1's stripe there plus the fall of its level 2 there: level 1's victims go down
/// (demoted, under exclusive levels, into a level 2 that has not grown yet when they
/// arrive, so they push out its coldest blocks even where its level 2 is to grow). They
/// are taken to be dirty in the share `dirty[i]` (see the caller: the share of its
/// requests that write where that is observed, since the blocks a shrink evicts are its
/// coldest, touched about once since they were read). Where a server's dirty evictions
/// exceed the budget, every shrink there moves the same fraction of the way, and each
/// tenant takes the least fraction of its servers (so none of its servers is over).
/// The space a paced shrink does not yet free is taken from the growth of the node's
/// other partitions, in proportion to it, so no node holds more than its capacity.
/// Tenants on a node planned afresh (see [`damp`]) are not paced.
#[allow(clippy::needless_range_loop)] // tenants index several parallel arrays
fn pace_write_backs(inp: &Inputs, sizes: &mut Sizes, was: &Previous, dirty: &[f64], budget: f64) {
    let topo = inp.topo;
    let n = topo.tenants.len();
    let exempt = |i: usize| {
        let t = &topo.tenants[i];
        was.host_changed[t.host] || t.servers.iter().any(|&s| was.server_changed[s])
    };
    // Per tenant and server, the blocks its shrink evicts there.
    let mut evicts: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut demand = vec![0.0f64; topo.servers.len()];
    for i in 0..n {
        let d = dirty.get(i).copied().unwrap_or(0.0).clamp(0.0, 1.0);
        if d <= 0.0 || exempt(i) {
            continue;
        }
        let Some((l1, l2)) = was.sizes(topo, i) else {
            continue;
        };
        let t = &topo.tenants[i];
        let ns = t.servers.len().max(1) as f64;
        let fall1 = (l1 as f64 - sizes.l1[i] as f64) / ns;
        evicts[i] = (0..t.servers.len())
            .map(|k| fall1.max(0.0) + (l2[k] as f64 - sizes.l2[i][k] as f64).max(0.0))
            .collect();
        for (k, &s) in t.servers.iter().enumerate() {
            demand[s] += d * evicts[i][k];
        }
    }
    let allowed: Vec<f64> = demand
        .iter()
        .map(|&dm| if dm > budget { budget / dm } else { 1.0 })
        .collect();
    let mut paced = false;
    for i in 0..n {
        if evicts[i].iter().all(|&e| e <= 0.0) {
            continue;
        }
        let t = &topo.tenants[i];
        let f = t
            .servers
            .iter()
            .zip(&evicts[i])
            .filter(|&(_, &e)| e > 0.0)
            .map(|(&s, _)| allowed[s])
            .fold(1.0f64, f64::min);
        if f >= 1.0 {
            continue;
        }
        let Some((l1, l2)) = was.sizes(topo, i) else {
            continue;
        };
        let towards = |prev: u64, target: u64| prev - ((prev - target) as f64 * f).floor() as u64;
        let idle = !inp.active[i];
        if sizes.l1[i] < l1 {
            let target = sizes.l1[i];
            sizes.l1[i] = towards(l1, target);
            if !idle {
                sizes.l1_reason[i] = Reason::Draining { target };
            }
            paced = true;
        }
        for k in 0..t.servers.len() {
            if sizes.l2[i][k] < l2[k] {
                let target = sizes.l2[i][k];
                sizes.l2[i][k] = towards(l2[k], target);
                if !idle {
                    sizes.l2_reason[i] = Reason::Draining { target };
                }
                paced = true;
            }
        }
    }
    if !paced {
        return;
    }
    // Growth gives back what the paced shrinks still hold.
    let place = topo.placement();
    for (h, host) in topo.hosts.iter().enumerate() {
        let members = &place.hosts[h];
        let prev: Vec<u64> = members
            .iter()
            .map(|&i| was.l1(topo, i).unwrap_or(0))
            .collect();
        let mut cur: Vec<u64> = members.iter().map(|&i| sizes.l1[i]).collect();
        let target = cur.clone();
        if trim_growth(&prev, &mut cur, host.capacity) {
            for (k, &i) in members.iter().enumerate() {
                if cur[k] != target[k] {
                    sizes.l1[i] = cur[k];
                    sizes.l1_reason[i] = Reason::MoveLimited { target: target[k] };
                }
            }
        }
    }
    for (s, server) in topo.servers.iter().enumerate() {
        let members = &place.servers[s];
        let prev: Vec<u64> = members
            .iter()
            .map(|&(i, k)| was.l2(topo, i, k).unwrap_or(0))
            .collect();
        let mut cur: Vec<u64> = members.iter().map(|&(i, k)| sizes.l2[i][k]).collect();
        let target = cur.clone();
        if trim_growth(&prev, &mut cur, server.capacity) {
            for (j, &(i, k)) in members.iter().enumerate() {
                if cur[j] != target[j] {
                    sizes.l2[i][k] = cur[j];
                    sizes.l2_reason[i] = Reason::MoveLimited { target: target[j] };
                }
            }
        }
    }
}

/// Cuts the partitions of one node that grew (`cur` above `prev`) in proportion to their
/// growth until the node holds at most `capacity`; whether anything was cut.
fn trim_growth(prev: &[u64], cur: &mut [u64], capacity: u64) -> bool {
    let over = cur.iter().sum::<u64>().saturating_sub(capacity);
    if over == 0 {
        return false;
    }
    let growth: Vec<u64> = cur
        .iter()
        .zip(prev)
        .map(|(&c, &p)| c.saturating_sub(p))
        .collect();
    let total: u64 = growth.iter().sum();
    // Each cut is rounded up, so together they reach `over` (or all the growth).
    let mut left = over.min(total);
    for (k, &g) in growth.iter().enumerate() {
        let cut = ((g as u128 * over as u128).div_ceil(total.max(1) as u128) as u64)
            .min(g)
            .min(left);
        cur[k] -= cut;
        left -= cut;
    }
    true
}
