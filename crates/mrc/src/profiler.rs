//! The online per-tenant profiler of the cache node and the simulator: fed one key at a
//! time, bounded memory, a curve on demand.
//!
//! * The long-run curve comes from fixed-size SHARDS (`s_max` keys).
//! * The windowed curve shows recent behaviour only: sampled distances also go into the
//!   current epoch's histogram; every `window` accesses the epochs rotate, and the
//!   windowed curve is the current plus the previous epoch, so a phase change is fully
//!   visible one to two windows after it happens.
//! * Phantom caches answer "what if this partition were X blocks" for a few sizes with the
//!   partition's own policy, by scaled-down simulation on a fixed-rate sample.

use crate::curve::HitRatioCurve;
use crate::histogram::DistanceHistogram;
use crate::minisim::MiniSim;
use crate::shards::ShardsFixedSize;
use policy::PolicyError;

/// Online hit-ratio profiler of one tenant or partition.
pub struct OnlineProfiler {
    shards: ShardsFixedSize,
    window: u64,
    current: DistanceHistogram,
    previous: DistanceHistogram,
    in_window: u64,
    previous_accesses: u64,
    phantoms: Option<MiniSim>,
}

impl OnlineProfiler {
    /// A profiler keeping at most `s_max` sampled keys, with windows of `window` accesses.
    pub fn new(s_max: usize, window: u64) -> Self {
        OnlineProfiler {
            shards: ShardsFixedSize::new(s_max),
            window: window.max(1),
            current: DistanceHistogram::default(),
            previous: DistanceHistogram::default(),
            in_window: 0,
            previous_accesses: 0,
            phantoms: None,
        }
    }

    /// Adds phantom caches of policy `spec` at `sizes`, sampled at `rate`.
    pub fn with_phantoms(
        mut self,
        spec: &str,
        rate: f64,
        sizes: &[u64],
    ) -> Result<Self, PolicyError> {
        self.phantoms = Some(MiniSim::new(spec, rate, sizes)?);
        Ok(self)
    }

    /// Records one access.
    #[inline]
    pub fn record(&mut self, key: u64) {
        if self.in_window == self.window {
            self.previous = std::mem::take(&mut self.current);
            self.previous_accesses = self.in_window;
            self.in_window = 0;
        }
        self.in_window += 1;
        if let Some((d, w)) = self.shards.access(key) {
            self.current.record(d, w);
        }
        if let Some(p) = self.phantoms.as_mut() {
            p.access(key);
        }
    }

    /// The curve of everything seen, at `sizes`.
    pub fn curve(&self, sizes: &[u64]) -> HitRatioCurve {
        self.shards.histogram().curve(sizes)
    }

    /// The curve of the last one to two windows, at `sizes`.
    pub fn windowed_curve(&self, sizes: &[u64]) -> HitRatioCurve {
        let mut h = self.previous.clone();
        h.merge(&self.current);
        h.adjust_first((self.previous_accesses + self.in_window) as f64 - h.total());
        h.curve(sizes)
    }

    /// Phantom caches' `(size, miss ratio)`, if configured.
    pub fn phantom_miss_ratios(&self) -> Option<Vec<(u64, f64)>> {
        self.phantoms.as_ref().map(MiniSim::miss_ratios)
    }

    /// Accesses seen.
    pub fn accesses(&self) -> u64 {
        self.shards.accesses()
    }

    /// Bytes held (bounded by `s_max`).
    pub fn memory_bytes(&self) -> usize {
        self.shards.memory_bytes() + self.current.memory_bytes() + self.previous.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_curve_follows_a_phase_change() {
        let mut p = OnlineProfiler::new(4096, 50_000);
        // Phase 1: a loop over 1,000 keys (fits in 1,000 blocks). Phase 2: a loop over
        // 20,000 fresh keys (misses at 1,000 blocks).
        for i in 0..200_000u64 {
            p.record(i % 1000);
        }
        let before = p.windowed_curve(&[2000]).miss_ratio(2000.0);
        for i in 0..100_000u64 {
            p.record(1_000_000 + i % 20_000);
        }
        let after = p.windowed_curve(&[2000]).miss_ratio(2000.0);
        let overall = p.curve(&[2000]).miss_ratio(2000.0);
        assert!(before < 0.05, "{before}");
        assert!(after > 0.9, "{after}");
        assert!(overall < after - 0.3, "{overall}");
    }
}
