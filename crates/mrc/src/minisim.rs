//! Scaled-down simulation (miniSim; Waldspurger, Saemundsson, Ahmad and Park, ATC'17):
//! hit-ratio curves for policies other than LRU, which have no stack property.
//!
//! The trace is spatially sampled at rate `R` with the SHARDS hash, and for each size `S`
//! a cache of `max(1, round(S·R))` blocks runs the real policy (the `policy` crate's code,
//! unchanged) on the sampled accesses; its miss ratio estimates the full-size cache's. One
//! pass feeds every mini-cache, so `n` sizes cost `n` small caches and one read of the
//! trace. Mini-caches below a few dozen blocks get noisy; the paper and our tests use
//! rates that keep the smallest one above that.
//!
//! Sampled accesses are held in a short batch ([`PENDING`]) and replayed cache by cache:
//! between two sampled accesses the caller touches much else (the simulator, a whole
//! hierarchy), so one access at a time would find each mini-cache's tables cold, a wait for
//! memory per cache. A batch pays that once per cache and batch. Each cache still sees the
//! sampled keys in order, so the estimates are exactly those of one access at a time; the
//! readers ([`MiniSim::miss_ratios`]) replay what is held first.

use crate::shards::{sample_hash, threshold_for, MODULUS};
use policy::{build, BlockCache, PolicyError};

/// Sampled accesses held before they are replayed through the caches.
pub const PENDING: usize = 64;

/// Many scaled-down caches of one policy fed by one sampled stream.
pub struct MiniSim {
    threshold: u64,
    rate: f64,
    sizes: Vec<u64>,
    caches: Vec<BlockCache>,
    misses: Vec<f64>,
    /// Sampled `(key, weight)` not yet replayed (at most [`PENDING`]).
    pending: Vec<(u64, f64)>,
    sampled: u64,
    accesses: u64,
    weight: f64,
}

impl MiniSim {
    /// Caches emulating `sizes` (full-scale blocks) of policy `spec` at sampling `rate`.
    pub fn new(spec: &str, rate: f64, sizes: &[u64]) -> Result<Self, PolicyError> {
        let threshold = threshold_for(rate);
        let rate = threshold as f64 / MODULUS as f64;
        let caches = sizes
            .iter()
            .map(|&s| {
                Ok(BlockCache::new(
                    ((s as f64 * rate).round() as usize).max(1),
                    build(spec)?,
                ))
            })
            .collect::<Result<Vec<_>, PolicyError>>()?;
        Ok(MiniSim {
            threshold,
            rate,
            sizes: sizes.to_vec(),
            misses: vec![0.0; sizes.len()],
            caches,
            pending: Vec::with_capacity(PENDING),
            sampled: 0,
            accesses: 0,
            weight: 0.0,
        })
    }

    /// Records one access.
    #[inline]
    pub fn access(&mut self, key: u64) {
        self.access_weighted(key, 1.0)
    }

    /// Records one access counting `weight` (bytes, for byte-weighted curves).
    #[inline]
    pub fn access_weighted(&mut self, key: u64, weight: f64) {
        self.access_hashed(key, sample_hash(key), weight)
    }

    /// [`MiniSim::access_weighted`] for a caller that already has the key's
    /// [`sample_hash`] (`h`), so one hash serves every sampler of the stream. Only the
    /// counts and one compare are inline; a sampled access's cache work is out of line.
    #[inline]
    pub fn access_hashed(&mut self, key: u64, h: u64, weight: f64) {
        debug_assert_eq!(h, sample_hash(key));
        self.accesses += 1;
        self.weight += weight;
        if h >= self.threshold {
            return;
        }
        self.sampled += 1;
        self.pending.push((key, weight));
        if self.pending.len() >= PENDING {
            self.flush();
        }
    }

    /// The threshold on [`sample_hash`] below which a key is sampled.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// Replays the held sampled accesses through every cache, one cache at a time.
    #[inline(never)]
    pub fn flush(&mut self) {
        for (c, m) in self.caches.iter_mut().zip(self.misses.iter_mut()) {
            for &(key, weight) in &self.pending {
                if !c.access(key, |_, _| {}).is_hit() {
                    *m += weight;
                }
            }
        }
        self.pending.clear();
    }

    /// `(size, miss ratio)` per emulated size; a stream with no sampled access gives 0.
    ///
    /// With SHARDS's count correction: the misses are divided by the accesses the sample
    /// should have had (`accesses × R`), not the ones it had. The difference comes mostly
    /// from the few hottest keys falling in or out of the sample, and those accesses are
    /// hits, so this removes most of the bias a small sample of a skewed trace has.
    pub fn miss_ratios(&mut self) -> Vec<(u64, f64)> {
        self.flush();
        let expected = self.weight * self.rate;
        self.sizes
            .iter()
            .zip(&self.misses)
            .map(|(&s, &m)| {
                let r = if self.sampled == 0 || expected <= 0.0 {
                    0.0
                } else {
                    (m / expected).clamp(0.0, 1.0)
                };
                (s, r)
            })
            .collect()
    }

    /// The effective rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Sampled accesses.
    pub fn sampled(&self) -> u64 {
        self.sampled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::ExactStack;

    #[test]
    fn rate_one_lru_equals_exact() {
        let sizes = [1u64, 5, 50, 200];
        let mut m = MiniSim::new("lru", 1.0, &sizes).unwrap();
        let mut e = ExactStack::new();
        let mut x = 7u64;
        for _ in 0..50_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let k = (x >> 40) % 300;
            m.access(k);
            e.access(k);
        }
        let want = e.histogram.miss_ratios(&sizes);
        for ((_, got), want) in m.miss_ratios().into_iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
    }

    #[test]
    fn batched_replay_equals_one_access_at_a_time() {
        // Replaying after every access is the unbatched simulation; the batched one must
        // give exactly the same misses, whatever the policy and however many are held.
        for policy in ["lru", "arc", "lirs", "s3fifo"] {
            let sizes = [4000u64, 16_000, 64_000];
            let mut batched = MiniSim::new(policy, 0.02, &sizes).unwrap();
            let mut single = MiniSim::new(policy, 0.02, &sizes).unwrap();
            let mut x = 11u64;
            for n in 0..300_000u64 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let k = if n % 3 == 0 { n } else { (x >> 33) % 50_000 };
                batched.access(k);
                single.access(k);
                single.flush();
                if n == 123_457 {
                    assert_eq!(batched.miss_ratios(), single.miss_ratios(), "{policy}");
                }
            }
            assert!(batched.sampled() > 5000, "{}", batched.sampled());
            assert_eq!(batched.miss_ratios(), single.miss_ratios(), "{policy}");
        }
    }

    #[test]
    fn unknown_policy_and_empty_stream() {
        assert!(MiniSim::new("no-such-policy", 0.1, &[10]).is_err());
        let mut m = MiniSim::new("lru", 0.1, &[10, 20]).unwrap();
        assert_eq!(m.miss_ratios(), vec![(10, 0.0), (20, 0.0)]);
    }
}
