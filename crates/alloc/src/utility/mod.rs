//! Utility maximisation: share a capacity between tenants so that the weighted sum of
//! their hit ratios is as large as possible (Moirai §3.3), three ways.
//!
//! The problem is discrete: sizes are whole *steps* of `step` blocks (Moirai's epsilon);
//! tenant `i` holds `k_i` steps with `min_i <= k_i <= max_i`, `sum k_i <= C`, and is worth
//! `f_i(k) = weight_i * hit_i(k * step)`. The weight is what a hit of this tenant is worth;
//! to maximise the total number of hits use the tenant's access rate.
//!
//! * [`water_fill`] — Moirai's Algorithm 3.1 as written: repeatedly give one step to the
//!   tenant whose next step gains the most, scanning every tenant each time
//!   (O(T · C) for C steps). Optimal on concave curves; on curves with plateaus before a
//!   cliff (loops, scans) it stops short of the cliff, because the first step past the
//!   plateau gains nothing.
//! * [`exact`] — dynamic programming over tenants and capacity, O(T · C · K). Exact for any
//!   curve; for small instances, and the oracle the tests hold the fast method to.
//! * [`fast`] — the method that scales: each tenant's `f_i` is replaced by its concave hull
//!   on the step grid (built from the curve's points only: between two grid points that
//!   bracket no curve point `f_i` is linear, so only `floor`/`ceil` of each point's size
//!   can be a hull vertex), then whole *hull segments* are handed out by slope (greedy is
//!   exact on concave functions, and every step of a segment gains the same).
//!   The hulls of all tenants live in flat buffers, as indices of curve points when every
//!   vertex is one (4 bytes a vertex; fresh memory costs page faults) — see `hull.rs`.
//!   A max-heap hands the segments out in O((T + V) log T) for V segments handed out;
//!   the same allocation is found faster by a threshold search on the slope (the heap
//!   hands out segments in decreasing slope, so the result is "all segments steeper than
//!   λ*, then those at λ* by tenant index"): sampled rounds that close a bracket around λ*
//!   with exact counts by binary search in each tenant's window of slopes, a few rounds
//!   of O(T log V) and one small sort, whatever the capacity — see `greedy.rs`. That is
//!   the default ([`Greedy`]), and tests hold the two to equality.
//!   Every tenant ends on a hull vertex, where hull and curve agree (the hull holds the
//!   very `f64` the curve gives, so the objective is summed from it without reading the
//!   curves again), except at most one:
//!   the one being served when the capacity ran out. For it (only if its curve is below
//!   the hull there) there are two fix-ups, [`FixUp`]:
//!   - `Round` (UCP-style): either keep it where it is, or round it down to the segment's
//!     lower vertex and give the freed steps, one at a time, to the other tenants by their
//!     actual next-step gain; whichever is worth more. The result is within that one
//!     segment's hull gain of the optimum: `exact >= fast` and
//!     `exact <= hull_value` (the hull optimum bounds every allocation). The heap of
//!     next-step gains starts from each tenant's hull slope, an upper bound, and reads a
//!     tenant's curve only when its bound comes to the top (see `redistribute`): the same
//!     steps as a heap of actual gains, for a few curve look-ups instead of two per tenant.
//!   - `Talus` (Beckmann & Sanchez, HPCA'15): keep the hull allocation and serve that tenant
//!     by two shadow partitions at the segment's end points, splitting its accesses so the
//!     mix earns exactly the hull value; see [`TalusSplit`].
//!
//! On `lachesis bench alloc`'s instance (5,000 tenants × 1,000 points, 10⁶ steps) the
//! hull building is most of the time now; it reads every curve point once.

