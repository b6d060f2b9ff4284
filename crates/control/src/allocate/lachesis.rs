//! Our allocation: SLO minimums on both levels from the two-level latency model, admitted
//! by priority class, then all spare space for fair speedup by the concave-hull optimiser.
//!
//! 1. Dedicated partitions are taken off the top, then the do-no-harm floors
//!    ([`crate::guard`]: a tenant with a degradation, latency or tail SLO that the guard
//!    holds keeps its fair share, and so does one whose SLO no point reaches — below its
//!    fair share it would only be further from its SLO than a fair split leaves it);
//!    later steps reserve only what they need beyond them. After admission (step 3), such
//!    a tenant left out is raised to its fair share as far as the room left allows.
//! 2. For each active tenant with a latency target, its sufficient points: for every
//!    level-1 size on a grid of its host (1/64 of the host), the smallest level-2 size per
//!    server meeting the target; ranked by normalised cost `c1/C1 + c2/C2` (level-1
//!    blocks on a small host are dear). A target no point reaches is reported with the
//!    best latency the whole system gives.
//! 3. Admission: dedicated first, then gold, silver, best effort; within a class the
//!    smallest normalised need first; each tenant at its cheapest point that fits its host
//!    and each of its servers after those before it. If that leaves a tenant out, a second
//!    pass takes for each tenant its cheapest point within its fair share at both levels
//!    (where it has one), and is kept if it leaves fewer out: cheapest points can together
//!    take more of one level than fair shares do, while fair share meets every degradation
//!    SLO by definition. The tenants left out are reported with their need.
//! 4. Floors ([`super::Floor`]): a warming tenant (a curve whose footprint still grows,
//!    below the space it holds) keeps what it held, and a tenant whose writes wait for
//!    write-back keeps its level 2 (its write buffer), beyond their SLO minimums while
//!    room is left on their nodes after the SLO minimums.
//! 5. Spare space, by coordinate descent (two rounds): level 1 per host with level 2 fixed,
//!    then level 2 per server with level 1 fixed, each by [`super::optimise`] on the
//!    tenant's latency as a function of that partition's size, weighted by
//!    `class weight / fair-share latency` — so the optimiser maximises the (weighted) fair
//!    speedup, as MLMS's spare-space step does, but over concave hulls rather than one grid
//!    step at a time, so a cliff (a loop that fits) is seen across a plateau.
//! 6. The disk queueing a miss costs the others. A tenant's latency model takes the miss
//!    service time it observed as given, but every miss is also a request in the queue of
//!    a level-2 server's disk, which every tenant striped over that server waits behind.
//!    So the objective each partition is sized for is the tenant's own weighted latency
//!    plus that externality: `E_s · λ_i,s`, where `λ_i,s` is the rate of the tenant's
//!    misses that reach server `s` (its request rate times its miss ratio at the
//!    partition's size, over its `n` servers) and `E_s` is what one more miss per second
//!    there costs the weighted latencies of all its tenants: with the disk as an M/M/1
//!    queue of response time `R` (`R = S/(1 − λS)`, so `dR/dλ = R²`, with `R` the
//!    traffic-weighted mean of its tenants' observed miss times), `E_s = R² · Σ_j w_j ·
//!    m_j,s`, `m_j,s` being the share of tenant `j`'s requests that miss at `s` and `w_j`
//!    its weight in the objective. On idle disks `R` is the bare service time and the
//!    term is small; on saturated ones it dominates, and space goes where it removes the
//!    most disk requests (which Moirai's hit maximisation does always). `E_s` is taken at
//!    fair share for the first round of step 5 and at the first round's sizes for the
//!    second.

use super::{optimise, Inputs, Item, Sizes};
use crate::model::normalised_curve_flat;
use crate::plan::{Reason, Shortfall};
use crate::topology::Class;

const GRID: u64 = 64;

