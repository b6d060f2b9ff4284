//! MLMS: multi-level, multi-server cache allocation (Prabhakar et al., ICS'10).
//!
//! Each tenant has a latency model over (level-1 size, level-2 size) ([`model`]). One
//! interval's decision ([`plan`] with [`Scheme::Mlms`]):
//! 1. fair share: each host's level 1 split evenly among its tenants, each server's level-2 capacity split evenly among
//!    the tenants connected to it; `lat_fair` is the model there and
//!    `lat_assured = slo * lat_fair` (an explicit latency target overrides it);
//! 2. SLO-fulfilment set: on a grid whose step is a fair share divided by `grid` (per
//!    level), for each level-1 size the smallest level-2 size meeting `lat_assured` (the
//!    Pareto frontier of the set);
//! 3. the feasibility set: every combination of one fulfilment point per tenant that fits
//!    each host's level 1, the level-2 aggregate and each tenant's servers, and whose
//!    level-2 totals can be placed (exactly, by maximum flow: [`flow`]); combinations that
//!    do not fit are filtered out ([`feasible`], with the bounded enumeration it needs);
//! 4. for each feasible combination, all spare space at each level handed out in
//!    proportion to each tenant's projected gain per block ([`spare`]);
//! 5. the winner has the most SLOs met, then the highest fair speedup
//!    `T / Σ lat_scheme / lat_base` (harmonic mean of `lat_base / lat_scheme`, base = fair
//!    share); its level-2 totals are placed on servers by the LP in [`lp`] (if that is
//!    infeasible the next candidate is taken; the fair point is always placeable).
//!
//! Special cases and baselines as [`Scheme`]s: first-level-only / second-level-only (MLMS
//! on one level; the other level is planned at fair share here, and the caller runs it
//! as one shared cache, as the paper's baselines do), fair share, independent (each level's
//! controller maximises its own gain assuming the other level is at fair share), and
//! uncontrolled (shared LRU at each level, approximated by occupancy proportional to each
//! tenant's request rate times its predicted latency — a fixed point, since a tenant that
//! misses more inserts more).

pub mod feasible;
pub mod flow;
pub mod lp;
pub mod model;
mod spare;

use crate::report::row;
use crate::{AllocError, AllocInput, AllocOutput, Objective, SloKind};
use lp::{spread_level2, Placement};
use model::{LevelLatencies, TenantModel};
use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One tenant of an MLMS problem.
#[derive(Clone, Debug)]
pub struct MlmsTenant {
    /// Name.
    pub name: String,
    /// Latency model.
    pub model: TenantModel,
    /// Tolerated degradation relative to the fair share (`lat_assured = slo * lat_fair`).
    pub slo: f64,
    /// An absolute latency target overriding `slo * lat_fair`, if any.
    pub latency_target: Option<f64>,
    /// Index of the level-1 host it runs on (into [`MlmsProblem::hosts`]).
    pub host: usize,
    /// Indices of the level-2 servers it is connected to.
    pub servers: Vec<usize>,
    /// Request rate (uncontrolled baseline only).
    pub rate: f64,
}

/// An MLMS problem.
#[derive(Clone, Debug)]
pub struct MlmsProblem {
    /// The tenants.
    pub tenants: Vec<MlmsTenant>,
    /// Level-1 capacity of each host in blocks; a tenant's level-1 partition lives on its
    /// own host, so each host's tenants share that host's capacity.
    pub hosts: Vec<u64>,
    /// Level-2 capacity of each storage server in blocks.
    pub servers: Vec<u64>,
    /// Grid steps per fair share, per level (at least 1).
    pub grid: u64,
}

/// Which scheme [`plan`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// MLMS over both levels.
    Mlms,
    /// MLMS on level 1 only; level 2 at fair share.
    FirstLevelOnly,
    /// MLMS on level 2 only; level 1 at fair share.
    SecondLevelOnly,
    /// Fair share at both levels.
    FairShare,
    /// Each level maximises its own gain, assuming the other is at fair share.
    Independent,
    /// Shared, unpartitioned caches (modelled).
    Uncontrolled,
}