use crate::AllocError;
use mrc::HitRatioCurve;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One tenant of a utility problem. Sizes are in steps.
#[derive(Clone, Debug)]
pub struct UtilityTenant<'a> {
    /// The tenant's hit-ratio curve (sizes in blocks; assumed monotone).
    pub curve: &'a HitRatioCurve,
    /// What one unit of hit ratio of this tenant is worth (must be finite and >= 0).
    pub weight: f64,
    /// Steps the tenant must get.
    pub min_steps: u64,
    /// Steps the tenant may get at most (`u64::MAX` for no limit). Sizes past the curve's
    /// last point gain nothing, so the effective maximum is also capped there.
    pub max_steps: u64,
}

/// A utility problem: tenants, step size in blocks, capacity in steps.
#[derive(Clone, Debug)]
pub struct UtilityProblem<'a> {
    /// The tenants.
    pub tenants: Vec<UtilityTenant<'a>>,
    /// Blocks per step (epsilon), at least 1.
    pub step: u64,
    /// Capacity in steps.
    pub capacity_steps: u64,
}

/// How [`fast`] treats the one tenant that may end inside a hull segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixUp {
    /// Keep it or round it down and redistribute, whichever is worth more.
    Round,
    /// Keep the hull allocation and report a Talus split for that tenant.
    Talus,
}

/// Talus's two shadow partitions for a tenant whose size lies inside a hull segment
/// `[low, high]` (steps): a fraction `rho` of its accesses goes to a partition of
/// `rho * low` steps, the rest to one of `(1 - rho) * high` steps; the two together hold
/// `size` steps and earn `rho * f(low) + (1 - rho) * f(high)`, the hull value at `size`.
#[derive(Clone, Debug, PartialEq)]
pub struct TalusSplit {
    /// Index of the tenant.
    pub tenant: usize,
    /// Its allocation in steps.
    pub size: u64,
    /// The segment's lower end point (steps).
    pub low: u64,
    /// The segment's upper end point (steps).
    pub high: u64,
    /// Fraction of accesses sent to the small shadow partition, `(high - size) / (high - low)`.
    pub rho: f64,
}

/// The result of [`fast`].
#[derive(Clone, Debug, PartialEq)]
pub struct FastAllocation {
    /// Steps per tenant.
    pub steps: Vec<u64>,
    /// The objective earned by `steps` on the actual curves (with `Talus`, on the hull for
    /// the split tenant, which Talus realises).
    pub value: f64,
    /// The hull optimum: an upper bound on every feasible allocation's objective.
    pub hull_value: f64,
    /// With [`FixUp::Talus`], the split for the tenant inside a segment, if any.
    pub talus: Option<TalusSplit>,
}

use crate::gain::Gain;

impl UtilityTenant<'_> {
    /// The effective maximum: `max_steps` capped at the curve's end, never below `min`.
    fn top(&self, step: u64) -> u64 {
        let end = self.curve.max_size().div_ceil(step);
        self.max_steps.min(end).max(self.min_steps)
    }
    /// `f(k)`: weighted hit ratio at `k` steps.
    fn f(&self, k: u64, step: u64) -> f64 {
        self.weight * self.curve.hit_ratio((k * step) as f64)
    }
}

impl UtilityProblem<'_> {
    /// Checks step, weights and that the minimums fit.
    pub fn validate(&self) -> Result<(), AllocError> {
        if self.step == 0 {
            return Err(AllocError::ZeroStep);
        }
        let mut need: u64 = 0;
        for (i, t) in self.tenants.iter().enumerate() {
            if !(t.weight.is_finite() && t.weight >= 0.0) {
                return Err(AllocError::BadWeight {
                    tenant: format!("#{i}"),
                    weight: t.weight,
                });
            }
            if t.min_steps > t.max_steps {
                return Err(AllocError::MinAboveMax {
                    tenant: format!("#{i}"),
                });
            }
            need = need.saturating_add(t.min_steps);
        }
        if need > self.capacity_steps {
            return Err(AllocError::MinimumsExceedCapacity {
                need: need.saturating_mul(self.step),
                capacity: self.capacity_steps.saturating_mul(self.step),
            });
        }
        Ok(())
    }

    /// The objective of an allocation on the actual curves.
    pub fn value(&self, steps: &[u64]) -> f64 {
        self.tenants
            .iter()
            .zip(steps)
            .map(|(t, &k)| t.f(k, self.step))
            .sum()
    }
}

