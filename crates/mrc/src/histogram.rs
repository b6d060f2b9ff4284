//! Histograms of reuse (stack) distances and the curves they give.
//!
//! A distance `d` (distinct keys since the previous access to the same key) means a hit in
//! an LRU cache of more than `d` blocks; a first access (`None`) is a cold miss at every
//! size. [`DistanceHistogram`] keeps exact per-distance counts up to [`LINEAR`] and
//! relative-width buckets above it (512 per power of two, 0.1–0.2 % wide, so a few
//! thousand buckets cover any distance): exact for the curve at the small sizes where
//! single blocks matter, and bounded memory for sampled, scaled distances, which can be as
//! large as the footprint.

use crate::curve::{CurvePoint, HitRatioCurve};

/// Distances below this are counted one bucket each.
pub const LINEAR: u64 = 1 << 16;
/// Above [`LINEAR`], each power of two is split into `2^SUB_BITS` equal buckets, so a
/// bucket is 0.1–0.2 % of its distances wide.
const SUB_BITS: u32 = 9;
const LINEAR_BITS: u32 = LINEAR.trailing_zeros();

/// The bucket of distance `d`: the distance itself below [`LINEAR`], above it the power of
/// two and the next [`SUB_BITS`] bits (integer work only; a logarithm here cost the exact
/// method a tenth of its time).
#[inline]
fn bucket_of(d: u64) -> usize {
    if d < LINEAR {
        d as usize
    } else {
        let e = 63 - d.leading_zeros();
        let sub = (d >> (e - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1);
        LINEAR as usize + (((e - LINEAR_BITS) as usize) << SUB_BITS) + sub
    }
}

/// Smallest distance in bucket `b`.
fn lower(b: usize) -> f64 {
    if (b as u64) < LINEAR {
        b as f64
    } else {
        let i = b - LINEAR as usize;
        let e = LINEAR_BITS + (i >> SUB_BITS) as u32;
        let sub = (i & ((1 << SUB_BITS) - 1)) as u64;
        (((1u64 << SUB_BITS) + sub) as f64) * 2f64.powi((e - SUB_BITS) as i32)
    }
}

/// Weighted counts of distances.
#[derive(Clone, Debug, Default)]
pub struct DistanceHistogram {
    buckets: Vec<f64>,
    cold: f64,
    total: f64,
}

impl DistanceHistogram {
    /// Adds `weight` accesses at distance `d` (`None`: cold miss).
    #[inline]
    pub fn record(&mut self, d: Option<u64>, weight: f64) {
        self.total += weight;
        match d {
            None => self.cold += weight,
            Some(d) => {
                let b = bucket_of(d);
                if b >= self.buckets.len() {
                    // Grow in 4 Ki steps: the bucket count is bounded (2^16 exact ones plus
                    // a few thousand wide ones), so doubling would only waste memory.
                    self.buckets.resize((b + 1).next_multiple_of(4096), 0.0);
                }
                self.buckets[b] += weight;
            }
        }
    }

    /// Starts loading the bucket [`DistanceHistogram::record`] of `d` adds to, when it
    /// exists; changes nothing.
    #[inline]
    pub fn prefetch(&self, d: Option<u64>) {
        if let Some(d) = d {
            policy::prefetch::prefetch_at(&self.buckets, bucket_of(d));
        }
    }

    /// Total weight recorded.
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Weight of cold misses.
    pub fn cold(&self) -> f64 {
        self.cold
    }

    /// Adds `weight` at distance 0 (hits at every size): SHARDS's count correction.
    pub fn adjust_first(&mut self, weight: f64) {
        if self.buckets.is_empty() {
            self.buckets.push(0.0);
        }
        self.buckets[0] += weight;
        self.total += weight;
    }

    /// Adds `weight` to the cold misses (SHARDS's cold-miss correction).
    pub fn adjust_cold(&mut self, weight: f64) {
        self.cold += weight;
        self.total += weight;
    }

    /// Multiplies every count by `f` (decay of a windowed profile).
    pub fn scale(&mut self, f: f64) {
        for b in &mut self.buckets {
            *b *= f;
        }
        self.cold *= f;
        self.total *= f;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &DistanceHistogram) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0.0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.cold += other.cold;
        self.total += other.total;
    }

    /// Buckets allocated.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * 8
    }

    /// Largest distance recorded plus one: beyond it the curve is flat.
    pub fn span(&self) -> u64 {
        match self.buckets.iter().rposition(|&w| w != 0.0) {
            Some(b) => lower(b + 1).ceil() as u64,
            None => 0,
        }
    }

    /// Miss ratios at the given sizes (increasing), in one sweep: the weight at distances
    /// `>= size` plus cold misses, over the total. Inside a wide bucket the weight is
    /// taken as spread evenly. An empty histogram gives 0 everywhere (no access missed).
    pub fn miss_ratios(&self, sizes: &[u64]) -> Vec<f64> {
        let buckets = &self.buckets;
        miss_ratios_of(buckets.len(), |b| buckets[b], self.total, sizes)
    }

    /// The curve at `sizes` (sizes must increase; 0 is added if missing).
    pub fn curve(&self, sizes: &[u64]) -> HitRatioCurve {
        let buckets = &self.buckets;
        curve_of(sizes, |s| {
            miss_ratios_of(buckets.len(), |b| buckets[b], self.total, s)
        })
    }

    /// The curve at `sizes` of this histogram and `other` added together, with weight at
    /// distance 0 added (or taken) to bring their total to `total`: exactly what a clone
    /// of `self`, [`DistanceHistogram::merge`]d with `other`, then
    /// [`DistanceHistogram::adjust_first`]`(total - merged total)` would give, without
    /// copying or adding the buckets past the largest size (a windowed profile's curve
    /// each interval: two histograms of up to some 70,000 buckets each, read to the
    /// partition's reach).
    pub fn sum_curve(&self, other: &DistanceHistogram, total: f64, sizes: &[u64]) -> HitRatioCurve {
        let (a, b) = (&self.buckets, &other.buckets);
        let merged_total = self.total + other.total;
        let adjust = total - merged_total;
        let total = merged_total + adjust;
        let len = a.len().max(b.len()).max(1);
        let bucket = |k: usize| {
            let w = match (a.get(k), b.get(k)) {
                (Some(&x), Some(&y)) => x + y,
                (Some(&x), None) => x,
                (None, Some(&y)) => 0.0 + y,
                (None, None) => 0.0,
            };
            if k == 0 {
                w + adjust
            } else {
                w
            }
        };
        curve_of(sizes, |s| miss_ratios_of(len, bucket, total, s))
    }
}

