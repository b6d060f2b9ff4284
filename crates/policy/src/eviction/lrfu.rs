//! LRFU (Lee, Choi, Kim, Noh, Min, Cho & Kim, "LRFU: A spectrum of policies that
//! subsumes the least recently used and least frequently used policies", IEEE Trans.
//! Computers 50(12), 2001): a spectrum between LRU and LFU.
//!
//! Each block has a Combined Recency and Frequency value `CRF(t) = Σ F(t - t_i)` over its
//! past references `t_i`, with `F(x) = (1/2)^(λx)`; the block with the smallest CRF leaves.
//! λ = 0 is LFU (CRF counts references; ties go to the least recently referenced, which is
//! libCacheSim's LFU order) and λ = 1 is LRU (a reference outweighs all older ones
//! together); both limits are checked against our LRU and LFU on the shared trace. Time is
//! the policy's own count of references (hits and insertions).
//!
//! The paper updates `CRF_new = F(0) + F(t - t_last) · CRF_last` on each reference and
//! keeps a heap. Because `log2 CRF(t) = log2 CRF_last - λ (t - t_last)`, ordering blocks by
//! the time-independent key `log2 CRF_last + λ t_last` orders them by CRF at any time, so
//! the heap never needs reordering as time passes: an indexed 4-ary heap
//! ([`SlotHeap`]) keyed by it, O(log n) per event and no allocation. A hit only raises a
//! block's key, so it sifts down. Working in log2 keeps CRF values (which grow without
//! bound as λ → 0 and shrink as `2^(-λ t)`) in range for any trace length.
//!
//! Parameter `lambda` in `[0, 1]`, default 0.001: a reference's weight halves every
//! `1/λ` = 1000 references, so the policy is mostly frequency-driven within a window of a
//! few thousand references and recency-driven beyond; the paper's experiments put the best
//! λ for its traces in the small range (about 10^-4 to 10^-2), and small values are also
//! where LRFU differs most from plain LRU. Tune per workload, and relative to the cache:
//! a block at the LRU end was last referenced roughly `capacity` references ago, so once
//! `capacity ≫ 1/λ` the decay has erased frequency there and LRFU behaves as LRU. On the
//! shared cloudPhysics trace (miss ratio at 100 / 1,000 / 5,000 / 10,000 / 20,000 blocks):
//!
//! | policy           | 100    | 1,000  | 5,000  | 10,000 | 20,000 |
//! |------------------|--------|--------|--------|--------|--------|
//! | LRU (= λ 1)      | 0.8801 | 0.8327 | 0.8038 | 0.6976 | 0.6328 |
//! | λ = 0.01         | 0.8772 | 0.8327 | 0.8038 | 0.6976 | 0.6328 |
//! | λ = 0.001        | 0.8769 | 0.8304 | 0.8033 | 0.7005 | 0.6328 |
//! | λ = 0.0001       | 0.8783 | 0.8258 | 0.8021 | 0.7427 | 0.6214 |
//! | LFU (= λ 0)      | 0.8867 | 0.8392 | 0.7886 | 0.7118 | 0.5658 |
//!
//! Shines where both recency and frequency matter (database buffer pools, file-system
//! caches with a stable hot set and scans); costs a log-time update per hit, one `exp2` and
//! one `ln_1p` per hit, and like LFU it has no memory of evicted blocks (the paper's
//! bounded history of non-resident blocks is optional; we keep none).

use crate::heap::SlotHeap;
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// Least recently/frequently used.
#[derive(Debug)]
pub struct Lrfu {
    lambda: f64,
    /// Keyed by `(bits of log2 CRF_last + λ t_last, t_last)`: the CRF order, ties (which
    /// only rounding makes) to the least recently referenced.
    heap: SlotHeap<(u64, u64)>,
    /// Per slot: `(log2 CRF at last reference, time of last reference)`.
    meta: Vec<(f64, u64)>,
    now: u64,
}

impl Lrfu {
    /// Builds from `lambda=X` (in `[0, 1]`, default 0.001).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let lambda = p.f64_in("lambda", 0.001, 0.0, 1.0)?;
        p.finish()?;
        Ok(Lrfu {
            lambda,
            heap: SlotHeap::default(),
            meta: Vec::new(),
            now: 0,
        })
    }

    /// The heap key: `log2 CRF + λ t` is non-negative, so its bits order like the number.
    #[inline]
    fn key(&self, log_crf: f64, t: u64) -> (u64, u64) {
        ((log_crf + self.lambda * t as f64).to_bits(), t)
    }

    /// `CRF(now)` of a resident slot, for tests and reports.
    pub fn crf(&self, slot: Slot) -> f64 {
        let (c, t) = self.meta[slot as usize];
        (c - self.lambda * (self.now - t) as f64).exp2()
    }
}

