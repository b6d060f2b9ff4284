//! Scaled-down simulation (miniSim; Waldspurger, Saemundsson, Ahmad and Park, ATC'17):
//! hit-ratio curves for policies other than LRU, which have no stack property.
//!
//! The trace is spatially sampled with the SHARDS hash, and for each size `S` sampled at
//! rate `R` a cache of `max(1, round(S·R))` blocks runs the real policy (the `policy`
//! crate's code, unchanged) on the sampled accesses; its miss ratio estimates the
//! full-size cache's. One pass feeds every mini-cache, so `n` sizes cost `n` small caches
//! and one read of the trace. The sizes may have rates of their own
//! ([`MiniSim::with_rates`]): all are thresholds on the same hash, so a key in a lower
//! rate's sample is in every higher rate's too and one test decides whether a key is
//! sampled at all. Mini-caches below a few dozen blocks get noisy; the paper and our tests
//! use rates that keep the smallest one above that.
//!
//! Sampled accesses are held in a short batch ([`PENDING`]) and replayed cache by cache:
//! between two sampled accesses the caller touches much else (the simulator, a whole
//! hierarchy), so one access at a time would find each mini-cache's tables cold, a wait for
//! memory per cache. A batch pays that once per cache and batch. Each cache still sees the
//! sampled keys in order, so the estimates are exactly those of one access at a time; the
//! readers ([`MiniSim::miss_ratios`]) replay what is held first.
//!
//! The mini-caches are built at the first replay, not at construction: a policy cache
//! reserves its whole capacity up front (directory, slots, ghost lists), and a node holds
//! phantoms for every tenant of every export whether it is busy or idle. An idle tenant's
//! phantoms so cost only their parameters; a busy one's what they would have cost anyway.

use crate::shards::{sample_hash, threshold_for, MODULUS};
use policy::dirmap::Hashed;
use policy::{build, BlockCache, PolicyError};

/// Sampled accesses held before they are replayed through the caches.
pub const PENDING: usize = 64;

/// How far ahead in the held keys [`MiniSim::flush`] starts loading a key's directory
/// bucket, ...
const BUCKET_AHEAD: usize = 8;
/// ... later, its slot's policy metadata ...
const SLOT_AHEAD: usize = 4;
/// ... and last the neighbours a hit or an eviction relinks.
const NEIGHBOURS_AHEAD: usize = 2;

/// Many scaled-down caches of one policy fed by one sampled stream.
pub struct MiniSim {
    /// The highest of the caches' thresholds: a key hashing at or above it is sampled by
    /// none.
    threshold: u64,
    /// Per cache: its sampling threshold and the rate it stands for.
    thresholds: Vec<u64>,
    rates: Vec<f64>,
    sizes: Vec<u64>,
    /// The policy the caches run (checked at construction).
    spec: String,
    /// Per size its mini-cache's blocks.
    capacities: Vec<usize>,
    /// The mini-caches: empty until the first replay ([`MiniSim::flush`]).
    caches: Vec<BlockCache>,
    misses: Vec<f64>,
    /// Sampled `(key, hash, weight)` not yet replayed (at most [`PENDING`]).
    pending: Vec<(Hashed, u64, f64)>,
    sampled: u64,
    accesses: u64,
    weight: f64,
}

impl MiniSim {
    /// Caches emulating `sizes` (full-scale blocks) of policy `spec`, all sampled at
    /// `rate`.
    pub fn new(spec: &str, rate: f64, sizes: &[u64]) -> Result<Self, PolicyError> {
        Self::with_rates(spec, sizes, &vec![rate; sizes.len()])
    }

    /// Caches emulating `sizes` of policy `spec`, the cache of `sizes[k]` sampled at
    /// `rates[k]` (a missing rate is the last one given, or 1).
    pub fn with_rates(spec: &str, sizes: &[u64], rates: &[f64]) -> Result<Self, PolicyError> {
        let thresholds: Vec<u64> = (0..sizes.len())
            .map(|k| threshold_for(rates.get(k).or(rates.last()).copied().unwrap_or(1.0)))
            .collect();
        let rates: Vec<f64> = thresholds
            .iter()
            .map(|&t| t as f64 / MODULUS as f64)
            .collect();
        // Checked now, built at the first replay (see the module doc).
        build(spec)?;
        let capacities = sizes
            .iter()
            .zip(&rates)
            .map(|(&s, &r)| ((s as f64 * r).round() as usize).max(1))
            .collect();
        Ok(MiniSim {
            threshold: thresholds.iter().copied().max().unwrap_or(0),
            thresholds,
            rates,
            sizes: sizes.to_vec(),
            spec: spec.to_string(),
            capacities,
            misses: vec![0.0; sizes.len()],
            caches: Vec::new(),
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
        // The directory hash is taken once here, not once per cache and prefetch stage.
        self.pending.push((Hashed::new(key), h, weight));
        if self.pending.len() >= PENDING {
            self.flush();
        }
    }

    /// The threshold on [`sample_hash`] below which a key is sampled (by some cache).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// Expected cache accesses per access fed: the sum of the caches' rates.
    pub fn work_per_access(&self) -> f64 {
        self.rates.iter().sum()
    }

    /// Replays the held sampled accesses through every cache, one cache at a time.
    #[inline(never)]
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.caches.is_empty() {
            // The spec was built once at construction, so this cannot fail; if it did,
            // the held accesses stay unreplayed rather than panic on the request path.
            let Ok(caches) = self
                .capacities
                .iter()
                .map(|&c| Ok(BlockCache::new(c, build(&self.spec)?)))
                .collect::<Result<Vec<_>, PolicyError>>()
            else {
                return;
            };
            self.caches = caches;
        }
        let caches = self.caches.iter_mut().zip(&mut self.misses);
        let pending = &self.pending;
        for ((c, m), &t) in caches.zip(&self.thresholds) {
            // Software pipelining, as the replay of a whole trace does: the directory
            // bucket of the key `BUCKET_AHEAD` places ahead, then (its bucket loaded by
            // then) the policy metadata of the one `SLOT_AHEAD` ahead, then the
            // neighbours of the one `NEIGHBOURS_AHEAD` ahead.
            for (j, &(key, h, weight)) in pending.iter().enumerate() {
                if let Some(&(ahead, ha, _)) = pending.get(j + BUCKET_AHEAD) {
                    if ha < t {
                        c.prefetch(ahead);
                    }
                }
                if let Some(&(ahead, ha, _)) = pending.get(j + SLOT_AHEAD) {
                    if ha < t {
                        c.prefetch_slot(ahead);
                    }
                }
                if let Some(&(ahead, ha, _)) = pending.get(j + NEIGHBOURS_AHEAD) {
                    if ha < t {
                        if let Some(slot) = c.prefetch_slot(ahead) {
                            c.prefetch_neighbours(slot);
                        }
                    }
                }
                if h < t && !c.access_hashed(key, |_, _| {}).is_hit() {
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
        self.sizes
            .iter()
            .zip(&self.misses)
            .zip(&self.rates)
            .map(|((&s, &m), &rate)| {
                let expected = self.weight * rate;
                let r = if self.sampled == 0 || expected <= 0.0 {
                    0.0
                } else {
                    (m / expected).clamp(0.0, 1.0)
                };
                (s, r)
            })
            .collect()
    }

    /// The highest of the caches' effective rates.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / MODULUS as f64
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
