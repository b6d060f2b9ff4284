//! The controller: topology, scheme and state, and the enforcement step that joins the
//! stages (see the crate doc for the pipeline).

use crate::allocate::{self, Inputs, Sizes};
use crate::bandwidth::BandwidthState;
use crate::hysteresis::limit_moves;
use crate::model::{latency_target, LatencyModel};
use crate::observe::Observations;
use crate::plan::{BoostPlan, Layout, Partition, Plan, Reason, Shortfall, TenantPlan};
use crate::policy_choice::ChoiceState;
use crate::scheme::{Allocation, MlmsModel, Scheme};
use crate::topology::{ServiceTimes, Topology};
use crate::ControlError;
use lachesis_alloc::boost::{step as boost_step, PeriodObservation, ThresholdState};
use lachesis_alloc::mlms::model::{Regression, Sample};
use lachesis_alloc::monotone_envelope;
use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};

/// MLMS samples kept per tenant.
const SAMPLES: usize = 16;

/// What the controller carries from one interval to the next (plain data).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ControlState {
    /// Steps taken.
    pub interval: u64,
    /// Per tenant, service times as last observed (smoothed).
    pub service: Vec<ServiceTimes>,
    /// Per tenant, intervals in a row without a request.
    pub idle: Vec<u32>,
    /// Per tenant, (allocation, observed latency) samples for MLMS's regression.
    pub samples: Vec<Vec<Sample>>,
    /// Per tenant, the last curve of the policy it runs.
    pub curves: Vec<Option<HitRatioCurve>>,
    /// Per tenant, SOPA's decision state.
    pub choice: Vec<ChoiceState>,
    /// The bandwidth learners.
    pub bandwidth: BandwidthState,
    /// Per server, the hot tier's threshold state.
    pub boost: Vec<Option<ThresholdState>>,
    /// The last plan.
    pub previous: Option<Plan>,
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

    /// A controller continuing from `state` (as persisted by the live controller).
    pub fn resume(
        topology: Topology,
        scheme: Scheme,
        mut state: ControlState,
    ) -> Result<Controller, ControlError> {
        topology.validate()?;
        let n = topology.tenants.len();
        state.service.resize(n, topology.service);
        state.idle.resize(n, 0);
        state.samples.resize(n, Vec::new());
        state.curves.resize(n, None);
        state.choice.resize(n, ChoiceState::default());
        state.boost.resize(topology.servers.len(), None);
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
            .map(|i| idle_cfg.map_or(true, |c| self.state.idle[i] < c.intervals))
            .collect();
        let inp = Inputs {
            topo,
            models: &models,
            active: &active,
            idle_floor: idle_cfg.map_or(0, |c| c.floor),
            targets: &targets,
            lat_fair: &lat_fair,
            rates: &rates,
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
                    intervals: self.state.idle[i],
                };
                sizes.l1_reason[i] = r.clone();
                sizes.l2_reason[i] = r;
            }
        }
        if let (Some(h), Some(prev)) = (self.scheme.hysteresis, self.state.previous.as_ref()) {
            if prev.layout == Layout::Partitioned && prev.tenants.len() == n {
                let returned =
                    (0..n).any(|i| self.state.idle[i] == 0 && prev.tenants[i].l1.reason.is_idle());
                let at_risk = returned
                    || (0..n).any(|i| match targets[i] {
                        Some(t) => {
                            let o = &obs.tenants[i];
                            (o.requests > 0 && o.mean_latency_ms > t)
                                || inp.latency(
                                    i,
                                    prev.tenants[i].l1.size,
                                    &l2_sizes(&prev.tenants[i]),
                                ) > t
                        }
                        None => false,
                    });
                damp(&inp, &mut sizes, prev, h, at_risk);
            }
        }
        let mut plan = self.build_plan(now, sizes, &models, &targets, &lat_fair);
        // Eviction policy per tenant.
        if let Some(cfg) = self.scheme.policy_choice.clone() {
            for (i, tp) in plan.tenants.iter_mut().enumerate() {
                let size = (tp.l1.size + tp.l2_total()) as f64;
                let (p, why) = self.state.choice[i].step(&cfg, &obs.tenants[i], size);
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
                let st = self.state.boost[s].get_or_insert_with(ThresholdState::default);
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
        Ok(plan)
    }

    fn observe(&mut self, obs: &Observations) {
        let prev = self.state.previous.clone();
        for (i, o) in obs.tenants.iter().enumerate() {
            let s = &mut self.state.service[i];
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
            self.state.idle[i] = if o.requests == 0 {
                self.state.idle[i].saturating_add(1)
            } else {
                0
            };
            if let (Some(p), true) = (prev.as_ref(), o.requests > 0) {
                if let Some(tp) = p.tenants.get(i) {
                    let v = &mut self.state.samples[i];
                    if v.len() == SAMPLES {
                        v.remove(0);
                    }
                    v.push(Sample {
                        c1: tp.l1.size as f64,
                        c2: tp.l2_total() as f64,
                        latency: o.mean_latency_ms,
                    });
                }
            }
            let running = self.state.choice[i].active.clone();
            let curve = running
                .as_deref()
                .and_then(|p| o.curve(p))
                .or_else(|| o.curves.first().map(|c| &c.curve));
            if let Some(c) = curve {
                self.state.curves[i] = Some(monotone_envelope(c));
            }
        }
    }

    fn models(&self) -> Vec<LatencyModel> {
        let flat = HitRatioCurve::from_pairs([(0, 1.0), (1, 1.0)]).expect("valid");
        (0..self.topology.tenants.len())
            .map(|i| LatencyModel {
                curve: self.state.curves[i].clone().unwrap_or_else(|| flat.clone()),
                service: self.state.service[i],
                levels: self.topology.levels,
            })
            .collect()
    }

    /// MLMS's regression for tenant `i`, once three distinct allocations were observed.
    fn regression(&self, i: usize, k1: u64, k2: u64) -> Option<Regression> {
        let v = &self.state.samples[i];
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
        };
        let mut infeasible = sizes.shortfalls.clone();
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
                if met == Some(false) && !infeasible.iter().any(|s| s.tenant == t.name) {
                    infeasible.push(Shortfall {
                        tenant: t.name.clone(),
                        target_ms: targets[i].unwrap_or(0.0),
                        predicted_ms: predicted,
                        reason: "the allocation predicted for it is short of its target".into(),
                    });
                }
                let running = self.state.choice[i]
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

fn l2_sizes(tp: &TenantPlan) -> Vec<u64> {
    tp.l2.iter().map(|p| p.size).collect()
}

impl Reason {
    fn is_idle(&self) -> bool {
        matches!(self, Reason::Idle { .. })
    }
}

/// Applies hysteresis to `sizes` against the previous plan.
fn damp(inp: &Inputs, sizes: &mut Sizes, prev: &Plan, h: crate::scheme::Hysteresis, at_risk: bool) {
    let topo = inp.topo;
    let n = topo.tenants.len();
    let objective = |l1: &dyn Fn(usize) -> u64, l2: &dyn Fn(usize) -> Vec<u64>| -> f64 {
        (0..n)
            .filter(|&i| inp.active[i])
            .map(|i| {
                topo.tenants[i].class.weight() * inp.latency(i, l1(i), &l2(i))
                    / inp.lat_fair[i].max(1e-12)
            })
            .sum()
    };
    let old = objective(&|i| prev.tenants[i].l1.size, &|i| {
        l2_sizes(&prev.tenants[i])
    });
    let new = objective(&|i| sizes.l1[i], &|i| sizes.l2[i].clone());
    let gain = if old > 0.0 { (old - new) / old } else { 0.0 };
    if !at_risk && gain < h.min_gain {
        for i in 0..n {
            let p = &prev.tenants[i];
            if sizes.l1[i] != p.l1.size {
                sizes.l1_reason[i] = Reason::Hysteresis { gain };
            }
            if sizes.l2[i] != l2_sizes(p) {
                sizes.l2_reason[i] = Reason::Hysteresis { gain };
            }
            sizes.l1[i] = p.l1.size;
            sizes.l2[i] = l2_sizes(p);
        }
        return;
    }
    for (hx, host) in topo.hosts.iter().enumerate() {
        let members = topo.on_host(hx);
        let before: Vec<u64> = members.iter().map(|&i| prev.tenants[i].l1.size).collect();
        let target: Vec<u64> = members.iter().map(|&i| sizes.l1[i]).collect();
        let (got, limited) = limit_moves(&before, &target, host.capacity, h.max_move);
        for (k, &i) in members.iter().enumerate() {
            if limited && got[k] != target[k] {
                sizes.l1_reason[i] = Reason::MoveLimited { target: target[k] };
            }
            sizes.l1[i] = got[k];
        }
    }
    for (s, server) in topo.servers.iter().enumerate() {
        let members = topo.on_server(s);
        let pos = |i: usize| {
            topo.tenants[i]
                .servers
                .iter()
                .position(|&x| x == s)
                .unwrap_or(0)
        };
        let before: Vec<u64> = members
            .iter()
            .map(|&i| prev.tenants[i].l2[pos(i)].size)
            .collect();
        let target: Vec<u64> = members.iter().map(|&i| sizes.l2[i][pos(i)]).collect();
        let (got, limited) = limit_moves(&before, &target, server.capacity, h.max_move);
        for (k, &i) in members.iter().enumerate() {
            if limited && got[k] != target[k] {
                sizes.l2_reason[i] = Reason::MoveLimited { target: target[k] };
            }
            sizes.l2[i][pos(i)] = got[k];
        }
    }
}
