//! The online per-tenant profiler of the cache node and the simulator: fed one key at a
//! time, bounded memory, a curve on demand.
//!
//! * The long-run curve comes from fixed-size SHARDS (`s_max` keys).
//! * The windowed curve shows recent behaviour only: sampled distances also go into the
//!   current epoch's histogram; every `window` accesses the epochs rotate, and the
//!   windowed curve is the current plus the previous epoch, so a phase change is fully
//!   visible one to two windows after it happens.
//! * [`PhantomCaches`] answer "what if this partition were X blocks" for a few sizes with
//!   the partition's own policy (ghost caches that hold keys, no data), by scaled-down
//!   simulation on a fixed-rate sample: each phantom of `X` blocks is a real policy cache
//!   of `max(1, round(X·R))` keys fed the sampled keys (miniSim, Waldspurger et al.,
//!   ATC'17). Their cost is one hash per access plus the sampled accesses' policy work.
//!
//! Both samplers batch their sampled accesses ([`PENDING`] at a time) and replay them in
//! order before any curve is read: a caller feeding keys between much other work (the
//! simulator) finds the samplers' tables warm for the whole batch instead of cold for
//! every sampled key, and the curves are exactly those of one access at a time.
//!
//! Memory: SHARDS fixed-size keeps at most `s_max` keys; each epoch histogram is bounded
//! by the distance range (exact buckets to 2^16, then 0.2 % wide); phantoms hold about
//! `R × Σ X` keys. None grows with the number of accesses.

use crate::curve::HitRatioCurve;
use crate::histogram::DistanceHistogram;
use crate::minisim::{MiniSim, PENDING};
pub use crate::shards::sample_hash;
use crate::shards::ShardsFixedSize;
use crate::MrcError;
use policy::PolicyError;

/// How many held sampled keys ahead a flush starts loading a key's table slot, so that
/// slot's cache miss overlaps with the work on the keys in between.
const FLUSH_AHEAD: usize = 8;

/// Keys the smallest phantom's mini-cache holds when [`PHANTOM_MAX_RATE`] allows: the
/// shared sampling rate of [`phantom_rates`] is this over the smallest size.
pub const PHANTOM_TARGET_KEYS: f64 = 128.0;
/// The highest shared sampling rate. Phantoms cost one policy-cache access per sampled key
/// and size, so the rate bounds their work per access fed at (sizes / 16) cache
/// accesses, whatever the sizes: without it a small partition (a few thousand blocks)
/// was sampled at nearly every access, and `n` candidate policies at six sizes cost `6n`
/// cache accesses for each one of the tenant's.
pub const PHANTOM_MAX_RATE: f64 = 1.0 / 16.0;
/// Keys below which no mini-cache falls while its size allows: a size whose mini-cache at
/// the shared rate would be smaller gets a rate of its own, this over its size.
pub const PHANTOM_FLOOR_KEYS: f64 = 32.0;
/// The lowest shared rate (huge partitions get mini-caches above the target).
pub const PHANTOM_MIN_RATE: f64 = 0.001;

/// The sampling rate of each phantom of `sizes` blocks: a shared rate,
/// [`PHANTOM_TARGET_KEYS`] over the smallest size within [[`PHANTOM_MIN_RATE`],
/// [`PHANTOM_MAX_RATE`]], raised for a size whose mini-cache would hold fewer than
/// [`PHANTOM_FLOOR_KEYS`] (at most 1). Large sizes all share one rate, so the mini-caches
/// keep the size ratios of the phantoms they stand for; only small partitions get more
/// samples at their small sizes, where a mini-cache of a few keys would be noise.
pub fn phantom_rates(sizes: &[u64]) -> Vec<f64> {
    let smallest = sizes.iter().copied().min().unwrap_or(1).max(1) as f64;
    let shared = (PHANTOM_TARGET_KEYS / smallest).clamp(PHANTOM_MIN_RATE, PHANTOM_MAX_RATE);
    sizes
        .iter()
        .map(|&s| (PHANTOM_FLOOR_KEYS / s.max(1) as f64).clamp(shared, 1.0))
        .collect()
}

/// Ghost caches of one policy at a few sizes, on a spatially sampled key stream.
pub struct PhantomCaches {
    sim: MiniSim,
}