/// Our sizes.
#[allow(clippy::needless_range_loop)] // tenants index several parallel arrays
pub fn allocate(inp: &Inputs) -> Sizes {
    let mut phases = crate::Phases::start();
    let topo = inp.topo;
    let n = topo.tenants.len();
    let mut out = super::fair(topo, inp.place, inp.active, inp.idle_floor);
    let place = inp.place;
    let mut host_free: Vec<u64> = topo.hosts.iter().map(|h| h.capacity).collect();
    let mut server_free: Vec<u64> = topo.servers.iter().map(|s| s.capacity).collect();
    let mut min1 = vec![0u64; n];
    let mut min2 = vec![0u64; n]; // per server
    let mut fixed = vec![false; n];
    // Idle tenants keep the floor; dedicated ones their partitions.
    for i in 0..n {
        let t = &topo.tenants[i];
        let ns = t.servers.len() as u64;
        let (a, b) = match (inp.active[i], t.class) {
            (false, _) => (inp.idle_floor, inp.idle_floor),
            (true, Class::Dedicated { l1, l2 }) => (l1, l2.div_ceil(ns)),
            _ => continue,
        };
        fixed[i] = true;
        let a = a.min(host_free[t.host]);
        host_free[t.host] -= a;
        out.l1[i] = a;
        for (k, &s) in t.servers.iter().enumerate() {
            let b = b.min(server_free[s]);
            server_free[s] -= b;
            out.l2[i][k] = b;
        }
        let r = if inp.active[i] {
            Reason::Dedicated
        } else {
            Reason::Idle { intervals: 0 }
        };
        out.l1_reason[i] = r.clone();
        out.l2_reason[i] = r;
    }
    phases.mark("allocate: fair, fixed");
    // SLO minimums: each tenant's sufficient points, admitted by class.
    let mut wants: Vec<Want> = Vec::new();
    let mut out_of_reach = vec![false; n];
    for i in (0..n).filter(|&i| !fixed[i]) {
        let Some(target) = inp.targets[i] else {
            continue;
        };
        let t = &topo.tenants[i];
        let ns = t.servers.len() as u64;
        let c1_cap = topo.hosts[t.host].capacity;
        let reach: u64 = t
            .servers
            .iter()
            .map(|&s| topo.servers[s].capacity)
            .min()
            .unwrap_or(0);
        let g1 = (c1_cap / GRID).max(1);
        let g2 = (reach / GRID).max(1);
        let mut points: Vec<Point> = Vec::new();
        for k in 0..=c1_cap / g1 {
            let c1 = k * g1;
            // Per-server size x: the tenant's latency at (c1, x on each server).
            let ok = |x: u64| inp.latency(i, c1, &vec![x; ns as usize]) <= target;
            if !ok(reach) {
                continue;
            }
            // Smallest k with ok(min(k·g2, reach)); k = ceil(reach / g2) is ok.
            let at = |k: u64| (k * g2).min(reach);
            let (mut lo, mut hi) = (0u64, reach.div_ceil(g2));
            while lo < hi {
                let mid = (lo + hi) / 2;
                if ok(at(mid)) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            let x = at(lo);
            let cost = c1 as f64 / c1_cap.max(1) as f64 + x as f64 / reach.max(1) as f64;
            points.push(Point { c1, x, cost });
            if x == 0 {
                break;
            }
        }
        if points.is_empty() {
            out_of_reach[i] = true;
            let all = vec![reach; ns as usize];
            out.shortfalls.push(Shortfall {
                tenant: t.name.clone(),
                target_ms: target,
                predicted_ms: inp.latency(i, c1_cap, &all),
                reason: format!(
                    "unreachable: even all of host `{}` and its servers give {:.3} ms",
                    topo.hosts[t.host].name,
                    inp.latency(i, c1_cap, &all)
                ),
            });
            continue;
        }
        points.sort_by(|a, b| a.cost.total_cmp(&b.cost).then(a.c1.cmp(&b.c1)));
        let fair = (out.l1[i], out.l2[i].iter().copied().min().unwrap_or(0));
        wants.push(Want { i, points, fair });
    }
    phases.mark("allocate: sufficient points");
    // Do-no-harm floors (`crate::guard`) before anything else: each is at most the
    // tenant's fair share, so they fit together beside the fixed partitions. A tenant
    // whose SLO the guard keeps and no size can meet (`out_of_reach`) is floored at its
    // fair share too: below it, it would only be further from its SLO than a fair split
    // leaves it.
    let mut g1 = vec![0u64; n];
    let mut g2: Vec<Vec<u64>> = topo
        .tenants
        .iter()
        .map(|t| vec![0; t.servers.len()])
        .collect();
    let kept_by_guard = |i: usize| {
        inp.active[i]
            && topo.tenants[i]
                .slo
                .as_ref()
                .and_then(crate::guard::Limit::of)
                .is_some()
    };
    let mut out_of_reach_floor = vec![false; n];
    for i in (0..n).filter(|&i| !fixed[i]) {
        let t = &topo.tenants[i];
        let (l1, l2): (u64, Vec<u64>) = match inp.guard(i) {
            // Out of reach, a tail SLO's quantile is set by the disk whatever the size, so
            // the guard's measurements cannot see a shrink's harm to the rest of its
            // requests: the tenant keeps its fair share (or its guard's floor if higher).
            _ if kept_by_guard(i) && out_of_reach[i] => {
                out_of_reach_floor[i] = true;
                let g = inp.guard(i);
                let l2 = out.l2[i]
                    .iter()
                    .enumerate()
                    .map(|(k, &f)| f.max(g.and_then(|g| g.l2.get(k).copied()).unwrap_or(0)))
                    .collect();
                (out.l1[i].max(g.map_or(0, |g| g.l1)), l2)
            }
            Some(g) => (g.l1, g.l2.clone()),
            None => continue,
        };
        g1[i] = l1.min(host_free[t.host]);
        host_free[t.host] -= g1[i];
        for (k, &s) in t.servers.iter().enumerate() {
            let v = l2.get(k).copied().unwrap_or(0).min(server_free[s]);
            server_free[s] -= v;
            g2[i][k] = v;
        }
    }
    wants.sort_by(|a, b| {
        let (ta, tb) = (&topo.tenants[a.i], &topo.tenants[b.i]);
        ta.class
            .rank()
            .cmp(&tb.class.rank())
            .then(a.points[0].cost.total_cmp(&b.points[0].cost))
            .then(a.i.cmp(&b.i))
    });
    let guarded = Guarded { l1: &g1, l2: &g2 };
    let mut admitted = admit(topo, &wants, &host_free, &server_free, &guarded, false);
    if !admitted.left_out.is_empty() {
        let within_fair = admit(topo, &wants, &host_free, &server_free, &guarded, true);
        if within_fair.left_out.len() < admitted.left_out.len() {
            admitted = within_fair;
        }
    }
    host_free = admitted.host_free;
    server_free = admitted.server_free;
    min1 = admitted.min1;
    min2 = admitted.min2;
    for &k in &admitted.left_out {
        let w = &wants[k];
        let t = &topo.tenants[w.i];
        let Point { c1, x, .. } = w.points[0];
        out.shortfalls.push(Shortfall {
            tenant: t.name.clone(),
            target_ms: inp.targets[w.i].unwrap_or(0.0),
            predicted_ms: 0.0,
            reason: format!(
                "not admitted: needs {c1} level-1 blocks and {x} on each of {} servers; \
                 tenants of a higher class or smaller need took the room",
                t.servers.len()
            ),
        });
    }
    // A tenant the guard keeps that was left out keeps its fair share as far as the room
    // the admitted ones left allows: what a fair split gives it is the least it is owed.
    for &k in &admitted.left_out {
        let i = wants[k].i;
        if !kept_by_guard(i) || inp.guard(i).is_some() || out_of_reach_floor[i] {
            continue;
        }
        out_of_reach_floor[i] = true;
        let t = &topo.tenants[i];
        let more = out.l1[i].saturating_sub(g1[i]).min(host_free[t.host]);
        host_free[t.host] -= more;
        g1[i] += more;
        for (k, &s) in t.servers.iter().enumerate() {
            let more = out.l2[i][k].saturating_sub(g2[i][k]).min(server_free[s]);
            server_free[s] -= more;
            g2[i][k] += more;
        }
    }
    // Floors (warming tenants, write buffers) are kept beyond the SLO minimums while room
    // is left, in the order SLO minimums were admitted: the curves cannot price that space.
    let (slo1, slo2) = (min1.clone(), min2.clone());
    let mut floored: Vec<(usize, &super::Floor)> = (0..n)
        .filter(|&i| !fixed[i])
        .filter_map(|i| Some((i, inp.floor(i)?)))
        .collect();
    floored.sort_by_key(|&(i, _)| (topo.tenants[i].class.rank(), i));
    // (A guarded tenant's floor already holds its fair share: only what lies beyond the
    // larger of the two is reserved here.)
    for (i, f) in floored {
        let t = &topo.tenants[i];
        let a =
            f.l1.saturating_sub(min1[i].max(g1[i]))
                .min(host_free[t.host]);
        host_free[t.host] -= a;
        min1[i] = min1[i].max(g1[i]) + a;
        let room = t
            .servers
            .iter()
            .enumerate()
            .map(|(k, &s)| server_free[s] + g2[i][k].saturating_sub(min2[i]))
            .min()
            .unwrap_or(0);
        let held2 = f.l2.iter().copied().min().unwrap_or(0);
        let b = held2.saturating_sub(min2[i]).min(room);
        for (k, &s) in t.servers.iter().enumerate() {
            // Of the b more blocks, those below the guard's floor were reserved already.
            let new = (min2[i] + b).saturating_sub(g2[i][k].max(min2[i]));
            server_free[s] -= new.min(server_free[s]);
        }
        min2[i] += b;
    }
    // Each tenant's lower bound: its SLO minimum or floor, and at least its guard's.
    let low1: Vec<u64> = (0..n).map(|i| min1[i].max(g1[i])).collect();
    let low2: Vec<Vec<u64>> = (0..n)
        .map(|i| g2[i].iter().map(|&g| g.max(min2[i])).collect())
        .collect();
    let reason = |i: usize, size: u64, level1: bool, gain: f64| -> Reason {
        let (slo, min) = if level1 {
            (slo1[i], min1[i])
        } else {
            (slo2[i], min2[i])
        };
        let guard = if level1 {
            g1[i]
        } else {
            g2[i].iter().copied().max().unwrap_or(0)
        };
        match (inp.targets[i], inp.floor(i)) {
            _ if guard > 0 && size <= guard && guard >= slo => match inp.guard(i) {
                Some(g) => g.reason.clone(),
                None if out_of_reach_floor[i] => Reason::Guarded {
                    why: "no size the plan can give meets its SLO, so it keeps at least \
                          its fair share"
                        .into(),
                },
                None => Reason::FairShare,
            },
            (Some(t), _) if slo > 0 && size <= slo => Reason::SloMinimum { target_ms: t },
            (_, Some(f)) if min > slo && size <= min => f.reason.clone(),
            _ => Reason::Gain { per_block: gain },
        }
    };
    phases.mark("allocate: admission, floors");
    // Spare space: start from the minimums, then two rounds of coordinate descent.
    let fair = (out.l1.clone(), out.l2.clone());
    for i in (0..n).filter(|&i| !fixed[i]) {
        out.l1[i] = low1[i];
        out.l2[i] = low2[i].clone();
    }
    let weight = |i: usize| topo.tenants[i].class.weight() / inp.lat_fair[i].max(1e-9);
    let mut ext = externality(inp, &place.servers, &fair.0, &fair.1, &weight);
    phases.mark("allocate: spare space set-up");
    // Tenant i's objective: its weighted latency plus the disk queueing its misses cost,
    // summed over its servers' parts (`part`), `h1` being its curve's hit ratio at `c1`.
    // (The allocator evaluates this some 500 times per tenant and node each interval, so
    // a part takes one lookup of the curve: the level-1 hit ratio is looked up once per
    // level-1 size, and a level-2 curve re-evaluates only the part of the server it is
    // for.)
    let part = |ext: &[f64], i: usize, c1: u64, h1: f64, s: usize, xs: u64, n: f64| {
        let model = &inp.models[i];
        let ratios = model.hit_ratios_at(h1, c1 as f64, n * xs as f64);
        (
            model.latency_at(ratios),
            ext[s] * inp.rates[i] * (1.0 - ratios.1) / n,
        )
    };
    let total = |i: usize, parts: &[(f64, f64)]| -> f64 {
        let n = parts.len() as f64;
        let (mut latency, mut others) = (0.0, 0.0);
        for &(l, o) in parts {
            latency += l;
            others += o;
        }
        weight(i) * (latency / n) + others
    };
    let objective = |ext: &[f64], i: usize, c1: u64, x: &[u64], parts: &mut Vec<(f64, f64)>| {
        let t = &topo.tenants[i];
        debug_assert_eq!(x.len(), t.servers.len(), "a size per server");
        if x.is_empty() {
            return weight(i) * inp.latency(i, c1, x);
        }
        let n = x.len() as f64;
        let h1 = inp.models[i].curve.hit_ratio(c1 as f64);
        parts.clear();
        parts.extend(
            t.servers
                .iter()
                .zip(x)
                .map(|(&s, &xs)| part(ext, i, c1, h1, s, xs, n)),
        );
        total(i, parts)
    };
    let mut parts: Vec<(f64, f64)> = Vec::new();
    for round in 0..2 {
        if round > 0 {
            ext = externality(inp, &place.servers, &out.l1, &out.l2, &weight);
        }
        let ext = &ext;
        phases.mark("allocate: externality");
        for (h, host) in topo.hosts.iter().enumerate() {
            let members: Vec<usize> = place.hosts[h]
                .iter()
                .copied()
                .filter(|&i| !fixed[i])
                .collect();
            if members.is_empty() {
                continue;
            }
            let taken: u64 = place.hosts[h]
                .iter()
                .filter(|&&i| fixed[i])
                .map(|&i| out.l1[i])
                .sum();
            let cap = host.capacity.saturating_sub(taken);
            let items: Vec<Item> = members
                .iter()
                .map(|&i| {
                    let x = &out.l2[i];
                    let flat = inp.models[i].flat_from_c1();
                    let (curve, base) = normalised_curve_flat(
                        |c1| objective(ext, i, c1, x, &mut parts),
                        cap,
                        256,
                        flat,
                    );
                    Item {
                        curve,
                        weight: base,
                        min: low1[i],
                    }
                })
                .collect();
            let (sizes, gains) = optimise(cap, &items);
            for (k, &i) in members.iter().enumerate() {
                out.l1[i] = sizes[k];
                out.l1_reason[i] = reason(i, sizes[k], true, gains[k]);
            }
        }
        phases.mark("allocate: level 1");
        for (s, server) in topo.servers.iter().enumerate() {
            let members: Vec<(usize, usize)> = place.servers[s]
                .iter()
                .copied()
                .filter(|&(i, _)| !fixed[i])
                .collect();
            if members.is_empty() {
                continue;
            }
            let taken: u64 = place.servers[s]
                .iter()
                .filter(|&&(i, _)| fixed[i])
                .map(|&(i, k)| out.l2[i][k])
                .sum();
            let cap = server.capacity.saturating_sub(taken);
            let items: Vec<Item> = members
                .iter()
                .map(|&(i, k)| {
                    let (c1, x) = (out.l1[i], &out.l2[i]);
                    let flat = inp.models[i].flat_from_c2(c1, x.len() as u64);
                    // The other servers' parts do not change with this one's size.
                    objective(ext, i, c1, x, &mut parts);
                    let (n, h1) = (x.len() as f64, inp.models[i].curve.hit_ratio(c1 as f64));
                    let s = topo.tenants[i].servers[k];
                    let (curve, base) = normalised_curve_flat(
                        |v| {
                            parts[k] = part(ext, i, c1, h1, s, v, n);
                            total(i, &parts)
                        },
                        cap,
                        256,
                        flat,
                    );
                    // f(v) is the tenant's whole objective, so f(0) − f(v) is what this
                    // server's share buys (1/n of its stripe).
                    Item {
                        curve,
                        weight: base,
                        min: low2[i][k],
                    }
                })
                .collect();
            let (sizes, gains) = optimise(cap, &items);
            for (j, &(i, k)) in members.iter().enumerate() {
                out.l2[i][k] = sizes[j];
                out.l2_reason[i] = reason(i, sizes[j], false, gains[j]);
            }
        }
    }
    phases.mark("allocate: level 2");
    let index = super::name_index(topo);
    for sf in out.shortfalls.iter_mut() {
        if sf.predicted_ms == 0.0 {
            if let Some(i) = index.get(sf.tenant.as_str()).copied() {
                sf.predicted_ms = inp.latency(i, out.l1[i], &out.l2[i]);
            }
        }
    }
    out
}

/// Per server, `E_s`: the weighted latency one more disk request per second there costs
/// its tenants (see the module doc, step 6), at sizes `l1`, `l2`.
fn externality(
    inp: &Inputs,
    servers: &[Vec<(usize, usize)>],
    l1: &[u64],
    l2: &[Vec<u64>],
    weight: &dyn Fn(usize) -> f64,
) -> Vec<f64> {
    servers
        .iter()
        .map(|members| {
            let (mut traffic, mut busy, mut exposed) = (0.0, 0.0, 0.0);
            for &(j, k) in members {
                if !inp.active[j] {
                    continue;
                }
                let m = &inp.models[j];
                let n = l2[j].len().max(1) as f64;
                let share = (1.0 - m.hit_ratios(l1[j] as f64, n * l2[j][k] as f64).1) / n;
                let lam = inp.rates[j].max(0.0) * share;
                traffic += lam;
                busy += lam * m.service.miss_ms;
                exposed += weight(j) * share;
            }
            if traffic > 0.0 {
                let r = busy / traffic; // ms
                                        // dR/dλ = R² in seconds per (request per second), here in ms.
                exposed * r * r / 1e3
            } else {
                0.0
            }
        })
        .collect()
}

/// One sufficient point of a tenant: `c1` level-1 blocks and `x` on each of its servers
/// meet its target; `cost` is `c1/C1 + x/X` (its host's and one server's capacity).
#[derive(Clone, Copy, Debug)]
struct Point {
    c1: u64,
    x: u64,
    cost: f64,
}

/// A tenant with a latency target: its sufficient points, cheapest first (for each
/// level-1 size on the grid, the least level-2 size that suffices), and its fair share
/// `(level 1, level 2 per server)`.
struct Want {
    i: usize,
    points: Vec<Point>,
    fair: (u64, u64),
}

/// What an admission pass reserved, and the tenants (indices into the wants) it could not.
struct Admission {
    min1: Vec<u64>,
    min2: Vec<u64>,
    host_free: Vec<u64>,
    server_free: Vec<u64>,
    left_out: Vec<usize>,
}

/// Do-no-harm floors already reserved, per tenant: level 1, and level 2 per server.
struct Guarded<'a> {
    l1: &'a [u64],
    l2: &'a [Vec<u64>],
}

