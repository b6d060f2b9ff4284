//! Fixed-rate SHARDS ([`ShardsFixedRate`]), with a floor on the sample's size and the
//! counter stack that places its distances (see the parent module's doc).

use super::sample::{salted_hash, threshold_for, SampledKeys, MODULUS, SALT};
use crate::counter_stack::CounterStack;
use crate::distinct::DistinctCounter;
use crate::exact::ExactStack;
use crate::histogram::DistanceHistogram;
use policy::keymap::KeyMap;
use std::collections::BinaryHeap;

/// The default floor on fixed-rate SHARDS's sample: below this many sampled keys the rate
/// stays higher than asked (see [`ShardsFixedRate::with_options`]).
pub const MIN_SAMPLE: usize = 16_384;

/// SHARDS at a fixed sampling rate, with a floor on the sample's size.
pub struct ShardsFixedRate {
    salt: u64,
    /// The threshold of the rate asked for.
    target: u64,
    /// The threshold in force: `target`, or higher while the sample is held at its floor.
    threshold: u64,
    rate: f64,
    /// The floor on sampled keys (0: none).
    min_keys: usize,
    /// Sampled keys by hash while `threshold` is above `target` (fixed-size SHARDS's
    /// priority queue); dropped once the asked rate is reached.
    heap: Option<BinaryHeap<(u64, u64)>>,
    stack: ExactStack,
    hist: DistanceHistogram,
    distinct: DistinctCounter,
    /// Distinct keys since any past access, to bound the sampled distances (below 1).
    counters: CounterStack,
    /// Each sampled key's last access time, in the counters' clock.
    last_access: KeyMap<u64>,
    sample: SampledKeys,
    accesses: u64,
    /// Accesses recorded by `access` (weight 1 each), kept apart from `weight` so the
    /// per-access cost of request weighting is an integer increment.
    units: u64,
    weight: f64,
}

impl ShardsFixedRate {
    /// Samples at `rate` in `(0, 1]` with the default floor of [`MIN_SAMPLE`] keys (a rate
    /// outside is clamped: [`crate::Method::validate`] refuses it first on the public path).
    pub fn new(rate: f64) -> Self {
        Self::with_options(rate, MIN_SAMPLE, SALT)
    }

    /// Like [`ShardsFixedRate::new`] with the hash salted by `salt` (another sample).
    pub fn with_salt(rate: f64, salt: u64) -> Self {
        Self::with_options(rate, MIN_SAMPLE, salt)
    }

    /// Samples at `rate`, but never holds fewer than `min_keys` keys while a higher rate
    /// can keep them: it starts at rate 1 and, like fixed-size SHARDS with `s_max =
    /// min_keys`, lowers the threshold to the largest sampled hash (dropping that key)
    /// each time the sample outgrows `min_keys`, until the threshold reaches `rate`'s;
    /// from there it is plain fixed-rate SHARDS. So a trace with fewer than `min_keys /
    /// rate` distinct keys is sampled at about `min_keys / footprint` instead of `rate`,
    /// and memory is the larger of `min_keys` and `rate × footprint` keys. `min_keys = 0`
    /// is the paper's fixed-rate SHARDS.
    pub fn with_options(rate: f64, min_keys: usize, salt: u64) -> Self {
        let target = threshold_for(rate);
        let held = min_keys > 0 && target < MODULUS;
        let threshold = if held { MODULUS } else { target };
        ShardsFixedRate {
            salt,
            target,
            threshold,
            rate: threshold as f64 / MODULUS as f64,
            min_keys,
            heap: held.then(|| BinaryHeap::with_capacity(min_keys + 1)),
            stack: ExactStack::new(),
            hist: DistanceHistogram::default(),
            distinct: DistinctCounter::default(),
            counters: CounterStack::default(),
            last_access: KeyMap::default(),
            sample: SampledKeys::default(),
            accesses: 0,
            units: 0,
            weight: 0.0,
        }
    }

    /// Records one access.
    #[inline]
    pub fn access(&mut self, key: u64) {
        self.accesses += 1;
        self.units += 1;
        let h = salted_hash(key, self.salt);
        self.distinct.add_hash(h);
        let now = self.counters.add_hash(h);
        if h >= self.threshold {
            return;
        }
        self.sampled(key, h, 1.0, now)
    }

