//! Fixed-size SHARDS ([`ShardsFixedSize`]): at most `s_max` sampled keys, the rate
//! lowered as the footprint grows (see the parent module's doc).

use super::sample::{sample_hash, SampledKeys, MODULUS};
use crate::distinct::DistinctCounter;
use crate::exact::ExactStack;
use crate::histogram::DistanceHistogram;
use std::collections::BinaryHeap;

/// SHARDS with at most `s_max` sampled keys.
pub struct ShardsFixedSize {
    s_max: usize,
    threshold: u64,
    heap: BinaryHeap<(u64, u64)>,
    stack: ExactStack,
    hist: DistanceHistogram,
    distinct: DistinctCounter,
    sample: SampledKeys,
    accesses: u64,
    /// Accesses recorded by `access` (weight 1 each), kept apart from `weight` so the
    /// per-access cost of request weighting is an integer increment.
    units: u64,
    weight: f64,
}

impl ShardsFixedSize {
    /// Keeps at most `s_max` (at least 1) sampled keys.
    pub fn new(s_max: usize) -> Self {
        ShardsFixedSize {
            s_max: s_max.max(1),
            threshold: MODULUS,
            // Grown as keys are sampled: an idle tenant's profiler holds none.
            heap: BinaryHeap::new(),
            stack: ExactStack::new(),
            hist: DistanceHistogram::default(),
            distinct: DistinctCounter::default(),
            sample: SampledKeys::default(),
            accesses: 0,
            units: 0,
            weight: 0.0,
        }
    }