/// [`DistanceHistogram::miss_ratios`] of `len` buckets read by `bucket`, `total` weight.
fn miss_ratios_of(
    len: usize,
    bucket: impl Fn(usize) -> f64,
    total: f64,
    sizes: &[u64],
) -> Vec<f64> {
    if total <= 0.0 {
        return vec![0.0; sizes.len()];
    }
    // hits_below[b] = weight in buckets < b.
    let mut out = Vec::with_capacity(sizes.len());
    let mut b = 0usize;
    let mut below = 0.0f64;
    for &s in sizes {
        // In the exact region `lower(b + 1) = b + 1` (up to `LINEAR` itself), so the
        // buckets wholly below `s` there are those before index `s`: summed without
        // computing each bucket's bound.
        let exact_end = len
            .min(LINEAR as usize)
            .min(usize::try_from(s).unwrap_or(usize::MAX));
        while b < exact_end {
            below += bucket(b);
            b += 1;
        }
        let s = s as f64;
        while b < len && lower(b + 1) <= s {
            below += bucket(b);
            b += 1;
        }
        let mut hits = below;
        if b < len {
            let (lo, hi) = (lower(b), lower(b + 1));
            if s > lo {
                hits += bucket(b) * ((s - lo) / (hi - lo)).min(1.0);
            }
        }
        out.push((1.0 - hits / total).clamp(0.0, 1.0));
    }
    out
}

/// The curve at `sizes` (sorted and deduplicated here, 0 added if missing) from the miss
/// ratios `ratios` gives at the sorted sizes.
fn curve_of(sizes: &[u64], ratios: impl FnOnce(&[u64]) -> Vec<f64>) -> HitRatioCurve {
    let mut s: Vec<u64> = sizes.to_vec();
    s.sort_unstable();
    s.dedup();
    let m = ratios(&s);
    let mut pts: Vec<CurvePoint> = s
        .into_iter()
        .zip(m)
        .map(|(cache_size, miss_ratio)| CurvePoint {
            cache_size,
            miss_ratio,
        })
        .collect();
    if pts.first().is_none_or(|p| p.cache_size > 0) {
        pts.insert(
            0,
            CurvePoint {
                cache_size: 0,
                miss_ratio: 1.0,
            },
        );
    }
    // Rounding can leave a tiny rise; the true curve never rises with size.
    for i in 1..pts.len() {
        if pts[i].miss_ratio > pts[i - 1].miss_ratio {
            pts[i].miss_ratio = pts[i - 1].miss_ratio;
        }
    }
    HitRatioCurve::new(pts).expect("sizes increase and ratios lie in [0, 1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_below_linear() {
        let mut h = DistanceHistogram::default();
        for d in [None, None, Some(0), Some(2), Some(5)] {
            h.record(d, 1.0);
        }
        // Size 1: only d=0 hits. Size 3: d=0,2. Size 6: all three reuses.
        assert_eq!(
            h.miss_ratios(&[0, 1, 3, 6, 100]),
            vec![1.0, 0.8, 0.6, 0.4, 0.4]
        );
        assert_eq!(h.span(), 6);
    }

    #[test]
    fn buckets_tile_the_distances() {
        // Every distance lies in its bucket, and buckets follow each other without gaps.
        for d in (0..40).flat_map(|e| {
            [
                1u64 << e,
                (1u64 << e) + 1,
                (3u64 << e) / 2,
                (1u64 << (e + 1)) - 1,
            ]
        }) {
            let b = bucket_of(d);
            assert!(
                lower(b) <= d as f64 && (d as f64) < lower(b + 1),
                "distance {d}"
            );
            assert!(
                lower(b + 1) - lower(b) <= (d as f64 / 500.0).max(1.0),
                "distance {d}"
            );
        }
        assert_eq!((bucket_of(LINEAR - 1), bucket_of(LINEAR)), (65535, 65536));
        assert_eq!(lower(65536), 65536.0);
        assert_eq!(lower(65537), 65664.0);
    }

    #[test]
    fn wide_buckets_interpolate() {
        let mut h = DistanceHistogram::default();
        h.record(Some(1_000_000), 1.0);
        let m = h.miss_ratios(&[990_000, 2_000_000]);
        assert_eq!(m, vec![1.0, 0.0]);
    }
}