    /// Records one access counting `weight` (bytes, for byte-weighted curves).
    #[inline]
    pub fn access_weighted(&mut self, key: u64, weight: f64) {
        self.accesses += 1;
        self.weight += weight;
        let h = salted_hash(key, self.salt);
        self.distinct.add_hash(h);
        let now = self.counters.add_hash(h);
        if h >= self.threshold {
            return;
        }
        self.sampled(key, h, weight, now)
    }

    /// The work of a sampled access (hash `h`) at time `now`, out of line so the
    /// sampled-out test inlines into the caller's loop.
    #[inline(never)]
    fn sampled(&mut self, key: u64, h: u64, weight: f64, now: u64) {
        if let Some(heap) = self.heap.as_mut() {
            if !self.stack.contains(key) {
                heap.push((h, key));
                if heap.len() > self.min_keys {
                    self.lower_threshold();
                    if h >= self.threshold {
                        return;
                    }
                }
            }
        }
        let d = self.stack.distance(key);
        let previous = self.last_access.insert(key, now);
        let inv = 1.0 / self.rate;
        if d.is_none() {
            self.sample.new_key(inv);
        }
        let scaled = d.map(|d| match previous {
            // Below rate 1 the counters count the stretch since the previous access from
            // the first epoch start after it, the sample counts only the gap before that
            // (its keys seen since the previous access but not since that start), and
            // the sum is clamped into what the counters allow. At rate 1 the sample is
            // exact.
            Some(previous) if self.rate < 1.0 => {
                let s = self.counters.stretch(previous);
                let gap = d.saturating_sub(s.tracked_since_low) as f64 * inv;
                (s.low + gap).clamp(s.low, s.high) as u64
            }
            _ => (d as f64 * inv) as u64,
        });
        self.counters.track(previous, now);
        self.hist.record(scaled, weight * inv);
    }

    /// The sample outgrew its floor: lowers the threshold to the largest sampled hash (or
    /// the asked rate's, if higher) and drops every key at or above it.
    #[cold]
    fn lower_threshold(&mut self) {
        let Some(heap) = self.heap.as_mut() else {
            return;
        };
        let largest = heap.peek().map_or(self.target, |&(h, _)| h);
        let t = largest.max(self.target);
        while let Some(&(h, k)) = heap.peek() {
            if h < t {
                break;
            }
            heap.pop();
            self.stack.forget(k);
            if let Some(previous) = self.last_access.remove(&k) {
                self.counters.untrack(previous);
            }
        }
        self.threshold = t;
        self.rate = t as f64 / MODULUS as f64;
        if t == self.target {
            self.heap = None;
        }
    }

    /// The corrected histogram of the accesses so far.
    pub fn histogram(&self) -> DistanceHistogram {
        let total = self.weight + self.units as f64;
        self.sample.corrected(
            &self.hist,
            total,
            self.accesses,
            self.stack.unique(),
            self.rate,
            &self.distinct,
        )
    }

    /// The rate in force: the asked rate, or higher while the sample is at its floor.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Keys in the sample.
    pub fn sampled_keys(&self) -> usize {
        self.stack.unique() as usize
    }

