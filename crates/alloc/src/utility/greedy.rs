//! Handing out hull segments by slope: the max-heap reference and the threshold search.
//!
//! Both return the steps per tenant, each tenant's segment index (the vertex it stands on,
//! or the start of the segment it is inside) and the tenant left inside a segment, if any.

use super::hull::Hulls;
use super::Gain;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Result of a greedy: steps, segment index per tenant, the tenant inside a segment.
pub(super) type Greedy = (Vec<u64>, Vec<usize>, Option<usize>);

/// Greedy over hull segments with a max-heap: whole segments by slope, ties to the lowest
/// tenant index. O((T + V) log T) for V segments handed out. Kept as the reference for
/// [`threshold`], which computes the same result faster.
pub(super) fn heap(hulls: &Hulls, mut free: u64) -> Greedy {
    let n = hulls.len();
    let mut k: Vec<u64> = (0..n).map(|i| hulls.get(i).k(0)).collect();
    let mut seg = vec![0usize; n];
    let mut heap: BinaryHeap<(Gain, Reverse<usize>)> = (0..n)
        .filter(|&i| hulls.get(i).len() >= 2)
        .map(|i| (Gain(hulls.get(i).slope(0)), Reverse(i)))
        .collect();
    let mut mid = None;
    while free > 0 {
        let Some((Gain(g), Reverse(i))) = heap.pop() else {
            break;
        };
        if g <= 0.0 {
            break;
        }
        let h = hulls.get(i);
        let len = h.k(seg[i] + 1) - k[i];
        if len <= free {
            free -= len;
            k[i] += len;
            seg[i] += 1;
            if seg[i] + 1 < h.len() {
                heap.push((Gain(h.slope(seg[i])), Reverse(i)));
            }
        } else {
            k[i] += free;
            free = 0;
            mid = Some(i);
        }
    }
    (k, seg, mid)
}

/// Sample size per round of the threshold search.
const SAMPLE: usize = 2048;
/// Windows this small (in segments, all tenants together) are finished by one sort.
const GATHER: usize = 4096;

