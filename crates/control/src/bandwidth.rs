//! Bandwidth proportions learned by linear reward-penalty automata (the coordinated
//! learning paper, `lachesis_alloc::automata`), one per scheduled resource: each host's
//! link to its storage divides between the host's tenants, and each storage server's disk
//! divides between its *volumes*, a volume being the I/O of one host's tenants on that
//! server (the paper's virtual block device that one machine mounts). A tenant's share of
//! a server is its volume's share split in the proportions its host gives the volume's
//! tenants (equal where the host does not learn), and the plan says which volume each
//! tenant is in ([`ResourceShares::volumes`]), so a scheduler by volume can serve a
//! volume's tenants together in the volume's time.
//!
//! Feedback each interval is every tenant's deviance from target in the metric of its SLO
//! (`lachesis_alloc::automata::dft`): IOPS and MB/s as measured against the target, mean
//! and tail latency against the bound, a degradation SLO's mean latency against the
//! latency it allows; a tenant without an SLO is best effort and always 0. A controller's
//! error is the sum of the squared dfts of the tenants whose I/O it schedules, and its
//! answer is the benefit of its last move (`automata::feedback`).
//!
//! Two members get the paper's five actions (10/90 ... 90/10); more get every way of
//! dealing `units` equal units with at least one each. Coordinated: a token passes
//! between the levels (hosts, then storage servers), `turn` actions a level; uncoordinated:
//! every automaton explores and learns at every interval; `servers_only` (the paper's
//! single storage learner): no learners at the hosts. The random choices come from a
//! generator seeded by the scheme's seed and the interval number, so a run replays.

use crate::observe::{Observations, TenantObservation};
use crate::plan::ResourceShares;
use crate::scheme::Automata;
use crate::topology::{Slo, Topology};
use lachesis_alloc::automata::{dft, error, Automaton, Coordination, Goal, Learners};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// One scheduled resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    /// `host` or `server`.
    pub level: String,
    /// Index of the node.
    pub node: usize,
    /// What the proportions are over: at a host, its tenants one by one; at a storage
    /// server, its volumes (the tenants of one host that use it, hosts in order).
    pub members: Vec<Vec<usize>>,
    /// The action space (proportion vectors over `members`).
    pub actions: Vec<Vec<f64>>,
}

impl Resource {
    /// Every tenant whose I/O this resource schedules.
    fn tenants(&self) -> impl Iterator<Item = usize> + '_ {
        self.members.iter().flatten().copied()
    }
}

/// The learners' state (plain data).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BandwidthState {
    #[serde(default)]
    resources: Vec<Resource>,
    /// The automata, one per resource, with their token (`None` until the first step, or
    /// when no resource has two members).
    #[serde(default)]
    levels: Option<Learners>,
    #[serde(default)]
    chosen: Vec<usize>,
}

/// Every way of dealing `units` units to `k` parts, at least one each, as proportions.
pub fn compositions(k: usize, units: u32) -> Vec<Vec<f64>> {
    fn rec(k: usize, left: u32, cur: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
        if k == 1 {
            cur.push(left);
            out.push(cur.clone());
            cur.pop();
            return;
        }
        for v in 1..=left.saturating_sub(k as u32 - 1) {
            cur.push(v);
            rec(k - 1, left - v, cur, out);
            cur.pop();
        }
    }
    let units = units.max(k as u32);
    let mut out = Vec::new();
    rec(k, units, &mut Vec::new(), &mut out);
    out.into_iter()
        .map(|v| v.iter().map(|&u| u as f64 / units as f64).collect())
        .collect()
}

/// The actions of a resource with `k` members: the paper's five for two, compositions of
/// `units` for more.
pub fn actions(k: usize, units: u32) -> Vec<Vec<f64>> {
    if k == 2 {
        Automaton::paper_actions()
    } else {
        compositions(k, units)
    }
}

/// Tenant `i`'s deviance from target this interval in its SLO's metric (see the module
/// doc); `latency_target` is the mean latency (ms) the controller derived for it.
pub fn tenant_dft(
    slo: Option<&Slo>,
    o: &TenantObservation,
    seconds: f64,
    latency_target: Option<f64>,
) -> f64 {
    let Some(slo) = slo else {
        return dft(Goal::BestEffort, 0.0);
    };
    let secs = seconds.max(1e-9);
    let measured = o.requests > 0;
    match *slo {
        Slo::Iops(v) => dft(Goal::AtLeast(v), o.requests as f64 / secs),
        Slo::Mbps(m) => dft(Goal::AtLeast(m), o.bytes as f64 / secs / 1e6),
        Slo::LatencyMs(t) if measured => dft(Goal::AtMost(t), o.mean_latency_ms),
        Slo::Degradation(_) if measured => match latency_target {
            Some(t) => dft(Goal::AtMost(t), o.mean_latency_ms),
            None => 0.0,
        },
        Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) if measured => {
            let Some((q, t)) = slo.tail() else {
                return 0.0;
            };
            let observed = o
                .latency_quantiles
                .and_then(|x| x.at(q))
                .or_else(|| (q == 0.99).then_some(o.p99_latency_ms));
            observed.map_or(0.0, |ms| dft(Goal::AtMost(t), ms))
        }
        _ => 0.0,
    }
}

