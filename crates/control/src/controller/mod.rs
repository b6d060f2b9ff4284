//! The controller: topology, scheme and state, and the enforcement step that joins the
//! stages (see the crate doc for the pipeline). The stages' helpers live beside it: the
//! state carried between intervals ([`state`]), what observations teach it and the models
//! planned with ([`observing`]), the previous plan as the current topology sees it
//! ([`previous`]), the guard's floors and fallbacks ([`guarding`]), and hysteresis with
//! write-back pacing ([`damping`]).

use crate::allocate::{self, Floor, Inputs, Sizes};
use crate::model::{latency_target, LatencyModel};
use crate::observe::Observations;
use crate::plan::{BoostPlan, Layout, Partition, Plan, Reason, Shortfall, TenantPlan};
use crate::policy_choice::ChoiceState;
use crate::scheme::{Allocation, MlmsLevels, MlmsModel, Scheme};
use crate::topology::{Placement, Slo, Topology};
use crate::ControlError;
use lachesis_alloc::boost::{step as boost_step, PeriodObservation, ThresholdState};
use lachesis_alloc::mlms::model::Regression;

mod damping;
mod guarding;
mod observing;
mod previous;
mod state;

use damping::{damp, honour_guard_floors, pace_write_backs, write_back_budgets};
use guarding::{baseline_policy, guard, Guarding};
use previous::Previous;
pub use state::{
    footprint, ControlState, NodeState, TenantState, STATE_VERSION, WARMING_INTERVALS,
};