/// Moirai's Algorithm 3.1: one step at a time to the tenant with the highest weighted
/// marginal gain (ties to the lowest index), scanning all tenants per step. Stops when
/// the capacity is used or no tenant gains from another step (the rest stays spare).
pub fn water_fill(p: &UtilityProblem) -> Result<Vec<u64>, AllocError> {
    water_fill_capped(p, u64::MAX).map(|(k, _)| k)
}

/// [`water_fill`] that stops after `max_rounds` steps handed out; returns the allocation
/// and the number of steps handed out (used to time it on a prefix and extrapolate).
pub fn water_fill_capped(
    p: &UtilityProblem,
    max_rounds: u64,
) -> Result<(Vec<u64>, u64), AllocError> {
    p.validate()?;
    let s = p.step;
    let mut k: Vec<u64> = p.tenants.iter().map(|t| t.min_steps).collect();
    let tops: Vec<u64> = p.tenants.iter().map(|t| t.top(s)).collect();
    let gain = |i: usize, k: u64| -> f64 {
        if k >= tops[i] {
            f64::NEG_INFINITY
        } else {
            let t = &p.tenants[i];
            t.f(k + 1, s) - t.f(k, s)
        }
    };
    let mut gains: Vec<f64> = (0..k.len()).map(|i| gain(i, k[i])).collect();
    let mut free = p.capacity_steps - k.iter().sum::<u64>();
    let mut rounds = 0;
    while free > 0 && rounds < max_rounds {
        let mut best = usize::MAX;
        let mut best_gain = 0.0;
        for (i, &g) in gains.iter().enumerate() {
            if g > best_gain {
                best_gain = g;
                best = i;
            }
        }
        if best == usize::MAX {
            break;
        }
        k[best] += 1;
        gains[best] = gain(best, k[best]);
        free -= 1;
        rounds += 1;
    }
    Ok((k, rounds))
}

/// How [`fast_with`] hands out hull segments (both give the same allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Greedy {
    /// Threshold search over slopes, O(T log V) per sampling round, a few rounds.
    Threshold,
    /// Max-heap of segments, O((T + V) log T).
    Heap,
}

/// The fast method: greedy over concave hulls (threshold search), then the fix-up.
pub fn fast(p: &UtilityProblem, fix: FixUp) -> Result<FastAllocation, AllocError> {
    fast_with(p, fix, Greedy::Threshold)
}