impl PhantomCaches {
    /// Phantoms of `sizes` blocks each running policy `spec`, fed keys sampled at `rate`.
    /// A rate outside `(0, 1]`, no sizes, or an unknown policy is an error.
    pub fn new(spec: &str, rate: f64, sizes: &[u64]) -> Result<Self, MrcError> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(MrcError::BadParameter(format!(
                "sampling rate {rate} is not in (0, 1]"
            )));
        }
        if sizes.is_empty() {
            return Err(MrcError::BadParameter("no phantom sizes".into()));
        }
        let sim = MiniSim::new(spec, rate, sizes)
            .map_err(|e: PolicyError| MrcError::BadParameter(e.to_string()))?;
        Ok(PhantomCaches { sim })
    }

    /// Phantoms of `sizes` blocks each running policy `spec`, each sampled at its rate of
    /// [`phantom_rates`] (the profilers of the simulator and the cache node). No sizes or
    /// an unknown policy is an error.
    pub fn for_sizes(spec: &str, sizes: &[u64]) -> Result<Self, MrcError> {
        if sizes.is_empty() {
            return Err(MrcError::BadParameter("no phantom sizes".into()));
        }
        let sim = MiniSim::with_rates(spec, sizes, &phantom_rates(sizes))
            .map_err(|e: PolicyError| MrcError::BadParameter(e.to_string()))?;
        Ok(PhantomCaches { sim })
    }

    /// Expected policy-cache accesses per access recorded (the sum of the rates).
    pub fn work_per_access(&self) -> f64 {
        self.sim.work_per_access()
    }

    /// Records one access.
    #[inline]
    pub fn record(&mut self, key: u64) {
        self.sim.access(key)
    }

    /// Records one access whose [`sample_hash`] `h` the caller already computed (one hash
    /// per access for the profiler and every phantom set of a tenant).
    #[inline]
    pub fn record_hashed(&mut self, key: u64, h: u64) {
        self.sim.access_hashed(key, h, 1.0)
    }

    /// `(size, estimated miss ratio)` per phantom (0 before any sampled access).
    pub fn miss_ratios(&mut self) -> Vec<(u64, f64)> {
        self.sim.miss_ratios()
    }

    /// The phantoms' estimates as a curve (miss ratio 1 at size 0).
    pub fn curve(&mut self) -> HitRatioCurve {
        let mut pts = self.miss_ratios();
        pts.sort_by_key(|p| p.0);
        pts.dedup_by_key(|p| p.0);
        if pts.first().is_none_or(|p| p.0 > 0) {
            pts.insert(0, (0, 1.0));
        }
        HitRatioCurve::from_pairs(pts).expect("sizes increase and ratios lie in [0, 1]")
    }

    /// Sampled accesses so far.
    pub fn sampled(&self) -> u64 {
        self.sim.sampled()
    }
}

/// Sampled keys of a tenant's profiler on the node and in the simulator (bounded memory,
/// about 100 KiB): [`OnlineProfiler::tenant`].
pub const TENANT_SMAX: usize = 8192;

/// Accesses per window of a tenant's profiler on the node and in the simulator: the
/// windowed curve covers the last one to two windows. 200,000 accesses are a few seconds
/// of a busy tenant, about one enforcement interval, so a phase change shows in the curve
/// the control step reads within an interval or two; the simulator's experiments were
/// tuned with this window, so the node feeds `control` curves of the same memory.
pub const TENANT_WINDOW: u64 = 200_000;

/// Online hit-ratio profiler of one tenant or partition.
pub struct OnlineProfiler {
    shards: ShardsFixedSize,
    window: u64,
    current: DistanceHistogram,
    previous: DistanceHistogram,
    in_window: u64,
    previous_accesses: u64,
    phantoms: Option<PhantomCaches>,
    /// Sampled `(key, hash)` whose SHARDS work is not done yet (at most [`PENDING`]),
    /// all of the current window.
    pending: Vec<(u64, u64)>,
    /// The held keys' scaled distances and weights during a flush (kept for its buffer).
    distances: Vec<(Option<u64>, f64)>,
}

impl OnlineProfiler {
    /// A tenant's profiler: [`TENANT_SMAX`] sampled keys, windows of [`TENANT_WINDOW`].
    pub fn tenant() -> Self {
        Self::new(TENANT_SMAX, TENANT_WINDOW)
    }

    /// A profiler keeping at most `s_max` sampled keys, with windows of `window` accesses
    /// (both taken as at least 1).
    pub fn new(s_max: usize, window: u64) -> Self {
        OnlineProfiler {
            shards: ShardsFixedSize::new(s_max),
            window: window.max(1),
            current: DistanceHistogram::default(),
            previous: DistanceHistogram::default(),
            in_window: 0,
            previous_accesses: 0,
            phantoms: None,
            pending: Vec::with_capacity(PENDING),
            distances: Vec::with_capacity(PENDING),
        }
    }