/// The result of [`plan`].
#[derive(Clone, Debug)]
pub struct MlmsPlan {
    /// Level-1 blocks per tenant.
    pub c1: Vec<u64>,
    /// Level-2 blocks per tenant.
    pub c2: Vec<u64>,
    /// Predicted latency per tenant.
    pub latency: Vec<f64>,
    /// Predicted latency at fair share.
    pub lat_fair: Vec<f64>,
    /// The latency each tenant is assured.
    pub lat_assured: Vec<f64>,
    /// Whether each tenant's predicted latency meets its assured latency.
    pub slo_met: Vec<bool>,
    /// `T / Σ latency / lat_fair`.
    pub fair_speedup: f64,
    /// Level-2 placement on servers.
    pub placement: Placement,
    /// Candidates that passed the filter.
    pub candidates: usize,
}

/// MLMS settings for [`crate::allocate`] (curve model; TOML/JSON `[mlms]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MlmsConfig {
    /// Level-2 capacity per storage server (blocks).
    pub servers: Vec<u64>,
    /// Tenant name to connected server indices; tenants not listed reach every server.
    #[serde(default)]
    pub connect: HashMap<String, Vec<usize>>,
    /// Latency of a level-1 hit, a level-2 hit and a disk access.
    pub latencies: LevelLatencies,
    /// Tolerated degradation relative to the fair share (default 1.0).
    #[serde(default = "one")]
    pub slo: f64,
    /// Grid steps per fair share (default 32).
    #[serde(default = "grid32")]
    pub grid: u64,
}

fn one() -> f64 {
    1.0
}
fn grid32() -> u64 {
    32
}

type Point = (u64, u64);

struct Ctx<'a> {
    p: &'a MlmsProblem,
    c2_total: u64,
    reach: Vec<u64>,
    fair: Vec<Point>,
    lat_fair: Vec<f64>,
    assured: Vec<f64>,
    g1: u64,
    g2: u64,
}

impl<'a> Ctx<'a> {
    fn new(p: &'a MlmsProblem) -> Result<Self, AllocError> {
        let n = p.tenants.len();
        let mut per_server = vec![0u64; p.servers.len()];
        let mut on_host = vec![0u64; p.hosts.len()];
        for t in &p.tenants {
            *on_host.get_mut(t.host).ok_or_else(|| {
                AllocError::BadInput(format!("tenant `{}`: unknown host {}", t.name, t.host))
            })? += 1;
            if t.servers.is_empty() {
                return Err(AllocError::NoConnectedServer(t.name.clone()));
            }
            for &s in &t.servers {
                *per_server.get_mut(s).ok_or_else(|| {
                    AllocError::BadInput(format!("tenant `{}`: unknown server {s}", t.name))
                })? += 1;
            }
        }
        let c2_total: u64 = p.servers.iter().sum();
        let reach: Vec<u64> = p
            .tenants
            .iter()
            .map(|t| t.servers.iter().map(|&s| p.servers[s]).sum())
            .collect();
        let fair: Vec<Point> = p
            .tenants
            .iter()
            .map(|t| {
                let c2: u64 = t
                    .servers
                    .iter()
                    .map(|&s| p.servers[s] / per_server[s])
                    .sum();
                (p.hosts[t.host] / on_host[t.host], c2)
            })
            .collect();
        let lat_fair: Vec<f64> = (0..n).map(|i| lat(p, i, fair[i])).collect();
        let assured = (0..n)
            .map(|i| {
                p.tenants[i]
                    .latency_target
                    .unwrap_or(p.tenants[i].slo * lat_fair[i])
            })
            .collect();
        let grid = p.grid.max(1);
        // The grid step of level 1 follows the smallest fair share of any host, so every
        // host's tenants get at least `grid` steps per fair share.
        let fair1 = (0..p.hosts.len())
            .filter(|&h| on_host[h] > 0)
            .map(|h| p.hosts[h] / on_host[h])
            .min()
            .unwrap_or(0);
        let fair2 = c2_total / n.max(1) as u64;
        Ok(Ctx {
            p,
            c2_total,
            reach,
            fair,
            lat_fair,
            assured,
            g1: (fair1 / grid).max(1),
            g2: (fair2 / grid).max(1),
        })
    }

