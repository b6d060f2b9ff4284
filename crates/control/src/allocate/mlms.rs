//! MLMS (Prabhakar et al., ICS'10) as a control method: the paper's scheme from
//! `lachesis_alloc::mlms` — fair-share base, SLO-fulfilment set, infeasible-partition
//! filter, spare space by projected gain for fair speedup, the level-2 server LP — fed with
//! each tenant's regression model refitted from its observed (allocation, latency) samples,
//! or the curve model where no regression can be fitted yet.
//!
//! The model is bootstrapped as the paper's Algorithm 1 does ("Initialize IOSalloc and
//! STSalloc to bootstrap allocations"): before it plans, MLMS enforces
//! [`BOOTSTRAP_PLANS`] sampled allocations after the fair start ([`bootstrap`]), so each
//! tenant's regression has three distinct (level-1, level-2) samples to be fitted from.
//!
//! MLMS has no notion of idle tenants: every tenant takes part. Its SLO is the relative
//! degradation `lat_assured = (1 + degradation) · lat_fair`; an absolute target (latency,
//! or IOPS and bandwidth through Little's law) overrides it. Tenants without an SLO are
//! given one no allocation can miss. Level-2 placements from the LP are rounded down.

use super::{Inputs, Sizes};
use crate::plan::{Reason, Shortfall};
use crate::scheme::MlmsLevels;
use crate::topology::Slo;
use lachesis_alloc::mlms::model::{LevelLatencies, Regression, TenantModel};
use lachesis_alloc::mlms::{plan, MlmsProblem, MlmsTenant, Scheme};

/// Sampled allocations MLMS enforces after the fair start, before its regression plans.
pub const BOOTSTRAP_PLANS: u64 = 2;

/// The `k`-th bootstrap allocation (`1..=BOOTSTRAP_PLANS`): on each node of a level MLMS
/// controls, its tenants' fair shares scaled by multipliers spread evenly from 0.5 to 1.5
/// (summing to the number of tenants, so the node stays within its capacity), the
/// assignment rotated by `k` at level 1 and by `2k + 1` at level 2, so that each tenant's
/// three samples (fair, then `k = 1, 2`) differ at both levels and do not lie on one line
/// wherever a node has more than one tenant. A tenant alone on a node keeps that node's
/// whole capacity there.
pub fn bootstrap(inp: &Inputs, levels: MlmsLevels, k: u64) -> Sizes {
    let topo = inp.topo;
    let all = vec![true; topo.tenants.len()];
    let mut out = super::fair(topo, inp.place, &all, 0);
    let scale = |fair: u64, j: usize, h: usize, shift: usize| -> u64 {
        if h < 2 {
            return fair;
        }
        let pos = (j + shift) % h;
        let m = 0.5 + pos as f64 / (h - 1) as f64;
        (fair as f64 * m).floor() as u64
    };
    let place = inp.place;
    let k = k as usize;
    if levels != MlmsLevels::Second {
        for members in &place.hosts {
            for (j, &i) in members.iter().enumerate() {
                out.l1[i] = scale(out.l1[i], j, members.len(), k);
            }
        }
    }
    if levels != MlmsLevels::First {
        for members in &place.servers {
            for (j, &(i, s)) in members.iter().enumerate() {
                out.l2[i][s] = scale(out.l2[i][s], j, members.len(), 2 * k + 1);
            }
        }
    }
    let why = Reason::MlmsBootstrap { sample: k as u32 };
    for i in 0..topo.tenants.len() {
        out.l1_reason[i] = why.clone();
        out.l2_reason[i] = why.clone();
    }
    out
}

/// MLMS's sizes; `regressions[i]` is tenant `i`'s fitted model, if any. Falls back to fair
/// share (with the reason in a shortfall-free plan) if the LP cannot be solved.
pub fn allocate(inp: &Inputs, levels: MlmsLevels, regressions: &[Option<Regression>]) -> Sizes {
    let topo = inp.topo;
    let tenants: Vec<MlmsTenant> = topo
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = &inp.models[i].service;
            let model = match &regressions[i] {
                Some(r) => TenantModel::Regression(r.clone()),
                None => TenantModel::Curve {
                    curve: inp.models[i].curve.clone(),
                    lat: LevelLatencies {
                        lat1: s.l1_hit_ms,
                        lat2: s.l2_hit_ms,
                        lat_disk: s.miss_ms,
                    },
                },
            };
            let (slo, latency_target) = match t.slo {
                Some(Slo::Degradation(d)) => (1.0 + d, None),
                Some(_) => (1.0, inp.targets[i]),
                None => (1e9, None),
            };
            MlmsTenant {
                name: t.name.clone(),
                model,
                slo,
                latency_target,
                host: t.host,
                servers: t.servers.clone(),
                rate: inp.rates[i],
            }
        })
        .collect();
    let problem = MlmsProblem {
        tenants,
        hosts: topo.hosts.iter().map(|h| h.capacity).collect(),
        servers: topo.servers.iter().map(|s| s.capacity).collect(),
        grid: 32,
    };
    let scheme = match levels {
        MlmsLevels::Both => Scheme::Mlms,
        MlmsLevels::First => Scheme::FirstLevelOnly,
        MlmsLevels::Second => Scheme::SecondLevelOnly,
    };
    let all_active = vec![true; topo.tenants.len()];
    let mut out = super::fair(topo, inp.place, &all_active, 0);
    let Ok(p) = plan(&problem, scheme) else {
        return out;
    };
    for (i, t) in topo.tenants.iter().enumerate() {
        out.l1[i] = p.c1[i];
        for &(s, blocks) in &p.placement.per_tenant[i] {
            if let Some(k) = t.servers.iter().position(|&x| x == s) {
                out.l2[i][k] = blocks.max(0.0).floor() as u64;
            }
        }
        out.l1_reason[i] = Reason::Mlms;
        out.l2_reason[i] = Reason::Mlms;
        if t.slo.is_some() && !p.slo_met[i] {
            out.shortfalls.push(Shortfall {
                tenant: t.name.clone(),
                target_ms: p.lat_assured[i],
                predicted_ms: p.latency[i],
                reason: "MLMS: no placeable candidate meets it".into(),
            });
        }
    }
    // Rounding of LP shares may leave a server over by a fraction; trim to capacity.
    let place = inp.place;
    for (s, server) in topo.servers.iter().enumerate() {
        let mut used: u64 = place.servers[s].iter().map(|&(i, k)| out.l2[i][k]).sum();
        for &(i, k) in &place.servers[s] {
            if used <= server.capacity {
                break;
            }
            let cut = (used - server.capacity).min(out.l2[i][k]);
            out.l2[i][k] -= cut;
            used -= cut;
        }
    }
    out
}