/// The same allocation as [`heap`], found by a threshold search instead: the heap hands out
/// segments in decreasing slope, so the result is "every segment steeper than λ*, then the
/// segments of slope exactly λ* in tenant order", where λ* is the smallest slope (or 0)
/// whose steeper segments fit: `demand(λ*) <= free`, `demand(x)` being the total length of
/// the segments steeper than `x`.
///
/// The search keeps a bracket `(a, b)` with `demand(a) > free >= demand(b)` and, per
/// tenant, the window of its segments with slope strictly inside it (slopes fall along a
/// hull, so a window is an index range found by binary search); the tenants with a
/// non-empty window are the only ones a round looks at. Each round draws a systematic
/// sample of the windows' segments (every m-th, with its length), estimates from it where
/// the demand crosses `free`, and counts the exact demand at two sample slopes just above
/// and just below that estimate, which moves one or both ends of the bracket to them. A
/// few rounds bring the windows down from millions of segments to a few thousand, which
/// one sort finishes. Any pivots strictly inside the bracket give the same λ* (the bracket
/// only ever closes in on it); the sample only decides how fast.
pub(super) fn threshold(hulls: &Hulls, free: u64) -> Greedy {
    let n = hulls.len();
    let k0 = |i: usize| hulls.get(i).k(0);
    let demand_at_zero = (0..n).fold(0u64, |acc, i| {
        acc.saturating_add(hulls.get(i).k(hulls.positive(i)) - k0(i))
    });
    // seg[i]: number of tenant i's segments steeper than λ*.
    let (lam, mut seg) = if demand_at_zero <= free {
        (0.0, (0..n).map(|i| hulls.positive(i)).collect::<Vec<_>>())
    } else {
        search(hulls, free)
    };
    let mut k: Vec<u64> = (0..n).map(|i| hulls.get(i).k(seg[i])).collect();
    let taken = (0..n).map(|i| k[i] - k0(i)).sum::<u64>();
    // Slopes equal to within rounding can put the search's count one segment past the
    // capacity (found by `control`'s property test); the heap decides such cases exactly.
    let Some(mut left) = free.checked_sub(taken) else {
        return heap(hulls, free);
    };
    let mut mid = None;
    if lam > 0.0 {
        for i in 0..n {
            if left == 0 {
                break;
            }
            let h = hulls.get(i);
            // (Rounding can leave two consecutive segments of one hull at equal slope.)
            while left > 0 && seg[i] + 1 < h.len() && h.slope(seg[i]) == lam {
                let len = h.k(seg[i] + 1) - k[i];
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

/// λ* > 0 and, per tenant, the number of its segments steeper than λ*, given that
/// `demand(0) > free`.
fn search(hulls: &Hulls, free: u64) -> (f64, Vec<usize>) {
    let n = hulls.len();
    // Bracket (a, b): a = 0, b = +inf. lo[i]: segments with slope >= b; hi[i]: with
    // slope > a. The window is lo[i]..hi[i]; base = demand of the slopes >= b.
    let mut b = f64::INFINITY;
    let mut lo = vec![0usize; n];
    let mut hi: Vec<usize> = (0..n).map(|i| hulls.positive(i)).collect();
    let mut base: u64 = 0;
    let mut active: Vec<usize> = (0..n).filter(|&i| hi[i] > lo[i]).collect();
    let mut sample: Vec<(f64, u64)> = Vec::with_capacity(2 * SAMPLE + 2);
    let mut cnt: Vec<(usize, usize)> = Vec::with_capacity(active.len());
    let mut phase = 0x9E37_79B9_7F4A_7C15u64;
    let lam = loop {
        active.retain(|&i| hi[i] > lo[i]);
        let total: usize = active.iter().map(|&i| hi[i] - lo[i]).sum();
        if total == 0 {
            break b;
        }
        // Every m-th segment of the windows, from a varying phase; all of them when few.
        let m = if total <= GATHER {
            1
        } else {
            total.div_ceil(SAMPLE)
        };
        phase ^= phase << 13;
        phase ^= phase >> 7;
        phase ^= phase << 17;
        let mut next = (phase % m as u64) as usize; // window position of the next pick
        let mut at = 0; // window positions before this tenant's
        sample.clear();
        for &i in &active {
            let (h, w) = (hulls.get(i), hi[i] - lo[i]);
            while next < at + w {
                let j = lo[i] + next - at;
                sample.push((h.slope(j), h.k(j + 1) - h.k(j)));
                next += m;
            }
            at += w;
        }
        sample.sort_unstable_by(|x, y| y.0.total_cmp(&x.0));
        if m == 1 {
            // The whole window: walk it down in decreasing slope while the demand fits.
            // Every slope in it is < b, so `lam` starts at b (which fits).
            let mut lam = b;
            let mut d = base;
            let mut j = 0;
            while j < sample.len() {
                let s = sample[j].0;
                if d > free {
                    break;
                }
                // demand(s) = base + the lengths of the sampled slopes above s: it fits.
                lam = s;
                while j < sample.len() && sample[j].0 == s {
                    d = d.saturating_add(sample[j].1);
                    j += 1;
                }
            }
            break lam;
        }
        // Estimated demand at the j-th sample slope: base + m * (lengths before it).
        let mut d = base as f64;
        let mut cross = sample.len() - 1;
        for (j, &(_, len)) in sample.iter().enumerate() {
            if d > free as f64 {
                cross = j;
                break;
            }
            d += m as f64 * len as f64;
        }
        let margin = (sample.len() / 64).max(2);
        let p_hi = sample[cross.saturating_sub(margin + 1)].0;
        let p_lo = sample[(cross + margin).min(sample.len() - 1)].0;
        // Counts at both pivots in one pass over the active windows.
        cnt.clear();
        let (mut d_hi, mut d_lo) = (base, base);
        for &i in &active {
            let h = hulls.get(i);
            let c_hi = h.above(p_hi, lo[i], hi[i]);
            let c_lo = h.above_from(p_lo, c_hi, hi[i]);
            d_hi += h.k(c_hi) - h.k(lo[i]);
            d_lo += h.k(c_lo) - h.k(lo[i]);
            cnt.push((c_hi, c_lo));
        }
        if d_hi > free {
            // a = p_hi.
            for (&i, &(c_hi, _)) in active.iter().zip(&cnt) {
                hi[i] = c_hi;
            }
        } else if d_lo > free {
            // b = p_hi, a = p_lo.
            b = p_hi;
            base = move_b(hulls, &active, &cnt, |c| c.0, p_hi, &mut lo, base);
            for (&i, &(_, c_lo)) in active.iter().zip(&cnt) {
                hi[i] = c_lo;
            }
        } else {
            // b = p_lo.
            b = p_lo;
            base = move_b(hulls, &active, &cnt, |c| c.1, p_lo, &mut lo, base);
        }
    };
    // Segments steeper than λ*: the window ones above it (λ* < b), or, when λ* = b, the
    // ones before lo[i] less those of slope exactly b.
    let seg = (0..n)
        .map(|i| {
            let h = hulls.get(i);
            if lam < b {
                h.above(lam, lo[i], hi[i])
            } else {
                let mut j = lo[i];
                while j > 0 && h.slope(j - 1) == lam {
                    j -= 1;
                }
                j
            }
        })
        .collect();
    (lam, seg)
}

/// Moves the upper end of the bracket to `p` (whose demand fits): each active window now
/// starts after its slopes `>= p` (`pick` gives the count of those `> p`; ties follow).
/// Returns the new base demand.
fn move_b(
    hulls: &Hulls,
    active: &[usize],
    cnt: &[(usize, usize)],
    pick: impl Fn(&(usize, usize)) -> usize,
    p: f64,
    lo: &mut [usize],
    mut base: u64,
) -> u64 {
    for (&i, c) in active.iter().zip(cnt) {
        let h = hulls.get(i);
        let mut j = pick(c);
        while j + 1 < h.len() && h.slope(j) == p {
            j += 1;
        }
        base += h.k(j) - h.k(lo[i]);
        lo[i] = j;
    }
    base
}