    fn speedup(&self, pts: &[Point]) -> f64 {
        let s: f64 = (0..pts.len())
            .map(|i| lat(self.p, i, pts[i]) / self.lat_fair[i])
            .sum();
        pts.len() as f64 / s
    }

    fn met(&self, pts: &[Point]) -> Vec<bool> {
        (0..pts.len())
            .map(|i| lat(self.p, i, pts[i]) <= self.assured[i] * (1.0 + 1e-9))
            .collect()
    }

    /// Pareto frontier of tenant `i`'s fulfilment set; `(l1, l2)` say which levels vary.
    /// A staircase walk, O(A + B) model calls: as `c1` grows the smallest sufficient `c2`
    /// can only shrink (models fall in both sizes; for a model that does not, the walk is
    /// an approximation).
    fn frontier(&self, i: usize, l1: bool, l2: bool) -> Vec<Point> {
        let a_vals: Vec<u64> = if l1 {
            (0..=self.p.hosts[self.p.tenants[i].host] / self.g1)
                .map(|a| a * self.g1)
                .collect()
        } else {
            vec![self.fair[i].0]
        };
        let b_vals: Vec<u64> = if l2 {
            (0..=self.reach[i] / self.g2).map(|b| b * self.g2).collect()
        } else {
            vec![self.fair[i].1]
        };
        let ok = |c1: u64, c2: u64| lat(self.p, i, (c1, c2)) <= self.assured[i];
        let mut out: Vec<Point> = Vec::new();
        let mut b = b_vals.len(); // b_vals[b] is sufficient for the previous c1; len = none
        for c1 in a_vals {
            // Step b down while the next smaller c2 still suffices.
            let mut nb = b;
            if nb == b_vals.len() {
                // Nothing sufficed yet: scan from the top once.
                if ok(c1, *b_vals.last().expect("non-empty")) {
                    nb = b_vals.len() - 1;
                } else {
                    continue;
                }
            }
            while nb > 0 && ok(c1, b_vals[nb - 1]) {
                nb -= 1;
            }
            if nb < b {
                out.push((c1, b_vals[nb]));
                b = nb;
            }
            if b == 0 {
                break;
            }
        }
        out
    }

    /// Free level-2 room per server after a placement of `pts`' level-2 totals on the
    /// tenants' servers (a witness that the partition is placeable), or `None` when no
    /// placement exists — the infeasible-partition filter. First a proportional greedy
    /// (tenants with fewest servers first, each split over its servers in proportion to
    /// their free room), which places almost every candidate in microseconds; only when it
    /// fails does a maximum flow ([`flow::place`]) decide exactly, so no placeable
    /// partition is filtered.
    fn room(&self, pts: &[Point]) -> Option<Vec<f64>> {
        let p = self.p;
        let mut free: Vec<f64> = p.servers.iter().map(|&c| c as f64).collect();
        let mut order: Vec<usize> = (0..pts.len()).collect();
        order.sort_by_key(|&i| (p.tenants[i].servers.len(), i));
        let mut greedy_placed = true;
        for i in order {
            let avail: f64 = p.tenants[i].servers.iter().map(|&s| free[s]).sum();
            let need = pts[i].1 as f64;
            if need > avail + 1e-9 {
                greedy_placed = false;
                break;
            }
            if need > 0.0 {
                for &s in &p.tenants[i].servers {
                    free[s] -= need * free[s] / avail;
                }
            }
        }
        if greedy_placed {
            return Some(free);
        }
        let links: Vec<Vec<usize>> = p.tenants.iter().map(|t| t.servers.clone()).collect();
        let demand: Vec<u64> = pts.iter().map(|pt| pt.1).collect();
        flow::place(&p.servers, &links, &demand)
            .map(|free| free.into_iter().map(|f| f as f64).collect())
    }