    /// The current rate.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / MODULUS as f64
    }

    /// Records one access; returns its scaled distance and weight when sampled (for
    /// profilers that keep more than one histogram).
    #[inline]
    pub fn access(&mut self, key: u64) -> Option<(Option<u64>, f64)> {
        self.access_hashed(key, sample_hash(key))
    }

    /// Starts loading what [`ShardsFixedSize::access_hashed`] of a key with sampling hash
    /// `h` touches on every access (its distinct counter's register); changes nothing.
    #[inline]
    pub fn prefetch_hashed(&self, h: u64) {
        self.distinct.prefetch_hash(h);
    }

    /// Starts loading what the sampled work of `key` ([`ShardsFixedSize::sample_counted`])
    /// looks up first (its slot in the sample's last-access table); changes nothing.
    #[inline]
    pub fn prefetch_key(&self, key: u64) {
        self.stack.prefetch(key);
    }

    /// [`ShardsFixedSize::access`] for a caller that already has the key's
    /// [`sample_hash`] (one hash feeding several samplers, see
    /// [`crate::profiler::OnlineProfiler::record_hashed`]). `h` must be `sample_hash(key)`.
    #[inline]
    pub fn access_hashed(&mut self, key: u64, h: u64) -> Option<(Option<u64>, f64)> {
        debug_assert_eq!(h, sample_hash(key));
        if !self.count_hashed(h) {
            return None;
        }
        self.sampled(key, h, 1.0)
    }

    /// The first half of [`ShardsFixedSize::access_hashed`] for a caller that batches the
    /// sampled work: counts one access (weight 1) of a key with sampling hash `h` and
    /// returns whether the key is in the sample now. The caller then passes the key to
    /// [`ShardsFixedSize::sample_counted`], keys in the order they were counted, before it
    /// reads anything from this sampler; the result is that of `access_hashed` on each.
    #[inline]
    pub fn count_hashed(&mut self, h: u64) -> bool {
        self.accesses += 1;
        self.units += 1;
        self.distinct.add_hash(h);
        h < self.threshold
    }

    /// The second half of [`ShardsFixedSize::access_hashed`] (see
    /// [`ShardsFixedSize::count_hashed`]): the sampled work of a counted key, which a
    /// threshold lowered since it was counted may now leave out. `h` must be
    /// `sample_hash(key)`.
    #[inline]
    pub fn sample_counted(&mut self, key: u64, h: u64) -> Option<(Option<u64>, f64)> {
        let (d, w) = self.sample_counted_unrecorded(key, h)?;
        self.record_sampled(d, w);
        Some((d, w))
    }

    /// [`ShardsFixedSize::sample_counted`] that leaves the distance out of this sampler's
    /// histogram: the caller passes what it returns to [`ShardsFixedSize::record_sampled`]
    /// later, in the same order, before it reads anything from this sampler (a batch then
    /// computes its distances first and records them with their buckets loaded ahead).
    #[inline]
    pub fn sample_counted_unrecorded(&mut self, key: u64, h: u64) -> Option<(Option<u64>, f64)> {
        debug_assert_eq!(h, sample_hash(key));
        if h >= self.threshold {
            return None;
        }
        self.sampled_distance(key, h, 1.0)
    }

    /// Records a distance [`ShardsFixedSize::sample_counted_unrecorded`] returned.
    #[inline]
    pub fn record_sampled(&mut self, d: Option<u64>, weight: f64) {
        self.hist.record(d, weight);
    }

    /// Starts loading the histogram bucket [`ShardsFixedSize::record_sampled`] of `d`
    /// adds to; changes nothing.
    #[inline]
    pub fn prefetch_record(&self, d: Option<u64>) {
        self.hist.prefetch(d);
    }

    /// Records one access counting `weight` (bytes, for byte-weighted curves).
    #[inline]
    pub fn access_weighted(&mut self, key: u64, weight: f64) -> Option<(Option<u64>, f64)> {
        self.accesses += 1;
        self.weight += weight;
        let h = sample_hash(key);
        self.distinct.add_hash(h);
        if h >= self.threshold {
            return None;
        }
        self.sampled(key, h, weight)
    }

    /// The work of a sampled access (hash `h`), out of line so the sampled-out test
    /// inlines into the caller's loop.
    #[inline(never)]
    fn sampled(&mut self, key: u64, h: u64, weight: f64) -> Option<(Option<u64>, f64)> {
        let (scaled, w) = self.sampled_distance(key, h, weight)?;
        self.hist.record(scaled, w);
        Some((scaled, w))
    }

    /// [`ShardsFixedSize::sampled`] without recording into the histogram.
    #[inline(never)]
    fn sampled_distance(&mut self, key: u64, h: u64, weight: f64) -> Option<(Option<u64>, f64)> {
        if !self.stack.contains(key) {
            self.heap.push((h, key));
            if self.heap.len() > self.s_max {
                // Lower T to the largest hash and drop every key at or above it.
                let (hmax, _) = *self.heap.peek().expect("heap over s_max is not empty");
                self.threshold = hmax;
                while let Some(&(hk, k)) = self.heap.peek() {
                    if hk < hmax {
                        break;
                    }
                    self.heap.pop();
                    self.stack.forget(k);
                }
                if h >= self.threshold {
                    return None;
                }
            }
        }
        let d = self.stack.distance(key);
        let inv = 1.0 / self.rate();
        if d.is_none() {
            self.sample.new_key(inv);
        }
        let scaled = d.map(|d| (d as f64 * inv) as u64);
        Some((scaled, weight * inv))
    }

    /// The corrected histogram of the accesses so far.
    pub fn histogram(&self) -> DistanceHistogram {
        let total = self.weight + self.units as f64;
        // The sample's count of distinct keys is as good as its current size at the
        // current rate (older keys were counted at higher rates, with less error).
        self.sample.corrected(
            &self.hist,
            total,
            self.accesses,
            self.heap.len() as u64,
            self.rate(),
            &self.distinct,
        )
    }

    /// Keys in the sample.
    pub fn sampled_keys(&self) -> usize {
        self.heap.len()
    }

    /// Sizes of the structures: `(keys in the sample, heap capacity, time-axis length,
    /// histogram buckets)`; all bounded by `s_max` (the last by the distance range).
    pub fn structure_sizes(&self) -> (usize, usize, usize, usize) {
        (
            self.stack.unique() as usize,
            self.heap.capacity(),
            self.stack.time_capacity(),
            self.hist.buckets(),
        )
    }

    /// Accesses seen.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Bytes held: bounded by `s_max` (keys, heap, time axis) plus the histogram's few
    /// thousand buckets.
    pub fn memory_bytes(&self) -> usize {
        self.heap.capacity() * 16
            + self.stack.memory_bytes()
            + self.hist.memory_bytes()
            + self.distinct.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_size_ties_leave_together() {
        // Equal hashes cannot be forced through a bijective hash, so check the invariant
        // the tie rule keeps: every key in the sample hashes below the threshold, and the
        // stack tracks exactly the heap's keys.
        let mut sh = ShardsFixedSize::new(16);
        for i in 0..100_000u64 {
            sh.access((i * 2_654_435_761) % 7_919);
            assert!(sh.heap.iter().all(|&(h, _)| h < sh.threshold));
            assert_eq!(sh.heap.len() as u64, sh.stack.unique());
        }
    }

    #[test]
    fn fixed_size_memory_does_not_grow_with_the_trace() {
        // Same key distribution, a trace four times longer: structures no larger.
        let run = |n: u64| {
            let mut sh = ShardsFixedSize::new(512);
            let mut x = 1u64;
            for _ in 0..n {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                sh.access((x >> 33) % 200_000);
            }
            (sh.structure_sizes(), sh.memory_bytes())
        };
        let (short, short_bytes) = run(250_000);
        let (long, long_bytes) = run(1_000_000);
        assert_eq!(short.0, 512);
        assert_eq!(long.0, 512);
        assert!(long.1 <= 1024 && long.2 <= 1 << 16, "{long:?}");
        assert!(
            long_bytes <= short_bytes * 11 / 10,
            "{short_bytes} -> {long_bytes}"
        );
    }

    #[test]
    fn fixed_size_stays_within_s_max() {
        let mut sh = ShardsFixedSize::new(64);
        for i in 0..200_000u64 {
            sh.access(i % 50_000);
            assert!(sh.sampled_keys() <= 64);
        }
        // 50,000 keys, 64 kept: the rate fell to about 64/50,000.
        assert!(sh.rate() < 0.003 && sh.rate() > 0.0008, "{}", sh.rate());
    }
}