/// Admits the wants in order, each at its cheapest sufficient point that fits the room the
/// ones before it left. With `within_fair`, a tenant takes the cheapest point that does
/// not exceed its fair share at either level when it has one. The first pass picks
/// freely; when it leaves a tenant out, the second is tried: the cheapest points of
/// tenants admitted first can take, between them, more of one level than their fair
/// shares, and leave a later tenant no point that fits, although fair share itself meets
/// every degradation SLO (by the model, within the margin). Points within fair shares fit
/// together (less whatever dedicated partitions took beyond theirs), so when every tenant
/// with a target has one — degradation SLOs always do — none is reported infeasible for
/// the order the greedy pass went in.
fn admit(
    topo: &crate::topology::Topology,
    wants: &[Want],
    host_free: &[u64],
    server_free: &[u64],
    guarded: &Guarded,
    within_fair: bool,
) -> Admission {
    let n = topo.tenants.len();
    let mut a = Admission {
        min1: vec![0; n],
        min2: vec![0; n],
        host_free: host_free.to_vec(),
        server_free: server_free.to_vec(),
        left_out: Vec::new(),
    };
    for (k, w) in wants.iter().enumerate() {
        let t = &topo.tenants[w.i];
        // What a point needs beyond the tenant's reserved guard floor.
        let (g1, g2) = (guarded.l1[w.i], &guarded.l2[w.i]);
        let fits = |p: &Point| {
            p.c1.saturating_sub(g1) <= a.host_free[t.host]
                && t.servers
                    .iter()
                    .enumerate()
                    .all(|(k, &s)| p.x.saturating_sub(g2[k]) <= a.server_free[s])
        };
        let within = |p: &Point| p.c1 <= w.fair.0 && p.x <= w.fair.1;
        let pick = if within_fair {
            w.points
                .iter()
                .find(|p| within(p) && fits(p))
                .or_else(|| w.points.iter().find(|p| fits(p)))
        } else {
            w.points.iter().find(|p| fits(p))
        };
        match pick {
            Some(p) => {
                a.host_free[t.host] -= p.c1.saturating_sub(g1);
                for (k, &s) in t.servers.iter().enumerate() {
                    a.server_free[s] -= p.x.saturating_sub(g2[k]);
                }
                a.min1[w.i] = p.c1;
                a.min2[w.i] = p.x;
            }
            None => a.left_out.push(k),
        }
    }
    a
}