impl BandwidthState {
    /// One interval: learn from `obs` (each tenant against its SLO; `targets` are the
    /// mean latencies the controller derived, used for degradation SLOs), then choose
    /// every resource's proportions for the next interval.
    pub fn step(
        &mut self,
        cfg: &Automata,
        topo: &Topology,
        targets: &[Option<f64>],
        obs: &Observations,
        interval: u64,
    ) -> Vec<ResourceShares> {
        if self.levels.is_none() {
            self.init(cfg, topo);
        }
        let Some(learners) = self.levels.as_mut() else {
            return Vec::new();
        };
        let mut rng = StdRng::seed_from_u64(
            0x6c61_6368_6573_6973 ^ cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ interval,
        );
        let dfts: Vec<f64> = topo
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| match obs.tenants.get(i) {
                Some(o) => tenant_dft(
                    t.slo.as_ref(),
                    o,
                    obs.seconds,
                    targets.get(i).copied().flatten(),
                ),
                None => 0.0,
            })
            .collect();
        let errors: Vec<f64> = self
            .resources
            .iter()
            .map(|r| error(&r.tenants().map(|i| dfts[i]).collect::<Vec<_>>()))
            .collect();
        self.chosen = learners.step(&errors, &mut rng);
        self.shares(topo.tenants.len())
    }

    /// The proportions of every resource under the chosen actions.
    fn shares(&self, tenants: usize) -> Vec<ResourceShares> {
        // Each tenant's proportion at its host, where the host learns.
        let mut at_host: Vec<Option<f64>> = vec![None; tenants];
        for (r, &a) in self.resources.iter().zip(&self.chosen) {
            if r.level == "host" {
                for (m, &p) in r.members.iter().zip(&r.actions[a]) {
                    for &i in m {
                        if let Some(x) = at_host.get_mut(i) {
                            *x = Some(p);
                        }
                    }
                }
            }
        }
        self.resources
            .iter()
            .zip(&self.chosen)
            .map(|(r, &a)| {
                let (mut shares, mut volumes) = (Vec::new(), Vec::new());
                for (v, (m, &p)) in r.members.iter().zip(&r.actions[a]).enumerate() {
                    let weight = |i: usize| at_host.get(i).copied().flatten().unwrap_or(1.0);
                    let total: f64 = m.iter().map(|&i| weight(i)).sum();
                    for &i in m {
                        let within = if total > 0.0 {
                            weight(i) / total
                        } else {
                            1.0 / m.len() as f64
                        };
                        shares.push((i, p * within));
                        volumes.push(v);
                    }
                }
                ResourceShares {
                    level: r.level.clone(),
                    node: r.node,
                    shares,
                    volumes: if r.level == "server" {
                        volumes
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect()
    }

    fn init(&mut self, cfg: &Automata, topo: &Topology) {
        let place = topo.placement();
        let mut candidates: Vec<(&str, usize, Vec<Vec<usize>>)> = Vec::new();
        if !cfg.servers_only {
            for (h, members) in place.hosts.into_iter().enumerate() {
                candidates.push(("host", h, members.into_iter().map(|i| vec![i]).collect()));
            }
        }
        for (s, members) in place.servers.into_iter().enumerate() {
            // Volumes: the server's tenants grouped by their host, hosts in order.
            let mut volumes: Vec<(usize, Vec<usize>)> = Vec::new();
            for (i, _) in members {
                let h = topo.tenants[i].host;
                match volumes.iter_mut().find(|(vh, _)| *vh == h) {
                    Some((_, v)) => v.push(i),
                    None => volumes.push((h, vec![i])),
                }
            }
            volumes.sort_by_key(|(h, _)| *h);
            candidates.push(("server", s, volumes.into_iter().map(|(_, v)| v).collect()));
        }
        let (mut controllers, mut levels) = (Vec::new(), Vec::new());
        for (level, node, members) in candidates {
            if members.len() < 2 {
                continue;
            }
            let acts = actions(members.len(), cfg.units);
            let Ok(a) = Automaton::new(acts.clone(), cfg.alpha, cfg.beta) else {
                continue;
            };
            controllers.push(a);
            levels.push(usize::from(level == "server"));
            self.resources.push(Resource {
                level: level.into(),
                node,
                members,
                actions: acts,
            });
        }
        if controllers.is_empty() {
            return;
        }
        let coordination = if cfg.coordinated {
            Coordination::Token { turn: cfg.turn }
        } else {
            Coordination::None
        };
        self.levels = Learners::new(controllers, levels, coordination).ok();
    }

    /// The resources learned over, in the order of [`BandwidthState::automata`].
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The automata, one per resource (empty before the first step).
    pub fn automata(&self) -> &[Automaton] {
        self.levels.as_ref().map_or(&[], |l| &l.controllers)
    }
}

#[cfg(test)]
mod tests;