    /// Accesses seen.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.stack.memory_bytes()
            + self.hist.memory_bytes()
            + self.distinct.memory_bytes()
            + self.counters.memory_bytes()
            + self.last_access.capacity() * 16
            + self.heap.as_ref().map_or(0, |h| h.capacity() * 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_one_is_exact() {
        let keys: Vec<u64> = (0..20_000u64).map(|i| (i * i + 7 * i) % 997).collect();
        let mut ex = ExactStack::new();
        let mut sh = ShardsFixedRate::new(1.0);
        for &k in &keys {
            ex.access(k);
            sh.access(k);
        }
        let sizes = [1, 10, 100, 500, 1000];
        assert_eq!(
            ex.histogram.miss_ratios(&sizes),
            sh.histogram().miss_ratios(&sizes)
        );
    }

    #[test]
    fn cold_misses_come_from_the_distinct_count() {
        // 40,000 keys, each read 1 to 4 times: at rate 0.01 only ~400 keys are sampled, so
        // the sample alone misjudges the distinct keys by a few percent; the curve's
        // right end (cold misses over accesses) must come out within 1 % of the truth.
        let keys: Vec<u64> = (0..40_000u64)
            .flat_map(|k| std::iter::repeat_n(k, 1 + (k % 4) as usize))
            .collect();
        let truth = 40_000.0 / keys.len() as f64;
        for salt in 0..5u64 {
            let mut sh = ShardsFixedRate::with_options(0.01, 0, salt);
            keys.iter().for_each(|&k| sh.access(k));
            let end = sh.histogram().miss_ratios(&[1 << 30])[0];
            assert!(
                (end - truth).abs() <= 0.01 * truth,
                "salt {salt}: {end} vs {truth}"
            );
        }
        // Rate 1 keeps the sample's exact count.
        let mut sh = ShardsFixedRate::new(1.0);
        keys.iter().for_each(|&k| sh.access(k));
        assert_eq!(sh.histogram().cold(), 40_000.0);
    }

    #[test]
    fn a_sample_with_too_many_keys_has_its_hits_scaled_too() {
        // Four passes over 50,000 keys: every key is a cold miss once and a hit at
        // distance 49,999 three times, so the exact curve is 1 below 50,000 blocks and
        // 0.25 above. A 1 % sample holds 500 ± 22 keys; rescaling only its cold misses
        // and putting the rest of the difference at distance 0 moved the curve below
        // 50,000 blocks by three quarters of that error (about ±0.03). Scaled as a whole
        // by the key-count ratio, the hits are right wherever the sample lands.
        four_passes_over_50_000_keys(&[25_000, 60_000, 1 << 30], &[1.0, 0.25, 0.25]);
    }

    /// Asserts plain fixed-rate SHARDS at rate 0.01 (no floor) gives miss ratios `want`
    /// (±0.01) at `sizes` for 8 salts on four passes over 50,000 keys.
    fn four_passes_over_50_000_keys(sizes: &[u64], want: &[f64]) {
        let keys: Vec<u64> = (0..4).flat_map(|_| 0..50_000u64).collect();
        for salt in 0..8u64 {
            let mut sh = ShardsFixedRate::with_options(0.01, 0, salt);
            keys.iter().for_each(|&k| sh.access(k));
            let got = sh.histogram().miss_ratios(sizes);
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() <= 0.01, "salt {salt}: {got:?} vs {want:?}");
            }
        }
    }

    #[test]
    fn the_counter_stack_puts_a_loop_where_it_is() {
        // Four passes over 50,000 keys: every reuse is at distance 49,999, so the exact
        // curve drops from 1 to 0.25 at 50,000 blocks. The sample alone places that step
        // at (sampled keys - 1) / R, off by its ±4.5 % share of keys; the counters know
        // the stretch between two passes to about 1 %, so the step lands within 3 %.
        four_passes_over_50_000_keys(&[48_500, 51_500], &[1.0, 0.25]);
    }

    #[test]
    fn the_floor_holds_the_sample_until_the_asked_rate() {
        // 20,000 keys at rate 0.01 with a floor of 1,000: the sample stays at 1,000 keys
        // and the rate at about 1,000 / 20,000; past 100,000 keys the asked rate takes
        // over and the sample grows as plain fixed-rate SHARDS's.
        let mut sh = ShardsFixedRate::with_options(0.01, 1000, SALT);
        for k in 0..20_000u64 {
            sh.access(k);
            sh.access(k / 2);
        }
        assert_eq!(sh.sampled_keys(), 1000);
        assert!(sh.rate() > 0.04 && sh.rate() < 0.06, "{}", sh.rate());
        assert!(sh.heap.as_ref().is_some_and(|h| h.len() == 1000));
        for k in 20_000..400_000u64 {
            sh.access(k);
        }
        assert_eq!(sh.rate(), threshold_for(0.01) as f64 / MODULUS as f64);
        assert!(sh.heap.is_none());
        let n = sh.sampled_keys();
        assert!((3_600..4_400).contains(&n), "{n}");
        assert_eq!(sh.last_access.len(), n);
        // The plain fixed rate from the start: a sample of 1 % of 400,000 keys.
        let mut plain = ShardsFixedRate::with_options(0.01, 0, SALT);
        (0..400_000u64).for_each(|k| plain.access(k));
        assert_eq!(plain.sampled_keys(), n);
    }

    #[test]
    fn the_floor_keeps_every_key_of_a_small_trace() {
        // Fewer keys than the floor: the rate never drops below 1, so the curve is exact.
        let keys: Vec<u64> = (0..30_000u64).map(|i| (i * i + 3 * i) % 5_003).collect();
        let mut ex = ExactStack::new();
        let mut sh = ShardsFixedRate::new(0.01);
        for &k in &keys {
            ex.access(k);
            sh.access(k);
        }
        assert_eq!(sh.rate(), 1.0);
        let sizes = [1, 10, 100, 1000, 4000, 6000];
        assert_eq!(
            ex.histogram.miss_ratios(&sizes),
            sh.histogram().miss_ratios(&sizes)
        );
    }
}