/// [`fast`] with a choice of greedy.
pub fn fast_with(
    p: &UtilityProblem,
    fix: FixUp,
    greedy: Greedy,
) -> Result<FastAllocation, AllocError> {
    p.validate()?;
    let s = p.step;
    let hulls = Hulls::new(&p.tenants, s);
    let free = p.capacity_steps - p.tenants.iter().map(|t| t.min_steps).sum::<u64>();
    let (k, seg, mid) = match greedy {
        Greedy::Threshold => greedy::threshold(&hulls, free),
        Greedy::Heap => greedy::heap(&hulls, free),
    };
    let hull_at = |i: usize, k: u64| -> f64 {
        let h = hulls.get(i);
        let j = seg[i];
        if j + 1 >= h.len() || k == h.k(j) {
            return h.v(j);
        }
        h.v(j) + h.slope(j) * (k - h.k(j)) as f64
    };
    let hull_value: f64 = (0..k.len()).map(|i| hull_at(i, k[i])).sum();
    // f at each tenant's allocation. Every tenant but `mid` stands on a hull vertex, where
    // the hull holds f(k) itself (computed exactly as `UtilityTenant::f` computes it), so
    // only `mid` needs the curve.
    let mut vals: Vec<f64> = (0..k.len()).map(|i| hulls.get(i).v(seg[i])).collect();
    let Some(j) = mid else {
        let value = vals.iter().sum();
        return Ok(FastAllocation {
            steps: k,
            value,
            hull_value,
            talus: None,
        });
    };
    let (low, high) = (hulls.get(j).k(seg[j]), hulls.get(j).k(seg[j] + 1));
    let actual = p.tenants[j].f(k[j], s);
    vals[j] = actual;
    let keep: f64 = vals.iter().sum();
    if hull_at(j, k[j]) - actual <= 1e-12 {
        return Ok(FastAllocation {
            steps: k,
            value: keep,
            hull_value,
            talus: None,
        });
    }
    match fix {
        FixUp::Talus => {
            let rho = (high - k[j]) as f64 / (high - low) as f64;
            let value = keep - actual + hull_at(j, k[j]);
            let talus = Some(TalusSplit {
                tenant: j,
                size: k[j],
                low,
                high,
                rho,
            });
            Ok(FastAllocation {
                steps: k,
                value,
                hull_value,
                talus,
            })
        }
        FixUp::Round => {
            let mut r = k.clone();
            let freed = r[j] - low;
            r[j] = low;
            vals[j] = hulls.get(j).v(seg[j]);
            redistribute(p, &hulls, &seg, &mut r, &mut vals, freed, j);
            let rounded: f64 = vals.iter().sum();
            let (steps, value) = if rounded > keep {
                (r, rounded)
            } else {
                (k, keep)
            };
            Ok(FastAllocation {
                steps,
                value,
                hull_value,
                talus: None,
            })
        }
    }
}

/// Gives up to `free` steps one at a time to the tenants (except `skip`) by actual
/// next-step gain, while some gain is positive; `vals[i]` follows `f(k[i])`.
///
/// Every tenant starts on a vertex of its hull (`seg[i]`), so its first gain is at most
/// the slope of the hull segment that starts there (the curve is below the hull, and
/// equal to it at the vertex). The heap starts with those bounds, padded for rounding,
/// and a popped bound is replaced by the actual gain: an actual gain that reaches the top
/// beats every other tenant's bound, hence its actual gain, so the steps go exactly where
/// a heap of actual gains sends them — while only the few tenants that come near the top
/// read their curves (a heap of every tenant's actual gain costs two curve look-ups each).
fn redistribute(
    p: &UtilityProblem,
    hulls: &Hulls,
    seg: &[usize],
    k: &mut [u64],
    vals: &mut [f64],
    mut free: u64,
    skip: usize,
) {
    let s = p.step;
    // (gain or bound, tenant, f(k + 1) if the gain is exact)
    let mut heap: BinaryHeap<(Gain, Reverse<usize>, Option<Gain>)> = (0..k.len())
        .filter(|&i| i != skip && seg[i] + 1 < hulls.get(i).len())
        .map(|i| {
            let h = hulls.get(i);
            let pad = 1e-9 * (h.v(seg[i]).abs() + h.v(seg[i] + 1).abs()) + f64::MIN_POSITIVE;
            (Gain(h.slope(seg[i]) + pad), Reverse(i), None)
        })
        .collect();
    let exact = |i: usize, k: u64, now: f64| {
        let t = &p.tenants[i];
        (k < t.top(s)).then(|| {
            let up = t.f(k + 1, s);
            (Gain(up - now), Reverse(i), Some(Gain(up)))
        })
    };
    while free > 0 {
        let Some((Gain(g), Reverse(i), up)) = heap.pop() else {
            break;
        };
        if g <= 0.0 {
            break;
        }
        match up {
            None => heap.extend(exact(i, k[i], vals[i])),
            Some(Gain(up)) => {
                k[i] += 1;
                vals[i] = up;
                free -= 1;
                heap.extend(exact(i, k[i], up));
            }
        }
    }
}

mod exact;
mod greedy;
mod hull;
pub use exact::exact;
use hull::Hulls;

#[cfg(test)]
mod tests;
