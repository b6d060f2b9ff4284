//! Space allocation, one module per method: fair share and the per-node optimiser here,
//! [`moirai`] (hits per node, optional SLO minimums), [`mlms`] (the paper's two-level
//! scheme through `lachesis_alloc::mlms`) and [`lachesis`] (SLO minimums on both levels,
//! then fair speedup).
//!
//! Every method returns [`Sizes`]: a level-1 size per tenant and a level-2 size per tenant
//! and server (aligned with the tenant's `servers`), each with its [`Reason`], plus the
//! shortfalls it found. Sizes never exceed a node's capacity in sum; the unit tests and the
//! controller's property test hold every method to that.

pub mod lachesis;
pub mod mlms;
pub mod moirai;

use crate::model::LatencyModel;
use crate::plan::{Reason, Shortfall};
use crate::topology::{Placement, Topology};
use lachesis_alloc::utility::{fast, water_fill, FixUp, UtilityProblem, UtilityTenant};
use mrc::HitRatioCurve;

/// What an allocation method decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Sizes {
    /// Level-1 blocks per tenant.
    pub l1: Vec<u64>,
    /// Level-2 blocks per tenant per server (aligned with `Tenant::servers`).
    pub l2: Vec<Vec<u64>>,
    /// Why each level-1 size.
    pub l1_reason: Vec<Reason>,
    /// Why each tenant's level-2 sizes.
    pub l2_reason: Vec<Reason>,
    /// SLOs the method could not meet.
    pub shortfalls: Vec<Shortfall>,
}

impl Sizes {
    /// Level-2 blocks of tenant `i` over all its servers.
    pub fn l2_total(&self, i: usize) -> u64 {
        self.l2[i].iter().sum()
    }
}

/// What every method gets to work with.
pub struct Inputs<'a> {
    /// The topology.
    pub topo: &'a Topology,
    /// Which tenants use each of its nodes.
    pub place: &'a Placement,
    /// Per tenant, its latency model.
    pub models: &'a [LatencyModel],
    /// Per tenant, whether it takes part (idle tenants do not; they get the floor).
    pub active: &'a [bool],
    /// Blocks an idle tenant keeps per partition.
    pub idle_floor: u64,
    /// Per tenant, the latency its SLO allows (ms).
    pub targets: &'a [Option<f64>],
    /// Per tenant, its fair-share latency (ms).
    pub lat_fair: &'a [f64],
    /// Per tenant, requests per second last interval.
    pub rates: &'a [f64],
    /// Per tenant, a floor (empty: none has one); methods that honour floors
    /// ([`lachesis`]) leave it at least that while room is left.
    pub floors: &'a [Option<Floor>],
    /// Per tenant, its do-no-harm floor (empty: none has one; see [`crate::guard`]);
    /// methods that honour it ([`lachesis`]) reserve it before anything else.
    pub guards: &'a [Option<Floor>],
}

/// A tenant's floor: sizes it held last interval that it keeps while room is left, and
/// why (see `Controller::step`): [`Reason::Warming`] (both levels) or
/// [`Reason::WriteBuffer`] (level 2 only; its level-1 floor is 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// Level-1 blocks it keeps.
    pub l1: u64,
    /// Level-2 blocks it keeps per server (aligned with `Tenant::servers`).
    pub l2: Vec<u64>,
    /// Why.
    pub reason: Reason,
}

impl Inputs<'_> {
    /// Tenant `i`'s do-no-harm floor, if it has one.
    pub fn guard(&self, i: usize) -> Option<&Floor> {
        self.guards.get(i).and_then(Option::as_ref)
    }

    /// Tenant `i`'s floor, if it has one.
    pub fn floor(&self, i: usize) -> Option<&Floor> {
        self.floors.get(i).and_then(Option::as_ref)
    }

    /// Predicted latency of tenant `i` with `c1` level-1 blocks and `x[k]` blocks on its
    /// `k`-th server. Data is striped evenly, so each server sees `1/n` of the tenant's
    /// keys and `x` blocks there act like `n·x` blocks of one cache for that share.
    pub fn latency(&self, i: usize, c1: u64, x: &[u64]) -> f64 {
        let n = x.len().max(1) as f64;
        if x.is_empty() {
            return self.models[i].latency(c1 as f64, 0.0);
        }
        x.iter()
            .map(|&xs| self.models[i].latency(c1 as f64, n * xs as f64))
            .sum::<f64>()
            / n
    }
}

