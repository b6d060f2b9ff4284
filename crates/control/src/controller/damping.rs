//! Hysteresis applied to a plan against the previous one ([`damp`]), and the pacing of
//! shrinks whose dirty evictions the disks must write back ([`pace_write_backs`]) within
//! each server's budget ([`write_back_budgets`]).

use super::previous::Previous;
use super::state::ControlState;
use crate::allocate::{Inputs, Sizes};
use crate::guard::{measured_ms, Limit};
use crate::hysteresis::limit_moves;
use crate::observe::Observations;
use crate::plan::Reason;
use crate::topology::{Placement, Topology};

/// Applies hysteresis to `sizes` against the previous plan. A node is *changed* when its
/// capacity is not the one the previous plan was made for, or its tenants are not those
/// the previous plan placed there: its partitions take the new sizes at once, whatever the
/// gain (a shrunk node fits its new capacity now, a grown one's new space is given out, a
/// new tenant gets its share). The other nodes are held when the predicted gain is below
/// the threshold and no SLO is at risk, and otherwise moved at most `max_move` per interval.
pub(super) fn damp(
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
    let place = inp.place;
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

/// Per storage server, the dirty blocks the plan's shrinks may send to its disk this
/// interval ([`write_back_budgets`]).
pub(super) struct Budgets {
    /// For shrinks that end at or above the tenant's fair share (a return towards the
    /// fair split): the share `b` below, or, on a server the do-no-harm guard sends back
    /// to fair share (a measured harm, or a reference to measure), at least
    /// [`crate::Hysteresis::write_back_share`] of the disk's time: holding those back
    /// would keep the plan away from the fair point, which is what no harm is measured
    /// against.
    pub(super) restoring: Vec<f64>,
    /// For shrinks below fair share: the share `b` below.
    pub(super) exploring: Vec<f64>,
}

/// Per storage server, the dirty blocks the plan's shrinks may send to its disk this
/// interval. Shrinks that explore below fair share get a share `b` of the interval's
/// disk time, at the nominal cost of a disk operation. Write-backs are work the fair split never does, and they queue with every
/// tenant's misses: on a disk busy a share `ρ` of the time (as measured last interval),
/// background work taking a share `b` lengthens the queue's response time by about
/// `(1 − ρ) / (1 − ρ − b)` (an M/M/1 queue; `R = S / (1 − ρ)`). For that to stay within
/// the least headroom `x` of the guarded tenants striped over the server (how much slower
/// each may get before it passes what its SLO allows: [`Limit::headroom`]), `b ≤ x (1 − ρ)
/// / (1 + x)`. So `b` is the smaller of that and [`crate::Hysteresis::write_back_share`];
/// a server whose load is not measured, or that no guarded tenant uses, gets the latter.
/// A disk that is saturated, or a guarded tenant already at its bound, stops the drains
/// there until either eases.
pub(super) fn write_back_budgets(
    topo: &Topology,
    place: &Placement,
    state: &ControlState,
    obs: &Observations,
    active: &[bool],
    h: crate::scheme::Hysteresis,
    falls_back: &[bool],
) -> Budgets {
    let per_block_s = topo.service.miss_ms.max(1e-6) / 1e3;
    let exploring: Vec<f64> = (0..topo.servers.len())
        .map(|s| {
            let headroom = place.servers[s]
                .iter()
                .filter(|&&(i, _)| active[i] && obs.tenants[i].requests > 0)
                .filter_map(|&(i, _)| {
                    let limit = topo.tenants[i].slo.as_ref().and_then(Limit::of)?;
                    let measured = measured_ms(&obs.tenants[i], limit, obs.seconds);
                    Some(limit.headroom(measured, state.tenants[i].guard.reference_ms))
                })
                .fold(None, |acc: Option<f64>, x| {
                    Some(acc.map_or(x, |a| a.min(x)))
                });
            let busy = obs.servers.get(s).and_then(|o| o.backend_busy);
            let share = match (headroom, busy) {
                (Some(x), Some(rho)) if rho.is_finite() => {
                    let rho = rho.clamp(0.0, 1.0);
                    h.write_back_share.min(x * (1.0 - rho) / (1.0 + x))
                }
                _ => h.write_back_share,
            };
            share * obs.seconds / per_block_s
        })
        .collect();
    let fixed = h.write_back_share * obs.seconds / per_block_s;
    let restoring = exploring
        .iter()
        .enumerate()
        .map(|(s, &b)| match falls_back.get(s) {
            Some(true) => b.max(fixed),
            _ => b,
        })
        .collect();
    Budgets {
        restoring,
        exploring,
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
/// exceed its budget ([`Budgets`]: shrinks that end at or above the tenant's fair share
/// share the restoring one, shrinks below it the exploring one; a dirty tenant's shrink
/// from above its fair share to below it stops at its fair share first), every shrink of
/// that kind there moves the same fraction of the way, and each
/// tenant takes the least fraction of its servers (so none of its servers is over).
/// The space a paced shrink does not yet free is taken from the growth of the node's
/// other partitions, in proportion to it, so no node holds more than its capacity.
/// Tenants on a node planned afresh (see [`damp`]) are not paced.
#[allow(clippy::needless_range_loop)] // tenants index several parallel arrays
pub(super) fn pace_write_backs(
    inp: &Inputs,
    sizes: &mut Sizes,
    was: &Previous,
    dirty: &[f64],
    budgets: &Budgets,
    fair: &Sizes,
) {
    let topo = inp.topo;
    let n = topo.tenants.len();
    let exempt = |i: usize| {
        let t = &topo.tenants[i];
        was.host_changed[t.host] || t.servers.iter().any(|&s| was.server_changed[s])
    };
    // A dirty tenant's shrink from above its fair share to below it heads for its fair
    // share first: that part restores (within the restoring budget), the rest explores in
    // later intervals.
    let mut paced = false;
    for i in (0..n).filter(|&i| !exempt(i) && dirty.get(i).is_some_and(|&d| d > 0.0)) {
        let Some((l1, l2)) = was.sizes(topo, i) else {
            continue;
        };
        if l1 > fair.l1[i] && sizes.l1[i] < fair.l1[i] {
            sizes.l1[i] = fair.l1[i];
            sizes.l1_reason[i] = Reason::Draining { target: fair.l1[i] };
            paced = true;
        }
        for k in 0..l2.len() {
            if l2[k] > fair.l2[i][k] && sizes.l2[i][k] < fair.l2[i][k] {
                sizes.l2[i][k] = fair.l2[i][k];
                sizes.l2_reason[i] = Reason::Draining {
                    target: fair.l2[i][k],
                };
                paced = true;
            }
        }
    }
    // Whether tenant i's shrink restores (ends at or above its fair share everywhere).
    let restores = |sizes: &Sizes, i: usize| {
        sizes.l1[i] >= fair.l1[i] && sizes.l2[i].iter().zip(&fair.l2[i]).all(|(s, f)| s >= f)
    };
    // Per tenant and server, the blocks its shrink evicts there.
    let mut evicts: Vec<Vec<f64>> = vec![Vec::new(); n];
    let servers = topo.servers.len();
    let (mut restoring, mut exploring) = (vec![0.0f64; servers], vec![0.0f64; servers]);
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
        let demand = if restores(sizes, i) {
            &mut restoring
        } else {
            &mut exploring
        };
        for (k, &s) in t.servers.iter().enumerate() {
            demand[s] += d * evicts[i][k];
        }
    }
    let fraction = |demand: &[f64], budget: &[f64]| -> Vec<f64> {
        demand
            .iter()
            .zip(budget)
            .map(|(&dm, &b)| if dm > b { b.max(0.0) / dm } else { 1.0 })
            .collect()
    };
    let allowed_restoring = fraction(&restoring, &budgets.restoring);
    let allowed_exploring = fraction(&exploring, &budgets.exploring);
    for i in 0..n {
        if evicts[i].iter().all(|&e| e <= 0.0) {
            continue;
        }
        let t = &topo.tenants[i];
        let allowed = if restores(sizes, i) {
            &allowed_restoring
        } else {
            &allowed_exploring
        };
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
    let place = inp.place;
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
pub(super) fn trim_growth(prev: &[u64], cur: &mut [u64], capacity: u64) -> bool {
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

/// The do-no-harm floors bind over hysteresis and pacing: a guarded tenant the damped plan
/// leaves below its guard's floor (a probe measured to miss, a harm reverted, its nodes
/// sent back to fair share) gets the floor now, or the size the undamped plan gave it if
/// lower, so that a move measured to hurt is undone at the next interval, as the guard
/// promises. The room comes from its node's other partitions: first from growth the
/// damped plan gave them beyond their previous size, then from partitions still held
/// above their undamped size (a paced drain or a limited move), then from any partition
/// above its own guard floor. A floor is at most the tenant's fair share, so the floors of
/// a node fit it together and the room is always found.
pub(super) fn honour_guard_floors(
    inp: &Inputs,
    sizes: &mut Sizes,
    undamped: &Sizes,
    was: &Previous,
) {
    let topo = inp.topo;
    let place = inp.place;
    let floor1 = |i: usize| inp.guard(i).map_or(0, |g| g.l1.min(undamped.l1[i]));
    let floor2 = |i: usize, k: usize| {
        inp.guard(i)
            .and_then(|g| g.l2.get(k).copied())
            .map_or(0, |g| g.min(undamped.l2[i][k]))
    };
    for (h, host) in topo.hosts.iter().enumerate() {
        let members = &place.hosts[h];
        let prev: Vec<u64> = members
            .iter()
            .map(|&i| was.l1(topo, i).unwrap_or(0))
            .collect();
        let floors: Vec<u64> = members.iter().map(|&i| floor1(i)).collect();
        let target: Vec<u64> = members.iter().map(|&i| undamped.l1[i]).collect();
        let mut cur: Vec<u64> = members.iter().map(|&i| sizes.l1[i]).collect();
        if raise_to_floors(&mut cur, &floors, &prev, &target, host.capacity) {
            for (k, &i) in members.iter().enumerate() {
                if cur[k] != sizes.l1[i] {
                    sizes.l1[i] = cur[k];
                    sizes.l1_reason[i] = undamped.l1_reason[i].clone();
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
        let floors: Vec<u64> = members.iter().map(|&(i, k)| floor2(i, k)).collect();
        let target: Vec<u64> = members.iter().map(|&(i, k)| undamped.l2[i][k]).collect();
        let mut cur: Vec<u64> = members.iter().map(|&(i, k)| sizes.l2[i][k]).collect();
        if raise_to_floors(&mut cur, &floors, &prev, &target, server.capacity) {
            for (j, &(i, k)) in members.iter().enumerate() {
                if cur[j] != sizes.l2[i][k] {
                    sizes.l2[i][k] = cur[j];
                    sizes.l2_reason[i] = undamped.l2_reason[i].clone();
                }
            }
        }
    }
}

/// One node: raises each partition below its floor to it, and takes the room from the
/// others (see [`honour_guard_floors`]); whether anything changed.
pub(super) fn raise_to_floors(
    cur: &mut [u64],
    floors: &[u64],
    prev: &[u64],
    target: &[u64],
    capacity: u64,
) -> bool {
    let mut changed = false;
    for (c, &f) in cur.iter_mut().zip(floors) {
        if *c < f {
            *c = f;
            changed = true;
        }
    }
    if !changed {
        return false;
    }
    let mut over = cur.iter().sum::<u64>().saturating_sub(capacity);
    let room: [&dyn Fn(usize, u64) -> u64; 3] = [
        &|k, c| c.saturating_sub(prev[k].max(floors[k])),
        &|k, c| c.saturating_sub(target[k].max(floors[k])),
        &|k, c| c.saturating_sub(floors[k]),
    ];
    for pass in room {
        for (k, c) in cur.iter_mut().enumerate() {
            if over == 0 {
                return true;
            }
            let cut = pass(k, *c).min(over);
            *c -= cut;
            over -= cut;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::raise_to_floors;

    #[test]
    fn a_floor_is_raised_at_once_and_paid_for_by_growth_then_by_paced_shrinks() {
        // A node of 100 blocks. Tenant 0 held 20 and its floor is now 50 (a probe was
        // reverted); the damped plan gave it 30. Tenant 1 grew from 40 to 45; tenant 2 is
        // draining from 40 towards 25, paced at 25 + 0 = 25.
        let prev = [20, 40, 40];
        let target = [50, 25, 25];
        let floors = [50, 0, 0];
        let mut cur = [30, 45, 25];
        assert!(raise_to_floors(&mut cur, &floors, &prev, &target, 100));
        // 20 more for tenant 0: 5 from tenant 1's growth (back to 40), 15 from tenant 1
        // above its undamped 25 (the first two passes), none from tenant 2 at its target.
        assert_eq!(cur, [50, 25, 25]);
        assert_eq!(cur.iter().sum::<u64>(), 100);
        // A paced drain still holding space above its target pays next.
        let mut cur = [30, 40, 30];
        assert!(raise_to_floors(
            &mut cur,
            &[50, 0, 0],
            &[20, 40, 40],
            &[50, 40, 10],
            100
        ));
        assert_eq!(cur, [50, 40, 10]);
        // Nothing below its floor: nothing changes.
        let mut cur = [50, 30, 20];
        assert!(!raise_to_floors(&mut cur, &[50, 0, 0], &prev, &target, 100));
        assert_eq!(cur, [50, 30, 20]);
    }
}
