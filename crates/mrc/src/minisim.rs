//! Scaled-down simulation (miniSim; Waldspurger, Saemundsson, Ahmad and Park, ATC'17):
//! hit-ratio curves for policies other than LRU, which have no stack property.
//!
//! The trace is spatially sampled at rate `R` with the SHARDS hash, and for each size `S`
//! a cache of `max(1, round(S·R))` blocks runs the real policy (the `policy` crate's code,
//! unchanged) on the sampled accesses; its miss ratio estimates the full-size cache's. One
//! pass feeds every mini-cache, so `n` sizes cost `n` small caches and one read of the
//! trace. Mini-caches below a few dozen blocks get noisy; the paper and our tests use
//! rates that keep the smallest one above that.

use crate::shards::{sample_hash, MODULUS};
use policy::{build, BlockCache, PolicyError};

/// Many scaled-down caches of one policy fed by one sampled stream.
pub struct MiniSim {
    threshold: u64,
    rate: f64,
    sizes: Vec<u64>,
    caches: Vec<BlockCache>,
    misses: Vec<f64>,
    sampled: u64,
    accesses: u64,
    weight: f64,
}

impl MiniSim {
    /// Caches emulating `sizes` (full-scale blocks) of policy `spec` at sampling `rate`.
    pub fn new(spec: &str, rate: f64, sizes: &[u64]) -> Result<Self, PolicyError> {
        let threshold = ((rate * MODULUS as f64).round() as u64).clamp(1, MODULUS);
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
        self.accesses += 1;
        self.weight += weight;
        if sample_hash(key) >= self.threshold {
            return;
        }
        self.sampled += 1;
        for (c, m) in self.caches.iter_mut().zip(self.misses.iter_mut()) {
            if !c.access(key, |_, _| {}).is_hit() {
                *m += weight;
            }
        }
    }

    /// `(size, miss ratio)` per emulated size; a stream with no sampled access gives 0.
    ///
    /// With SHARDS's count correction: the misses are divided by the accesses the sample
    /// should have had (`accesses × R`), not the ones it had. The difference comes mostly
    /// from the few hottest keys falling in or out of the sample, and those accesses are
    /// hits, so this removes most of the bias a small sample of a skewed trace has.
    pub fn miss_ratios(&self) -> Vec<(u64, f64)> {
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