    /// Adds phantom caches of policy `spec` at `sizes`, sampled at `rate`.
    pub fn with_phantoms(mut self, spec: &str, rate: f64, sizes: &[u64]) -> Result<Self, MrcError> {
        self.phantoms = Some(PhantomCaches::new(spec, rate, sizes)?);
        Ok(self)
    }

    /// Records one access.
    #[inline]
    pub fn record(&mut self, key: u64) {
        self.record_hashed(key, sample_hash(key))
    }

    /// Records one access whose [`sample_hash`] `h` the caller already computed, so one
    /// hash per access feeds this profiler and the tenant's [`PhantomCaches`] alike
    /// ([`PhantomCaches::record_hashed`]). `h` must be `sample_hash(key)`.
    #[inline]
    pub fn record_hashed(&mut self, key: u64, h: u64) {
        if self.in_window == self.window {
            self.flush();
            self.previous = std::mem::take(&mut self.current);
            self.previous_accesses = self.in_window;
            self.in_window = 0;
        }
        self.in_window += 1;
        if self.shards.count_hashed(h) {
            self.pending.push((key, h));
            if self.pending.len() >= PENDING {
                self.flush();
            }
        }
        if let Some(p) = self.phantoms.as_mut() {
            p.record_hashed(key, h);
        }
    }

    /// Does the SHARDS work of the held sampled accesses, in order (see the module docs).
    #[inline(never)]
    fn flush(&mut self) {
        // First every held key's stack work in order (its table slot loaded some keys
        // ahead), then the distances into both histograms in the same order, each
        // histogram's bucket loaded some distances ahead: the buckets are spread over
        // tables larger than the core's caches, and a distance is known only once its
        // stack work is done.
        let mut distances = std::mem::take(&mut self.distances);
        distances.clear();
        for (j, &(key, h)) in self.pending.iter().enumerate() {
            if let Some(&(ahead, _)) = self.pending.get(j + FLUSH_AHEAD) {
                self.shards.prefetch_key(ahead);
            }
            if let Some(dw) = self.shards.sample_counted_unrecorded(key, h) {
                distances.push(dw);
            }
        }
        for (j, &(d, w)) in distances.iter().enumerate() {
            if let Some(&(ahead, _)) = distances.get(j + FLUSH_AHEAD) {
                self.shards.prefetch_record(ahead);
                self.current.prefetch(ahead);
            }
            self.shards.record_sampled(d, w);
            self.current.record(d, w);
        }
        self.distances = distances;
        self.pending.clear();
    }

    /// Starts loading what [`OnlineProfiler::record_hashed`] with sampling hash `h` touches
    /// on every access (the SHARDS counter's register). Changes nothing; a caller that
    /// knows its keys some accesses early hides that load.
    #[inline]
    pub fn prefetch_hashed(&self, h: u64) {
        self.shards.prefetch_hashed(h);
    }

    /// The curve of everything seen, at `sizes`.
    pub fn curve(&mut self, sizes: &[u64]) -> HitRatioCurve {
        self.flush();
        self.shards.histogram().curve(sizes)
    }

    /// The curve of the last one to two windows, at `sizes`.
    pub fn windowed_curve(&mut self, sizes: &[u64]) -> HitRatioCurve {
        self.flush();
        let accesses = (self.previous_accesses + self.in_window) as f64;
        self.previous.sum_curve(&self.current, accesses, sizes)
    }

    /// Phantom caches' `(size, miss ratio)`, if configured.
    pub fn phantom_miss_ratios(&mut self) -> Option<Vec<(u64, f64)>> {
        self.phantoms.as_mut().map(PhantomCaches::miss_ratios)
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
        assert!(p.memory_bytes() < 4 << 20, "{}", p.memory_bytes());
    }

