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
//!   can be a hull vertex), then a max-heap hands out *whole hull segments* by slope
//!   (greedy is exact on concave functions, and every step of a segment gains the same).
//!   Cost O((T + V) log T) for V hull vertices handed out — at most O((T + C) log T).
//!   The same allocation is found faster by a threshold search on the slope (the heap
//!   hands out segments in decreasing slope, so the result is "all segments steeper than
//!   λ*, then those at λ* by tenant index"), O(64 · T · log V) whatever the capacity;
//!   that is the default ([`Greedy`]), and a test holds the two to equality.
//!   Every tenant ends on a hull vertex, where hull and curve agree, except at most one:
//!   the one being served when the capacity ran out. For it (only if its curve is below
//!   the hull there) there are two fix-ups, [`FixUp`]:
//!   - `Round` (UCP-style): either keep it where it is, or round it down to the segment's
//!     lower vertex and give the freed steps, one at a time, to the other tenants by their
//!     actual next-step gain; whichever is worth more. The result is within that one
//!     segment's hull gain of the optimum: `exact >= fast` and
//!     `exact <= hull_value` (the hull optimum bounds every allocation).
//!   - `Talus` (Beckmann & Sanchez, HPCA'15): keep the hull allocation and serve that tenant
//!     by two shadow partitions at the segment's end points, splitting its accesses so the
//!     mix earns exactly the hull value; see [`TalusSplit`].

use crate::AllocError;
use mrc::HitRatioCurve;
use std::cmp::{Ordering, Reverse};
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