/// One controller: what it controls, how, and what it remembers.
#[derive(Clone, Debug)]
pub struct Controller {
    topology: Topology,
    /// Which tenants use each node of `topology`, built once with it.
    placement: Placement,
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
            placement: topology.placement(),
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
        let sizes = allocate::fair(&self.topology, &self.placement, &vec![true; n], 0);
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
        let mut phases = crate::Phases::start();
        // The previous plan as this topology sees it, built once for every stage that
        // reads it (the plan is put back, replaced by this one, at the end).
        let previous = self.state.previous.take();
        let was = previous
            .as_ref()
            .map(|p| Previous::new(&self.topology, &self.placement, p, &self.state));
        let partitioned = previous
            .as_ref()
            .is_some_and(|p| p.layout == Layout::Partitioned);
        let was_partitioned = was.as_ref().filter(|_| partitioned);
        self.observe(obs, was.as_ref());
        phases.mark("observe");
        let topo = &self.topology;
        let place = &self.placement;
        let models = self.models();
        phases.mark("models");
        let all = vec![true; n];
        let fair_all = allocate::fair(topo, place, &all, 0);
        let probe = Inputs {
            topo,
            place,
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
                    &models[i],
                    lat_fair[i],
                    (o.requests > 0).then_some((o.requests, o.bytes, o.mean_latency_ms)),
                    self.state.tenants[i].miss_quantiles.as_ref(),
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
        phases.mark("targets");
        let floors = self.floors(&active, was_partitioned);
        phases.mark("floors");
        let guarding = if self.scheme.guard {
            guard(
                topo,
                place,
                was_partitioned,
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
            place,
            models: &models,
            active: &active,
            idle_floor: idle_cfg.map_or(0, |c| c.floor),
            targets: &targets,
            lat_fair: &lat_fair,
            rates: &rates,
            floors: &floors,
            guards: &guarding.floors,
        };
        phases.mark("guard");
        let mut sizes = match self.scheme.allocation {
            Allocation::Alone | Allocation::Shared | Allocation::Fair => {
                allocate::fair(topo, place, &active, inp.idle_floor)
            }
            Allocation::Mlms {
                levels,
                model: MlmsModel::Regression,
            } if self.state.interval < allocate::mlms::BOOTSTRAP_PLANS => {
                allocate::mlms::bootstrap(&inp, levels, self.state.interval + 1)
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
        phases.mark("allocate");
        guarding.apply(topo, place, &mut sizes, &fair_all);
        if let Some(h) = self.scheme.hysteresis {
            if let Some(was) = was_partitioned {
                let undamped = sizes.clone();
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
                damp(&inp, &mut sizes, was, h, at_risk);
                if h.write_back_share > 0.0 {
                    let falls_back: Vec<bool> =
                        guarding.servers.iter().map(Option::is_some).collect();
                    let budget =
                        write_back_budgets(topo, place, &self.state, obs, &active, h, &falls_back);
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
                    pace_write_backs(&inp, &mut sizes, was, &dirty, &budget, &fair_all);
                }
                honour_guard_floors(&inp, &mut sizes, &undamped, was);
            }
        }
        phases.mark("damp");
        let interval_targets = self.interval_targets(&inp, obs, &targets, &fair_all, was.as_ref());
        phases.mark("interval targets");
        let mut plan = self.build_plan(now, sizes, &models, &targets, &lat_fair);
        for (tp, t) in plan.tenants.iter_mut().zip(interval_targets) {
            tp.interval_target_ms = t;
        }
        phases.mark("build plan");
        // Eviction policy per tenant.
        if let Some(cfg) = self.scheme.policy_choice.clone() {
            for (i, tp) in plan.tenants.iter_mut().enumerate() {
                if guarding.fair_policy.get(i).copied().unwrap_or(false) {
                    // Its nodes fall back: the fair scheme's policy, and SOPA starts
                    // afresh once the guard lets go.
                    self.state.tenants[i].choice = ChoiceState::default();
                    tp.eviction = baseline_policy(&self.scheme);
                    tp.eviction_reason =
                        "do no harm: the fair scheme's policy while its nodes are at fair share"
                            .into();
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
            plan.bandwidth =
                self.state
                    .bandwidth
                    .step(&cfg, topo, &targets, obs, self.state.interval);
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
        phases.mark("policy, bandwidth, boost");
        self.state.interval += 1;
        plan.interval = self.state.interval;
        self.state.previous = Some(plan.clone());
        phases.mark("remember");
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
    ///
    /// [`WriteMix::per_miss_ms`]: crate::model::WriteMix::per_miss_ms
    fn floors(&self, active: &[bool], was: Option<&Previous>) -> Vec<Option<Floor>> {
        let topo = &self.topology;
        let (Some(h), Some(was)) = (self.scheme.hysteresis, was) else {
            return Vec::new();
        };
        if !h.hold_floors {
            return Vec::new();
        }
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
        was: Option<&Previous>,
    ) -> Vec<Option<f64>> {
        let topo = inp.topo;
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
            // MLMS's one-level baselines leave the other level one shared cache per node,
            // as the paper's first-level-only and second-level-only schemes do.
            Allocation::Mlms {
                levels: MlmsLevels::First,
                ..
            } => Layout::PartitionedLevel1,
            Allocation::Mlms {
                levels: MlmsLevels::Second,
                ..
            } => Layout::PartitionedLevel2,
            _ => Layout::Partitioned,
        };
        let active = vec![true; n];
        let inp = Inputs {
            topo,
            place: &self.placement,
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
                    Layout::Partitioned | Layout::PartitionedLevel1 | Layout::PartitionedLevel2 => {
                        (
                            sizes.l1[i],
                            sizes.l2[i].clone(),
                            sizes.l1_reason[i].clone(),
                            sizes.l2_reason[i].clone(),
                        )
                    }
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
                // A level run as one shared cache per node: the size shown is the node's
                // (the prediction above is the plan's, at the size the model assumed).
                let (l1, r1) = if layout.shared_at(1) {
                    (topo.hosts[t.host].capacity, Reason::Shared)
                } else {
                    (l1, r1)
                };
                let (l2, r2) = if layout.shared_at(2) && layout != Layout::Shared {
                    let caps = t.servers.iter().map(|&s| topo.servers[s].capacity);
                    (caps.collect(), Reason::Shared)
                } else {
                    (l2, r2)
                };
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
            scale_out: Vec::new(),
            consolidated: Vec::new(),
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