impl EvictionPolicy for Lrfu {
    fn name(&self) -> String {
        format!("lrfu(lambda={})", self.lambda)
    }
    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.heap.reserve(capacity.min(1 << 24));
    }
    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        self.now += 1;
        let (c, t) = self.meta[slot as usize];
        // CRF_new = F(0) + F(Δt) · CRF_last = 1 + 2^(log2 CRF_last - λ Δt), in log2 form.
        let decayed = c - self.lambda * (self.now - t) as f64;
        let log_crf = decayed.exp2().ln_1p() * std::f64::consts::LOG2_E;
        self.meta[slot as usize] = (log_crf, self.now);
        let k = self.key(log_crf, self.now);
        self.heap.update(slot, k);
    }
    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.meta.len() <= i {
            self.meta.resize((i + 1).max(self.meta.len() * 2), (0.0, 0));
        }
        self.now += 1;
        self.meta[i] = (0.0, self.now);
        let k = self.key(0.0, self.now);
        self.heap.push(slot, k);
    }
    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        self.heap.pop().expect("evict called on an empty LRFU").1
    }
    /// A switched-in block starts with the CRF of `1 + hits` references at its turn in the
    /// replay (an upper bound of its true CRF: the references' ages are not remembered).
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.on_insert(slot, key);
        let log_crf = (1.0 + h.hits as f64).log2();
        self.meta[slot as usize].0 = log_crf;
        let k = self.key(log_crf, self.now);
        self.heap.update(slot, k);
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        self.heap.remove(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::Lrfu;
    use crate::params::Params;
    use crate::policy::EvictionPolicy;
    use crate::testkit::NoDir;
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn lambda_one_is_lru_and_small_lambda_is_lfu() {
        let seq = [1, 1, 1, 2, 3, 4, 1, 2, 5, 1, 3, 4, 2];
        assert_eq!(
            miss_count("lrfu:lambda=1", 3, &seq),
            miss_count("lru", 3, &seq)
        );
        assert_eq!(
            miss_count("lrfu:lambda=0.00001", 3, &seq),
            miss_count("lfu", 3, &seq)
        );
        assert_eq!(
            miss_count("lrfu:lambda=0", 3, &seq),
            miss_count("lfu", 3, &seq)
        );
        assert_ne!(miss_count("lru", 3, &seq), miss_count("lfu", 3, &seq));
    }

    #[test]
    fn between_lru_and_lfu() {
        // λ = 0.5. 1 1 2, then 3: CRF(1) = (1 + 2^-0.5) · 2^-1 = 0.854 beats CRF(2) =
        // 2^-0.5 = 0.707, so 2 leaves (LRU would evict 1) and the last 1 hits.
        let a = [1, 1, 2, 3, 1];
        assert_eq!(miss_count("lrfu:lambda=0.5", 2, &a), 3);
        assert_eq!(miss_count("lru", 2, &a), 4);
        // 1 1 1, then 2 2, then 3: CRF(1) = 2.207 · 2^-1 = 1.104 < CRF(2) = 1.707, so 1
        // leaves although it has more references (LFU would evict 2) and the last 2 hits.
        let b = [1, 1, 1, 2, 2, 3, 2];
        assert_eq!(miss_count("lrfu:lambda=0.5", 2, &b), 3);
        assert_eq!(miss_count("lfu", 2, &b), 4);
    }

    #[test]
    fn crf_follows_the_paper() {
        let s = 0;
        let mut p = Lrfu::from_params(&Params::parse("lrfu", "lambda=0.5").unwrap()).unwrap();
        p.set_capacity(2, &mut NoDir::default().dir());
        p.on_insert(s, 1);
        p.on_hit(s, 1);
        p.on_hit(s, 1);
        // 1 + 2^-0.5 (1 + 2^-0.5) = 2.2071...
        let want = 1.0 + 0.5f64.sqrt() * (1.0 + 0.5f64.sqrt());
        assert!((p.crf(s) - want).abs() < 1e-12, "{}", p.crf(s));
        p.on_insert(s + 1, 2);
        // One step later the first block's CRF has decayed by 2^-0.5.
        assert!((p.crf(s) - want * 0.5f64.sqrt()).abs() < 1e-12);
        assert!((p.crf(s + 1) - 1.0).abs() < 1e-12);
        assert_eq!(p.evict(&mut NoDir::default().dir()), s + 1);
    }

    #[test]
    fn rejects_lambda_out_of_range() {
        assert!(crate::build("lrfu:lambda=2").is_err());
        assert!(crate::build("lrfu:lambda=x").is_err());
    }

    #[test]
    fn contract_holds() {
        pinned::contract("lrfu");
        pinned::contract("lrfu:lambda=0.5");
    }
}
