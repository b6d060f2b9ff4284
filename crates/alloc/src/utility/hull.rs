//! Every tenant's upper concave hull on the step grid, in flat buffers.
//!
//! A hull is built by a monotone chain in a scratch buffer reused from tenant to tenant,
//! then stored in one of two ways:
//! * when every vertex is one of the curve's own points (the usual case: a step of one
//!   block, or curves sampled on the step grid, and ends at curve points) as the points'
//!   indices, 4 bytes a vertex — `k` and `f(k)` are read back from the curve, which the
//!   caller holds anyway, and `f(k) = weight * (1 - miss_ratio)` is the same `f64` the
//!   chain used;
//! * otherwise as `(k, f(k))` pairs, 16 bytes a vertex.
//!
//! Fresh memory costs a page fault per 4 KiB, and at 5,000 tenants × 1,000 points the
//! pairs alone are some 30 MB a call — a quarter of the fast method's time went to the
//! kernel before the indices. No per-tenant vectors, and no slope array either: a
//! segment's slope is computed from its two ends whenever it is needed ([`Hull::slope`]),
//! always the same `f64`.

use super::UtilityTenant;
use mrc::CurvePoint;

/// Vertex index meaning "not a curve point".
const OFF: u32 = u32::MAX;

/// One tenant's hull, as stored.
#[derive(Clone, Copy, Debug)]
pub(super) enum Hull<'a> {
    /// `(k, f(k))` pairs.
    Pairs(&'a [(u64, f64)]),
    /// Indices of the curve points that are the vertices (step `step`, weight `w`).
    Points {
        /// The curve's points.
        pts: &'a [CurvePoint],
        /// The vertices' indices into `pts`.
        idx: &'a [u32],
        /// The tenant's weight.
        w: f64,
        /// Blocks per step (vertex `k` is `cache_size / step`).
        step: u64,
    },
}

impl Hull<'_> {
    /// Number of vertices.
    #[inline]
    pub(super) fn len(self) -> usize {
        match self {
            Hull::Pairs(h) => h.len(),
            Hull::Points { idx, .. } => idx.len(),
        }
    }

    /// Vertex `j`: `(k, f(k))`.
    #[inline]
    pub(super) fn at(self, j: usize) -> (u64, f64) {
        match self {
            Hull::Pairs(h) => h[j],
            Hull::Points { pts, idx, w, step } => {
                let p = pts[idx[j] as usize];
                let k = if step == 1 {
                    p.cache_size
                } else {
                    p.cache_size / step
                };
                (k, w * (1.0 - p.miss_ratio))
            }
        }
    }

    /// Size of vertex `j` in steps.
    #[inline]
    pub(super) fn k(self, j: usize) -> u64 {
        match self {
            Hull::Pairs(h) => h[j].0,
            Hull::Points { pts, idx, step, .. } => {
                let s = pts[idx[j] as usize].cache_size;
                if step == 1 {
                    s
                } else {
                    s / step
                }
            }
        }
    }

    /// `f` at vertex `j`.
    #[inline]
    pub(super) fn v(self, j: usize) -> f64 {
        self.at(j).1
    }

    /// Slope of segment `j` (from vertex `j` to `j + 1`).
    #[inline]
    pub(super) fn slope(self, j: usize) -> f64 {
        let (a, b) = (self.at(j), self.at(j + 1));
        (b.1 - a.1) / (b.0 - a.0) as i64 as f64
    }

    /// `lo` plus the number of segments `j` in `lo..hi` steeper than `lam`, by binary
    /// search (slopes never rise along a hull).
    #[inline]
    pub(super) fn above(self, lam: f64, mut lo: usize, mut hi: usize) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.slope(mid) > lam {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// [`Hull::above`] by galloping from `lo`: cheaper when the answer is near `lo`.
    #[inline]
    pub(super) fn above_from(self, lam: f64, lo: usize, hi: usize) -> usize {
        let mut d = 1;
        let mut from = lo;
        while from + d <= hi && self.slope(from + d - 1) > lam {
            from += d;
            d *= 2;
        }
        self.above(lam, from, (from + d - 1).min(hi))
    }
}

/// Where a tenant's hull is stored.
#[derive(Clone, Copy, Debug)]
enum Stored {
    /// `pairs[from..to]`.
    Pairs(usize, usize),
    /// `idx[from..to]`.
    Points(usize, usize),
}

/// The hulls of all tenants of a problem.
#[derive(Clone, Debug)]
pub(super) struct Hulls<'a> {
    tenants: &'a [UtilityTenant<'a>],
    step: u64,
    pairs: Vec<(u64, f64)>,
    idx: Vec<u32>,
    at: Vec<Stored>,
    /// Per tenant, how many of its segments have a positive slope (a prefix).
    pos: Vec<usize>,
}