/// Total order on finite gains for the heap.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Gain(f64);
impl Eq for Gain {}
impl PartialOrd for Gain {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Gain {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

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

/// The upper concave hull of `f` on `[min, top]` as vertices `(k, f(k))`, from the grid
/// points that bracket the curve's points.
fn hull(t: &UtilityTenant, step: u64) -> Vec<(u64, f64)> {
    let (lo, hi) = (t.min_steps, t.top(step));
    let pts = t.curve.points();
    // Candidate grid points in increasing order (floor/ceil of increasing sizes are
    // non-decreasing), each with f evaluated by walking the points alongside, streamed
    // straight into the monotone-chain hull (no intermediate buffer: at 5,000 tenants ×
    // 1,000 points the buffers alone would be 160 MB of page faults).
    let mut j = 0; // first point with cache_size >= size
    let mut eval = |k: u64| -> f64 {
        let size = k.saturating_mul(step);
        while j < pts.len() && pts[j].cache_size < size {
            j += 1;
        }
        let miss = if j == pts.len() {
            pts[pts.len() - 1].miss_ratio
        } else if pts[j].cache_size == size || j == 0 {
            pts[j].miss_ratio
        } else {
            let (a, b) = (pts[j - 1], pts[j]);
            let f = (size - a.cache_size) as f64 / (b.cache_size - a.cache_size) as f64;
            a.miss_ratio + f * (b.miss_ratio - a.miss_ratio)
        };
        t.weight * (1.0 - miss)
    };
    let mut h: Vec<(u64, f64)> = Vec::with_capacity(pts.len() + 2);
    let push = |h: &mut Vec<(u64, f64)>, k: u64, v: f64| {
        while h.len() >= 2 {
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            // Drop b if it is not strictly above the chord a -> (k, v).
            // Sizes fit in i64; converting from i64 is one instruction, from u64 several.
            let cross =
                (b.0 - a.0) as i64 as f64 * (v - a.1) - (b.1 - a.1) * (k - a.0) as i64 as f64;
            if cross >= 0.0 {
                h.pop();
            } else {
                break;
            }
        }
        h.push((k, v));
    };
    push(&mut h, lo, eval(lo));
    let mut last = lo;
    for p in pts {
        // Two u64 divisions per point are a good part of the hull's time; a step of one
        // block (curves already at the allocation's granularity) needs none.
        let (a, b) = if step == 1 {
            (p.cache_size, p.cache_size)
        } else {
            (p.cache_size / step, p.cache_size.div_ceil(step))
        };
        for k in [a, b] {
            if k > last && k < hi {
                last = k;
                // A point on the grid is its own value: no walk, no interpolation.
                let v = if k.saturating_mul(step) == p.cache_size {
                    t.weight * (1.0 - p.miss_ratio)
                } else {
                    eval(k)
                };
                push(&mut h, k, v);
            }
        }
    }
    if hi > lo {
        let v = eval(hi);
        push(&mut h, hi, v);
    }
    h
}

type Hull = Vec<(u64, f64)>;

/// Slope of hull segment `j` (from vertex `j` to `j + 1`).
fn slope(h: &[(u64, f64)], j: usize) -> f64 {
    (h[j + 1].1 - h[j].1) / (h[j + 1].0 - h[j].0) as i64 as f64
}

/// Greedy over hull segments with a max-heap: whole segments by slope, ties to the lowest
/// tenant index. Returns the steps, each tenant's segment index, and the tenant left
/// inside a segment, if any. O((T + V) log T) for V segments handed out. Kept as the
/// reference for [`greedy_threshold`], which computes the same result faster.
fn greedy_heap(hulls: &[Hull], mut free: u64) -> (Vec<u64>, Vec<usize>, Option<usize>) {
    let mut k: Vec<u64> = hulls.iter().map(|h| h[0].0).collect();
    let mut seg = vec![0usize; k.len()];
    let mut heap: BinaryHeap<(Gain, Reverse<usize>)> = hulls
        .iter()
        .enumerate()
        .filter(|(_, h)| h.len() >= 2)
        .map(|(i, h)| (Gain(slope(h, 0)), Reverse(i)))
        .collect();
    let mut mid = None;
    while free > 0 {
        let Some((Gain(g), Reverse(i))) = heap.pop() else {
            break;
        };
        if g <= 0.0 {
            break;
        }
        let h = &hulls[i];
        let len = h[seg[i] + 1].0 - k[i];
        if len <= free {
            free -= len;
            k[i] += len;
            seg[i] += 1;
            if seg[i] + 1 < h.len() {
                heap.push((Gain(slope(h, seg[i])), Reverse(i)));
            }
        } else {
            k[i] += free;
            free = 0;
            mid = Some(i);
        }
    }
    (k, seg, mid)
}

/// The same allocation as [`greedy_heap`], found by a threshold search instead: the heap
/// hands out segments in decreasing slope, so the result is "every segment steeper than
/// λ*, then the segments of slope exactly λ* in tenant order", where λ* is the smallest
/// slope (or 0) whose steeper segments fit. λ* is found by a randomised selection over the
/// union of the hulls' slopes: keep a bracket `(a, b]` (nothing fits above `a`...
/// everything steeper than `b` fits) and, per tenant, the window of its slopes strictly
/// inside it (slopes strictly decrease, so a window is a range); each round draws a pivot
/// uniformly from all windows, counts the demand at the pivot by binary search within the
/// windows, and moves one end of the bracket to it. Expected O(log V) rounds of
/// O(T log V) — independent of the capacity, and about a third of the rounds a bisection
/// over `f64` bit patterns needs.
fn greedy_threshold(hulls: &[Hull], free: u64) -> (Vec<u64>, Vec<usize>, Option<usize>) {
    let slopes: Vec<Vec<f64>> = hulls
        .iter()
        .map(|h| {
            (0..h.len().saturating_sub(1))
                .map(|j| slope(h, j))
                .collect()
        })
        .collect();
    // Segments of hull i steeper than lam, searching only within lo..hi.
    let count_in = |i: usize, lam: f64, lo: usize, hi: usize| -> usize {
        lo + slopes[i][lo..hi].partition_point(|&s| s > lam)
    };
    let count = |i: usize, lam: f64| count_in(i, lam, 0, slopes[i].len());
    let seg_slope = |i: usize, j: usize| slopes[i].get(j).copied();
    let demand_of = |cnt: &[usize]| -> u64 {
        cnt.iter().enumerate().fold(0u64, |acc, (i, &c)| {
            acc.saturating_add(hulls[i][c].0 - hulls[i][0].0)
        })
    };
    let n = hulls.len();
    let at_zero: Vec<usize> = (0..n).map(|i| count(i, 0.0)).collect();
    let lam = if demand_of(&at_zero) <= free {
        0.0
    } else {
        // Bracket: demand(a) > free, demand(b) <= free; windows hold the slopes in (a, b).
        let mut b = f64::INFINITY;
        let mut lo = vec![0usize; n]; // first index with slope < b
        let mut hi = at_zero; // first index with slope <= a (a = 0 now)
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        loop {
            let total: usize = (0..n).map(|i| hi[i] - lo[i]).sum();
            if total == 0 {
                break b;
            }
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut r = (rng % total as u64) as usize;
            let mut pivot = 0.0;
            for i in 0..n {
                let w = hi[i] - lo[i];
                if r < w {
                    pivot = slopes[i][lo[i] + r];
                    break;
                }
                r -= w;
            }
            // Counts at the pivot: every slope before lo[i] is >= b > pivot, so only
            // the window needs searching.
            let cnt: Vec<usize> = (0..n).map(|i| count_in(i, pivot, lo[i], hi[i])).collect();
            if demand_of(&cnt) <= free {
                b = pivot;
                for i in 0..n {
                    // Slopes equal to the pivot are not inside (a, b) any more.
                    lo[i] = lo[i] + slopes[i][lo[i]..hi[i]].partition_point(|&s| s >= pivot);
                }
            } else {
                hi = cnt;
            }
        }
    };
    let mut seg: Vec<usize> = (0..hulls.len()).map(|i| count(i, lam)).collect();
    let mut k: Vec<u64> = (0..hulls.len()).map(|i| hulls[i][seg[i]].0).collect();
    let mut left = free - (0..hulls.len()).map(|i| k[i] - hulls[i][0].0).sum::<u64>();
    let mut mid = None;
    if lam > 0.0 {
        for i in 0..hulls.len() {
            if left == 0 {
                break;
            }
            // (Rounding can leave two consecutive segments of one hull at equal slope.)
            while left > 0 && seg_slope(i, seg[i]) == Some(lam) {
                let len = hulls[i][seg[i] + 1].0 - k[i];
                if len <= left {
                    left -= len;
                    k[i] += len;
                    seg[i] += 1;
                } else {
                    k[i] += left;
                    left = 0;
                    mid = Some(i);
                }
            }
        }
    }
    (k, seg, mid)
}

/// How [`fast_with`] hands out hull segments (both give the same allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Greedy {
    /// Threshold search over slopes, O(64 · T · log V).
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
    let hulls: Vec<Vec<(u64, f64)>> = p.tenants.iter().map(|t| hull(t, s)).collect();
    let free = p.capacity_steps - p.tenants.iter().map(|t| t.min_steps).sum::<u64>();
    let (k, seg, mid) = match greedy {
        Greedy::Threshold => greedy_threshold(&hulls, free),
        Greedy::Heap => greedy_heap(&hulls, free),
    };
    let hull_at = |i: usize, k: u64| -> f64 {
        let h = &hulls[i];
        let j = seg[i];
        if j + 1 >= h.len() || k == h[j].0 {
            return h[j].1;
        }
        h[j].1 + slope(h, j) * (k - h[j].0) as f64
    };
    let hull_value: f64 = (0..k.len()).map(|i| hull_at(i, k[i])).sum();
    let Some(j) = mid else {
        let value = p.value(&k);
        return Ok(FastAllocation {
            steps: k,
            value,
            hull_value,
            talus: None,
        });
    };
    let (low, high) = (hulls[j][seg[j]].0, hulls[j][seg[j] + 1].0);
    let actual = p.tenants[j].f(k[j], s);
    if hull_at(j, k[j]) - actual <= 1e-12 {
        let value = p.value(&k);
        return Ok(FastAllocation {
            steps: k,
            value,
            hull_value,
            talus: None,
        });
    }
    match fix {
        FixUp::Talus => {
            let rho = (high - k[j]) as f64 / (high - low) as f64;
            let value = p.value(&k) - actual + hull_at(j, k[j]);
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
            let keep = p.value(&k);
            let mut r = k.clone();
            let freed = r[j] - low;
            r[j] = low;
            redistribute(p, &mut r, freed, j);
            let rounded = p.value(&r);
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
/// next-step gain, while some gain is positive.
fn redistribute(p: &UtilityProblem, k: &mut [u64], mut free: u64, skip: usize) {
    let s = p.step;
    let next = |i: usize, k: u64| -> Option<(Gain, Reverse<usize>)> {
        let t = &p.tenants[i];
        (k < t.top(s)).then(|| (Gain(t.f(k + 1, s) - t.f(k, s)), Reverse(i)))
    };
    let mut heap: BinaryHeap<_> = (0..k.len())
        .filter(|&i| i != skip)
        .filter_map(|i| next(i, k[i]))
        .collect();
    while free > 0 {
        let Some((Gain(g), Reverse(i))) = heap.pop() else {
            break;
        };
        if g <= 0.0 {
            break;
        }
        k[i] += 1;
        free -= 1;
        if let Some(e) = next(i, k[i]) {
            heap.push(e);
        }
    }
}

mod exact;
pub use exact::exact;

#[cfg(test)]
mod tests;
