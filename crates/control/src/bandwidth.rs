//! Bandwidth proportions learned by linear reward-penalty automata, one per scheduled
//! resource (each host and each storage server with two or more tenants), coordinated by a
//! token passed between them (`lachesis_alloc::automata`).
//!
//! Each automaton's actions are proportion vectors over the resource's tenants: every way
//! of dealing `units` equal units with at least one each. Feedback each interval is every
//! tenant's deviance from its target latency, `dft = (observed − target) / target`
//! (0 for best effort and for tenants without a target), and the error is `Σ dft²`.
//! Coordinated: only the token holder explores and learns, for `turn` intervals at a time;
//! uncoordinated: every automaton explores and learns from the same error at once. The
//! random choices come from a generator seeded by the interval number, so a run replays.

use crate::plan::ResourceShares;
use crate::scheme::Automata;
use crate::topology::{Class, Topology};
use lachesis_alloc::automata::{error, Automaton, Coordinator};
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
    /// Tenant indices sharing it.
    pub members: Vec<usize>,
    /// The action space (proportion vectors).
    pub actions: Vec<Vec<f64>>,
}

/// The learners' state (plain data).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BandwidthState {
    resources: Vec<Resource>,
    learners: Option<Coordinator>,
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

impl BandwidthState {
    /// One interval: learn from `observed` mean latencies against `targets` (ms), then
    /// choose every resource's proportions for the next interval.
    pub fn step(
        &mut self,
        cfg: &Automata,
        topo: &Topology,
        targets: &[Option<f64>],
        observed: &[f64],
        interval: u64,
    ) -> Vec<ResourceShares> {
        if self.learners.is_none() {
            self.init(cfg, topo);
        }
        let Some(learners) = self.learners.as_mut() else {
            return Vec::new();
        };
        let mut rng = StdRng::seed_from_u64(0x6c61_6368_6573_6973 ^ interval);
        let dfts: Vec<f64> = (0..topo.tenants.len())
            .map(|i| {
                let best_effort =
                    topo.tenants[i].class == Class::BestEffort && targets[i].is_none();
                match targets[i] {
                    Some(t) if !best_effort && observed[i] > 0.0 => {
                        lachesis_alloc::automata::dft(observed[i], t, false)
                    }
                    _ => 0.0,
                }
            })
            .collect();
        if !self.chosen.is_empty() {
            if cfg.coordinated {
                learners.feedback(&dfts);
            } else {
                let err = error(&dfts);
                for c in learners.controllers.iter_mut() {
                    c.learn(err);
                }
            }
        }
        self.chosen = if cfg.coordinated {
            learners.choose(&mut rng)
        } else {
            learners
                .controllers
                .iter_mut()
                .map(|c| c.choose(&mut rng))
                .collect()
        };
        self.resources
            .iter()
            .zip(&self.chosen)
            .map(|(r, &a)| ResourceShares {
                level: r.level.clone(),
                node: r.node,
                shares: r
                    .members
                    .iter()
                    .copied()
                    .zip(r.actions[a].iter().copied())
                    .collect(),
            })
            .collect()
    }

    fn init(&mut self, cfg: &Automata, topo: &Topology) {
        let mut resources = Vec::new();
        let place = topo.placement();
        for (h, members) in place.hosts.into_iter().enumerate() {
            resources.push(("host", h, members));
        }
        for (s, members) in place.servers.into_iter().enumerate() {
            resources.push(("server", s, members.into_iter().map(|m| m.0).collect()));
        }
        let mut controllers = Vec::new();
        for (level, node, members) in resources {
            if members.len() < 2 || (cfg.servers_only && level != "server") {
                continue;
            }
            let actions = compositions(members.len(), cfg.units);
            // Graded feedback: an error of 0.05 (one tenant 22 % off) is half penalty.
            let Ok(a) = Automaton::new(actions.clone(), cfg.alpha, cfg.beta, 0.05) else {
                continue;
            };
            controllers.push(a);
            self.resources.push(Resource {
                level: level.into(),
                node,
                members,
                actions,
            });
        }
        if !controllers.is_empty() {
            self.learners = Some(Coordinator::new(controllers, cfg.turn));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compositions_cover_every_split_with_one_unit_each() {
        let c = compositions(2, 4);
        assert_eq!(c, vec![vec![0.25, 0.75], vec![0.5, 0.5], vec![0.75, 0.25]]);
        // 3 parts of 8 units, each at least one: C(7, 2) = 21
        let c3 = compositions(3, 8);
        assert_eq!(c3.len(), 21);
        assert!(c3
            .iter()
            .all(|v| (v.iter().sum::<f64>() - 1.0).abs() < 1e-12));
    }
}