    /// Level-1 blocks left on each host after `pts`.
    fn level1_left(&self, pts: &[Point]) -> Vec<u64> {
        let mut left = self.p.hosts.clone();
        for (t, pt) in self.p.tenants.iter().zip(pts) {
            left[t.host] = left[t.host].saturating_sub(pt.0);
        }
        left
    }

    fn fits(&self, pts: &[Point]) -> bool {
        let mut used = vec![0u64; self.p.hosts.len()];
        for (t, pt) in self.p.tenants.iter().zip(pts) {
            used[t.host] += pt.0;
        }
        used.iter().zip(&self.p.hosts).all(|(u, c)| u <= c)
            && pts.iter().map(|p| p.1).sum::<u64>() <= self.c2_total
            && pts.iter().zip(&self.reach).all(|(p, r)| p.1 <= *r)
    }
}

fn lat(p: &MlmsProblem, i: usize, (c1, c2): Point) -> f64 {
    p.tenants[i].model.latency(c1 as f64, c2 as f64)
}

/// Computes one interval's allocation for `scheme`.
pub fn plan(p: &MlmsProblem, scheme: Scheme) -> Result<MlmsPlan, AllocError> {
    let cx = Ctx::new(p)?;
    let n = p.tenants.len();
    let (mut cands, l1, l2): (Vec<Vec<Point>>, bool, bool) = match scheme {
        Scheme::FairShare => (vec![cx.fair.clone()], false, false),
        Scheme::Independent => {
            let mut a: Vec<Point> = cx.fair.iter().map(|f| (0, f.1)).collect();
            let mut room = cx.room(&a).unwrap_or_default();
            cx.spread_spare(&mut a, true, false, &mut room);
            let mut b: Vec<Point> = cx.fair.iter().map(|f| (f.0, 0)).collect();
            let mut room = cx.room(&b).unwrap_or_default();
            cx.spread_spare(&mut b, false, true, &mut room);
            (
                vec![(0..n).map(|i| (a[i].0, b[i].1)).collect()],
                false,
                false,
            )
        }
        Scheme::Uncontrolled => (vec![uncontrolled(&cx)], false, false),
        Scheme::Mlms | Scheme::FirstLevelOnly | Scheme::SecondLevelOnly => {
            let (l1, l2) = match scheme {
                Scheme::FirstLevelOnly => (true, false),
                Scheme::SecondLevelOnly => (false, true),
                _ => (true, true),
            };
            (cx.feasibility_set(l1, l2), l1, l2)
        }
    };
    let mut scored: Vec<(usize, f64, Vec<Point>)> = Vec::new();
    for mut c in cands.drain(..) {
        if l1 || l2 {
            let Some(mut room) = cx.room(&c) else {
                continue;
            };
            cx.spread_spare(&mut c, l1, l2, &mut room);
        }
        let met = cx.met(&c).iter().filter(|&&m| m).count();
        scored.push((met, cx.speedup(&c), c));
    }
    let candidates = scored.len();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let names: Vec<String> = p.tenants.iter().map(|t| t.name.clone()).collect();
    let connect: Vec<Vec<usize>> = p.tenants.iter().map(|t| t.servers.clone()).collect();
    let caps: Vec<f64> = p.servers.iter().map(|&c| c as f64).collect();
    let mut last_err = None;
    for (_, fs, pts) in scored {
        let totals: Vec<f64> = pts.iter().map(|p| p.1 as f64).collect();
        match spread_level2(&names, &totals, &connect, &caps) {
            Ok(placement) => {
                return Ok(MlmsPlan {
                    c1: pts.iter().map(|p| p.0).collect(),
                    c2: pts.iter().map(|p| p.1).collect(),
                    latency: (0..n).map(|i| lat(p, i, pts[i])).collect(),
                    slo_met: cx.met(&pts),
                    lat_fair: cx.lat_fair.clone(),
                    lat_assured: cx.assured.clone(),
                    fair_speedup: fs,
                    placement,
                    candidates,
                })
            }
            Err(e @ AllocError::Lp(_)) => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| AllocError::BadInput("no candidate allocation".into())))
}

