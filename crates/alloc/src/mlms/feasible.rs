//! MLMS's SLO-fulfilment sets and the infeasible-partition filter (Sec. 3.2, steps 1.2
//! and 1.3): each tenant's fulfilment set is the set of (level-1, level-2) allocations
//! where its latency model meets its assured latency on the plane `lat = lat_assured`
//! (on the grid: for each level-1 size, the least level-2 size that meets it, which is
//! the Pareto frontier [`Ctx::frontier`] walks); the *feasibility set* is every
//! combination of one fulfilment point per tenant that fits each host's level 1, the
//! level-2 aggregate and each tenant's reachable servers, and whose level-2 totals can be
//! placed on the servers ([`Ctx::room`], exactly by maximum flow where the greedy fails).
//! A combination that does not fit is filtered out, never repaired.
//!
//! Departures, each needed to run every interval and each written beside the claims:
//! * **Bounded enumeration.** The paper enumerates "all possible allocations"; the number
//!   of combinations is the product of the fulfilment sets' sizes, exponential in the
//!   tenants. Each tenant's frontier is thinned to at most `K` points, evenly spaced along
//!   it from its level-1-lightest to its level-2-lightest end, with `K` the largest integer
//!   whose `n`-th power is within [`COMBINATIONS`]; the point of each frontier that lies
//!   within the tenant's fair share at both levels (the cheapest such, when there is one)
//!   is always kept, so the combination of those points, which fits wherever fair share
//!   does, is always examined.
//! * **Unreachable SLOs.** A tenant whose fulfilment set is empty (no allocation meets its
//!   SLO) takes nothing on the levels MLMS controls before the spare-space step, which
//!   then shares space with it by projected gain; the shortfall is reported.
//! * **No feasible combination** (absolute targets that cannot all be met together): the
//!   fair point is the only candidate, with its spare space handed out.

use super::{Ctx, Point};

/// At most this many combinations of fulfilment points are examined per interval.
pub const COMBINATIONS: usize = 4096;

/// Points kept per tenant when `n` tenants share [`COMBINATIONS`]: the largest `K` with
/// `K^n ≤ COMBINATIONS` (at least 1).
pub(super) fn per_tenant(n: usize) -> usize {
    if n == 0 {
        return 1;
    }
    let mut k = 1usize;
    while (k + 1)
        .checked_pow(n as u32)
        .is_some_and(|c| c <= COMBINATIONS)
    {
        k += 1;
    }
    k
}

/// Indices of at most `k` points of a frontier of `len` points, evenly spaced and always
/// including `keep` (when given).
pub(super) fn thin(len: usize, k: usize, keep: Option<usize>) -> Vec<usize> {
    if len <= k {
        return (0..len).collect();
    }
    let k = k.max(1);
    let slots = if keep.is_some() { k - 1 } else { k };
    let mut out: Vec<usize> = match slots {
        0 => Vec::new(),
        1 => vec![0],
        s => (0..s)
            .map(|j| (j * (len - 1) + (s - 1) / 2) / (s - 1))
            .collect(),
    };
    out.extend(keep);
    out.sort_unstable();
    out.dedup();
    out
}

impl Ctx<'_> {
    /// The feasibility set (see the module doc), each combination before spare space.
    /// Falls back to the fair point alone when no combination is feasible.
    pub(super) fn feasibility_set(&self, l1: bool, l2: bool) -> Vec<Vec<Point>> {
        let n = self.p.tenants.len();
        let base = |i: usize| -> Point {
            (
                if l1 { 0 } else { self.fair[i].0 },
                if l2 { 0 } else { self.fair[i].1 },
            )
        };
        let k = per_tenant(n);
        let lists: Vec<Vec<Point>> = (0..n)
            .map(|i| {
                let front = self.frontier(i, l1, l2);
                if front.is_empty() {
                    return vec![base(i)];
                }
                let (f1, f2) = self.fair[i];
                let c1 = self.p.hosts[self.p.tenants[i].host].max(1) as f64;
                let c2 = self.reach[i].max(1) as f64;
                let within = (0..front.len())
                    .filter(|&j| front[j].0 <= f1 && front[j].1 <= f2)
                    .min_by(|&a, &b| {
                        let cost = |p: Point| p.0 as f64 / c1 + p.1 as f64 / c2;
                        cost(front[a]).total_cmp(&cost(front[b]))
                    });
                thin(front.len(), k, within)
                    .into_iter()
                    .map(|j| front[j])
                    .collect()
            })
            .collect();
        let mut out = Vec::new();
        let mut digit = vec![0usize; n];
        loop {
            let pts: Vec<Point> = (0..n).map(|i| lists[i][digit[i]]).collect();
            if self.fits(&pts) && self.room(&pts).is_some() {
                out.push(pts);
            }
            // Next combination (mixed radix).
            let mut d = 0;
            while d < n {
                digit[d] += 1;
                if digit[d] < lists[d].len() {
                    break;
                }
                digit[d] = 0;
                d += 1;
            }
            if d == n {
                break;
            }
        }
        if out.is_empty() {
            out.push(self.fair.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_the_product() {
        assert_eq!(per_tenant(1), COMBINATIONS);
        assert_eq!(per_tenant(2), 64);
        assert_eq!(per_tenant(4), 8);
        assert_eq!(per_tenant(5), 5);
        assert_eq!(per_tenant(13), 1);
        for n in 1..20 {
            assert!(per_tenant(n).pow(n as u32) <= COMBINATIONS);
        }
    }

    #[test]
    fn thinning_keeps_both_ends_and_the_kept_point() {
        assert_eq!(thin(5, 8, None), vec![0, 1, 2, 3, 4]);
        assert_eq!(thin(10, 3, None), vec![0, 5, 9]);
        let t = thin(10, 3, Some(7));
        assert!(t.contains(&7) && t.contains(&0) && t.len() <= 3, "{t:?}");
        assert_eq!(thin(10, 1, Some(4)), vec![4]);
        assert_eq!(thin(10, 1, None), vec![0]);
    }
}