/// Equal shares: each host among its tenants, each server among the tenants striped over
/// it. Idle tenants (per `active`) get `floor` and are not counted.
pub fn fair(topo: &Topology, place: &Placement, active: &[bool], floor: u64) -> Sizes {
    let n = topo.tenants.len();
    let mut l1 = vec![0u64; n];
    let mut l2: Vec<Vec<u64>> = topo
        .tenants
        .iter()
        .map(|t| vec![0; t.servers.len()])
        .collect();
    // Members are `(tenant, position of the node in the tenant's list)`.
    let split = |members: &[(usize, usize)], cap: u64, set: &mut dyn FnMut(usize, usize, u64)| {
        let on = members.iter().filter(|m| active[m.0]).count() as u64;
        let off = members.len() as u64 - on;
        let left = cap.saturating_sub(floor * off);
        for &(i, k) in members {
            if active[i] {
                set(i, k, left / on);
            } else {
                set(i, k, floor.min(cap));
            }
        }
    };
    for (h, host) in topo.hosts.iter().enumerate() {
        let members: Vec<(usize, usize)> = place.hosts[h].iter().map(|&i| (i, 0)).collect();
        split(&members, host.capacity, &mut |i, _, v| l1[i] = v);
    }
    for (s, server) in topo.servers.iter().enumerate() {
        split(&place.servers[s], server.capacity, &mut |i, k, v| {
            l2[i][k] = v
        });
    }
    let reason = |i: usize| {
        if active[i] {
            Reason::FairShare
        } else {
            Reason::Idle { intervals: 0 }
        }
    };
    Sizes {
        l1,
        l2,
        l1_reason: (0..n).map(reason).collect(),
        l2_reason: (0..n).map(reason).collect(),
        shortfalls: Vec::new(),
    }
}

/// Tenant index by name.
pub(crate) fn name_index(topo: &Topology) -> std::collections::HashMap<&str, usize> {
    topo.tenants
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect()
}

/// One item of a per-node optimisation: a curve (miss-ratio form over blocks), what a unit
/// of `1 − miss` is worth, and the blocks it must get.
pub struct Item {
    /// Its curve.
    pub curve: HitRatioCurve,
    /// Its weight.
    pub weight: f64,
    /// Blocks it must get.
    pub min: u64,
}

/// How a per-node optimisation searches ([`optimise_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// The concave-hull optimiser, in steps of 1/1024 of the node: exact on concave curves,
    /// within one hull segment otherwise, so a cliff (a loop that fits) is seen across a
    /// plateau. Ours.
    Hull,
    /// Moirai's Algorithm 3.1 as published: water-filling in steps of `ε = 0.001 · C`,
    /// each step to the item whose next step gains the most (ties to the lowest index).
    /// It stops short of a cliff behind a plateau, as the paper says of non-concave curves.
    WaterFill,
}

/// Shares `capacity` blocks among `items` to maximise `Σ weight · (1 − miss(size))` with
/// the concave-hull optimiser ([`Search::Hull`]).
pub fn optimise(capacity: u64, items: &[Item]) -> (Vec<u64>, Vec<f64>) {
    optimise_with(capacity, items, Search::Hull)
}

/// Shares `capacity` blocks among `items` to maximise `Σ weight · (1 − miss(size))` by
/// `search`. Minimums that do not fit are scaled down in proportion. Returns sizes and each
/// item's marginal gain per block at its size. Space no item gains from is spread evenly,
/// so no block of the node lies unused (Algorithm 3.1 hands out all of `C`; when no
/// workload gains, its arg max is a tie the paper does not break, and an even split is
/// ours).
pub fn optimise_with(capacity: u64, items: &[Item], search: Search) -> (Vec<u64>, Vec<f64>) {
    if items.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let step = match search {
        Search::Hull => (capacity / 1024).max(1),
        Search::WaterFill => (capacity / 1000).max(1),
    };
    let cap_steps = capacity / step;
    let mut mins: Vec<u64> = items.iter().map(|t| t.min.div_ceil(step)).collect();
    let need: u64 = mins.iter().sum();
    if need > cap_steps {
        for m in mins.iter_mut() {
            *m = *m * cap_steps / need;
        }
    }
    let tenants: Vec<UtilityTenant> = items
        .iter()
        .zip(&mins)
        .map(|(t, &m)| UtilityTenant {
            curve: &t.curve,
            weight: if t.weight.is_finite() {
                t.weight.max(0.0)
            } else {
                0.0
            },
            min_steps: m,
            max_steps: u64::MAX,
        })
        .collect();
    let problem = UtilityProblem {
        tenants,
        step,
        capacity_steps: cap_steps,
    };
    let steps = match search {
        Search::Hull => fast(&problem, FixUp::Round).map(|a| a.steps),
        Search::WaterFill => water_fill(&problem),
    }
    .unwrap_or_else(|_| mins.clone());
    let mut sizes: Vec<u64> = steps.iter().map(|&k| k * step).collect();
    let used: u64 = sizes.iter().sum();
    let spare = capacity.saturating_sub(used);
    let each = spare / items.len() as u64;
    for s in sizes.iter_mut() {
        *s += each;
    }
    let gains = items
        .iter()
        .zip(&sizes)
        .map(|(t, &s)| {
            let d = t.curve.miss_ratio(s as f64) - t.curve.miss_ratio((s + step) as f64);
            t.weight * d / step as f64
        })
        .collect();
    (sizes, gains)
}

#[cfg(test)]
mod tests;