/// Shared LRU caches: occupancy proportional to rate × predicted latency, by fixed point.
fn uncontrolled(cx: &Ctx) -> Vec<Point> {
    let p = cx.p;
    let n = p.tenants.len();
    let mut pts = cx.fair.clone();
    for _ in 0..20 {
        let pressure: Vec<f64> = (0..n)
            .map(|i| p.tenants[i].rate.max(0.0) * lat(p, i, pts[i]).max(0.0))
            .collect();
        let mut host_total = vec![0.0f64; p.hosts.len()];
        for i in 0..n {
            host_total[p.tenants[i].host] += pressure[i];
        }
        let mut next = vec![(0u64, 0u64); n];
        for i in 0..n {
            let h = p.tenants[i].host;
            next[i].0 = (p.hosts[h] as f64 * pressure[i] / host_total[h].max(1e-300)) as u64;
        }
        for (s, &cap) in p.servers.iter().enumerate() {
            let on: Vec<usize> = (0..n)
                .filter(|&i| p.tenants[i].servers.contains(&s))
                .collect();
            let sum: f64 = on.iter().map(|&i| pressure[i]).sum::<f64>().max(1e-300);
            for i in on {
                next[i].1 += (cap as f64 * pressure[i] / sum) as u64;
            }
        }
        for i in 0..n {
            pts[i] = ((pts[i].0 + next[i].0) / 2, (pts[i].1 + next[i].1) / 2);
        }
    }
    pts
}

/// MLMS for [`crate::allocate`]: curve models, level 1 = `input.capacity`.
pub(crate) fn allocate_levels(
    input: &AllocInput,
    curves: &[HitRatioCurve],
) -> Result<AllocOutput, AllocError> {
    let cfg = input.mlms.as_ref().ok_or_else(|| {
        AllocError::BadInput("objective mlms needs an [mlms] section (servers, latencies)".into())
    })?;
    if cfg.servers.is_empty() || cfg.servers.iter().all(|&c| c == 0) {
        return Err(AllocError::BadInput(
            "mlms: no level-2 server capacity".into(),
        ));
    }
    let mut strangers: Vec<&String> = cfg
        .connect
        .keys()
        .filter(|n| !input.tenants.iter().any(|t| &t.spec.name == *n))
        .collect();
    strangers.sort();
    if let Some(n) = strangers.first() {
        return Err(AllocError::BadInput(format!(
            "mlms.connect names tenant `{n}`, which is not a tenant"
        )));
    }
    let all: Vec<usize> = (0..cfg.servers.len()).collect();
    let tenants = input
        .tenants
        .iter()
        .zip(curves)
        .map(|(t, c)| MlmsTenant {
            name: t.spec.name.clone(),
            model: TenantModel::Curve {
                curve: c.clone(),
                lat: cfg.latencies,
            },
            slo: cfg.slo,
            latency_target: t
                .spec
                .slo
                .as_ref()
                .filter(|s| s.kind == SloKind::Latency)
                .map(|s| s.target),
            servers: cfg
                .connect
                .get(&t.spec.name)
                .cloned()
                .unwrap_or_else(|| all.clone()),
            host: 0,
            rate: t.spec.weight,
        })
        .collect();
    let prob = MlmsProblem {
        tenants,
        hosts: vec![input.capacity],
        servers: cfg.servers.clone(),
        grid: cfg.grid,
    };
    let plan = plan(&prob, Scheme::Mlms)?;
    let rows = input
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let hit = curves[i].hit_ratio((plan.c1[i] + plan.c2[i]) as f64);
            let reason = (!plan.slo_met[i]).then(|| {
                format!(
                    "predicted latency {:.4} above assured {:.4}",
                    plan.latency[i], plan.lat_assured[i]
                )
            });
            let mut r = row(&t.spec.name, plan.c1[i], hit, None, reason);
            r.predicted_latency = Some(plan.latency[i]);
            r.slo_met = Some(plan.slo_met[i]);
            r.level2_size = Some(plan.c2[i]);
            r
        })
        .collect();
    Ok(AllocOutput {
        objective: Objective::Mlms,
        capacity: input.capacity,
        seconds: None,
        tenants: rows,
    })
}

#[cfg(test)]
mod tests;