impl<'a> Hulls<'a> {
    /// The hulls of `tenants` on a grid of `step` blocks.
    pub(super) fn new(tenants: &'a [UtilityTenant<'a>], step: u64) -> Hulls<'a> {
        // Upper bound on the vertices: at most two per curve point plus the two ends,
        // and at most one per grid point. Reserved once; only what is written is touched.
        let cap: usize = tenants
            .iter()
            .map(|t| {
                let span = usize::try_from(t.top(step) - t.min_steps).unwrap_or(usize::MAX);
                (2 * t.curve.points().len() + 2).min(span.saturating_add(1))
            })
            .fold(0usize, usize::saturating_add);
        let mut h = Hulls {
            tenants,
            step,
            pairs: Vec::new(),
            idx: Vec::with_capacity(cap),
            at: Vec::with_capacity(tenants.len()),
            pos: Vec::with_capacity(tenants.len()),
        };
        let mut scratch = Vec::new();
        for t in tenants {
            scratch.clear();
            build(&mut scratch, t, step);
            let stored =
                if t.curve.points().len() < OFF as usize && scratch.iter().all(|v| v.2 != OFF) {
                    let from = h.idx.len();
                    h.idx.extend(scratch.iter().map(|v| v.2));
                    Stored::Points(from, h.idx.len())
                } else {
                    let from = h.pairs.len();
                    h.pairs.extend(scratch.iter().map(|v| (v.0, v.1)));
                    Stored::Pairs(from, h.pairs.len())
                };
            h.at.push(stored);
            let i = h.at.len() - 1;
            let mine = h.get(i);
            let positive = mine.above(0.0, 0, mine.len() - 1);
            h.pos.push(positive);
        }
        h
    }

    /// Number of tenants.
    pub(super) fn len(&self) -> usize {
        self.at.len()
    }

    /// Tenant `i`'s hull.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Hull<'_> {
        match self.at[i] {
            Stored::Pairs(a, b) => Hull::Pairs(&self.pairs[a..b]),
            Stored::Points(a, b) => {
                let t = &self.tenants[i];
                Hull::Points {
                    pts: t.curve.points(),
                    idx: &self.idx[a..b],
                    w: t.weight,
                    step: self.step,
                }
            }
        }
    }

    /// How many of tenant `i`'s segments have a positive slope.
    #[inline]
    pub(super) fn positive(&self, i: usize) -> usize {
        self.pos[i]
    }
}

/// The index of the point of size `size`, if there is one.
fn point_at(pts: &[CurvePoint], size: u64) -> u32 {
    let j = pts.partition_point(|p| p.cache_size < size);
    if j < pts.len() && pts[j].cache_size == size {
        u32::try_from(j).unwrap_or(OFF)
    } else {
        OFF
    }
}

/// Appends to `h` the upper concave hull of `t`'s `f` on `[min, top]` as vertices
/// `(k, f(k), index of the curve point at k * step or OFF)`, from the grid points that
/// bracket the curve's points.
pub(super) fn build(h: &mut Vec<(u64, f64, u32)>, t: &UtilityTenant, step: u64) {
    let (lo, hi) = (t.min_steps, t.top(step));
    let pts = t.curve.points();
    let base = h.len();
    h.reserve(pts.len() + 2);
    let idx = |j: usize| u32::try_from(j).unwrap_or(OFF);
    // Monotone chain on h[base..]. Drop the top vertex b while it is not strictly above
    // the chord from the one below it, a, to (k, v). Sizes fit in i64; converting from i64
    // is one instruction, from u64 several.
    let push = |h: &mut Vec<(u64, f64, u32)>, k: u64, v: f64, i: u32| {
        while h.len() >= base + 2 {
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            let cross =
                (b.0 - a.0) as i64 as f64 * (v - a.1) - (b.1 - a.1) * (k - a.0) as i64 as f64;
            if cross >= 0.0 {
                h.pop();
            } else {
                break;
            }
        }
        h.push((k, v, i));
    };
    // The ends by binary search (`f` interpolates exactly as the walk below does, and is
    // the point's own value on a point). Size 0 is always the first point.
    let lo_at = if lo == 0 {
        0
    } else {
        point_at(pts, lo.saturating_mul(step))
    };
    push(h, lo, t.f(lo, step), lo_at);
    if step == 1 {
        // Curves already at the allocation's granularity: every point strictly inside
        // (lo, hi) is a grid point and its own value. The same chain as `push`, with the
        // top vertex kept in registers.
        let mut b = h[h.len() - 1];
        for (j, p) in pts.iter().enumerate() {
            if p.cache_size <= lo {
                continue;
            }
            if p.cache_size >= hi {
                break;
            }
            let (k, v) = (p.cache_size, t.weight * (1.0 - p.miss_ratio));
            while h.len() >= base + 2 {
                let a = h[h.len() - 2];
                let cross =
                    (b.0 - a.0) as i64 as f64 * (v - a.1) - (b.1 - a.1) * (k - a.0) as i64 as f64;
                if cross >= 0.0 {
                    h.pop();
                    b = a;
                } else {
                    break;
                }
            }
            b = (k, v, idx(j));
            h.push(b);
        }
    } else {
        // Candidate grid points in increasing order (floor/ceil of increasing sizes are
        // non-decreasing), each with f evaluated by walking the points alongside.
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
        let mut last = lo;
        for (pj, p) in pts.iter().enumerate() {
            for k in [p.cache_size / step, p.cache_size.div_ceil(step)] {
                if k > last && k < hi {
                    last = k;
                    // A point on the grid is its own value: no walk, no interpolation.
                    if k.saturating_mul(step) == p.cache_size {
                        push(h, k, t.weight * (1.0 - p.miss_ratio), idx(pj));
                    } else {
                        let v = eval(k);
                        push(h, k, v, OFF);
                    }
                }
            }
        }
    }
    if hi > lo {
        let last = pts.len() - 1;
        let hi_at = if hi.saturating_mul(step) == pts[last].cache_size {
            idx(last)
        } else {
            point_at(pts, hi.saturating_mul(step))
        };
        push(h, hi, t.f(hi, step), hi_at);
    }
}