    #[test]
    fn batched_shards_work_equals_one_access_at_a_time() {
        // The profiler holds sampled keys and does their SHARDS work later; fed the same
        // keys one access at a time, SHARDS and the window histograms must agree exactly,
        // across window rotations and the sample's threshold falling.
        let sizes: Vec<u64> = (1..=40).map(|i| i * 500).collect();
        let mut p = OnlineProfiler::new(512, 7_777);
        let mut shards = ShardsFixedSize::new(512);
        let (mut current, mut previous) =
            (DistanceHistogram::default(), DistanceHistogram::default());
        let (mut in_window, mut previous_accesses) = (0u64, 0u64);
        let mut x = 5u64;
        for n in 0..200_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let k = if n < 100_000 { (x >> 33) % 20_000 } else { n };
            p.record(k);
            if in_window == 7_777 {
                previous = std::mem::take(&mut current);
                previous_accesses = in_window;
                in_window = 0;
            }
            in_window += 1;
            if let Some((d, w)) = shards.access(k) {
                current.record(d, w);
            }
            if n % 49_999 == 0 || n == 199_999 {
                let mut h = previous.clone();
                h.merge(&current);
                h.adjust_first((previous_accesses + in_window) as f64 - h.total());
                assert_eq!(p.windowed_curve(&sizes), h.curve(&sizes), "window at {n}");
                assert_eq!(p.curve(&sizes), shards.histogram().curve(&sizes), "at {n}");
            }
        }
        assert!(shards.rate() < 0.05, "{}", shards.rate());
    }

    #[test]
    fn phantom_rates_bound_the_work_and_floor_small_mini_caches() {
        // A large partition: one shared rate, the smallest mini-cache 128 keys.
        let big = [5120u64, 10240, 20480, 40960, 61440, 81920];
        assert!(phantom_rates(&big).iter().all(|&r| r == 128.0 / 5120.0));
        // A small one: the shared rate stops at 1/16, and only sizes whose mini-cache
        // would hold fewer than 32 keys get more.
        let small = [192u64, 384, 768, 1536, 2304, 3072];
        let r = phantom_rates(&small);
        let want = [32.0 / 192.0, 32.0 / 384.0, 0.0625, 0.0625, 0.0625, 0.0625];
        assert_eq!(r, want);
        let ph = PhantomCaches::for_sizes("arc", &small).unwrap();
        assert!((ph.work_per_access() - want.iter().sum::<f64>()).abs() < 1e-3);
        // It was 6 × 0.67 = 4 cache accesses per access at the old rate, 128 / 192.
        assert!(ph.work_per_access() < 0.55, "{}", ph.work_per_access());
        // Sizes below the floor are simulated whole.
        assert_eq!(phantom_rates(&[10, 20]), vec![1.0, 1.0]);
        // Huge partitions: the rate floor keeps mini-caches above the target.
        assert_eq!(phantom_rates(&[1 << 30]), vec![PHANTOM_MIN_RATE]);
    }

    #[test]
    fn small_partitions_phantoms_follow_full_size_caches() {
        // Skewed accesses over 6,000 keys; phantoms of a 3,072-block partition against
        // the real policy at full size.
        let sizes = [192u64, 384, 768, 1536, 2304, 3072];
        for policy in ["arc", "lirs", "s3fifo"] {
            let mut ph = PhantomCaches::for_sizes(policy, &sizes).unwrap();
            let mut full: Vec<policy::BlockCache> = sizes
                .iter()
                .map(|&s| policy::BlockCache::new(s as usize, policy::build(policy).unwrap()))
                .collect();
            let mut misses = [0u64; 6];
            let mut x = 99u64;
            let n = 400_000u64;
            for i in 0..n {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                let key = if i % 10 == 0 {
                    1_000_000 + i
                } else {
                    (6000.0 * u * u * u) as u64
                };
                ph.record(key);
                for (c, m) in full.iter_mut().zip(&mut misses) {
                    if !c.access(key, |_, _| {}).is_hit() {
                        *m += 1;
                    }
                }
            }
            for ((_, est), &m) in ph.miss_ratios().iter().zip(&misses) {
                let exact = m as f64 / n as f64;
                assert!((est - exact).abs() < 0.03, "{policy}: {est} vs {exact}");
            }
        }
    }

    #[test]
    fn phantoms_see_a_loop_fit_or_thrash() {
        // A loop over 10,000 keys: LRU hits everything once it fits and nothing below.
        let mut p = OnlineProfiler::new(1024, 10_000)
            .with_phantoms("lru", 0.1, &[5_000, 20_000])
            .unwrap();
        for i in 0..200_000u64 {
            p.record(i % 10_000);
        }
        let m = p.phantom_miss_ratios().unwrap();
        assert_eq!(m[0].0, 5_000);
        // All sampled accesses miss at 5,000; the ratio is over the accesses the sample
        // should have had (count correction), so it is the sampled share of keys / 0.1.
        assert!(m[0].1 > 0.9, "{m:?}");
        assert!(m[1].1 < 0.06, "{m:?}");
        assert!(PhantomCaches::new("lru", 0.0, &[10]).is_err());
        assert!(PhantomCaches::new("lru", 0.1, &[]).is_err());
        assert!(PhantomCaches::new("nope", 0.1, &[10]).is_err());
    }
}
