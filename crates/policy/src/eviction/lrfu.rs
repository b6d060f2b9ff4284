//! LRFU (Lee et al., IEEE Trans. Computers 2001): a spectrum between LRU and LFU.
//!
//! Each block has a Combined Recency and Frequency value `CRF(t) = Σ F(t - t_i)` over its
//! past references `t_i`, with `F(x) = (1/2)^(λx)`; the block with the smallest CRF leaves.
//! λ → 0 gives LFU, λ = 1 gives LRU. Time is the policy's own access count.
//!
//! The paper updates `CRF_new = F(0) + F(t - t_last) · CRF_last` on each reference and keeps
//! a heap. Because `log2 CRF(t) = log2 CRF_last - λ t + λ t_last`, ordering blocks by the
//! time-independent key `log2 CRF_last + λ t_last` orders them by CRF at any time: one
//! ordered set, O(log n) per event, no reheapification as time passes.
//!
//! Shines where both recency and frequency matter (database buffer pools, λ around
//! 0.001–0.01); costs a log-time update per hit, and like LFU it has no memory of evicted
//! blocks (the paper's history is optional; we keep none). Parameter `lambda` in `[0, 1]`,
//! default 0.001.

use crate::params::Params;
use crate::policy::{BlockHistory, EvictionPolicy, Key, Slot};
use crate::PolicyError;
use std::collections::BTreeSet;

/// Least recently/frequently used.
#[derive(Debug)]
pub struct Lrfu {
    lambda: f64,
    order: BTreeSet<(u64, Slot)>,
    /// Per slot: `(log2 CRF at last reference, time of last reference)`.
    meta: Vec<(f64, u64)>,
    now: u64,
}

impl Lrfu {
    /// Builds from `lambda=X` (default 0.001).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let lambda = p.f64_in("lambda", 0.001, 0.0, 1.0)?;
        p.finish()?;
        Ok(Lrfu {
            lambda,
            order: BTreeSet::new(),
            meta: Vec::new(),
            now: 0,
        })
    }

    /// The ordering key: non-negative, so its bits order like the number.
    fn key(&self, log_crf: f64, t: u64) -> u64 {
        (log_crf + self.lambda * t as f64).to_bits()
    }

    fn entry(&self, slot: Slot) -> (u64, Slot) {
        let (c, t) = self.meta[slot as usize];
        (self.key(c, t), slot)
    }
}

impl EvictionPolicy for Lrfu {
    fn name(&self) -> String {
        format!("lrfu(lambda={})", self.lambda)
    }
    fn set_capacity(&mut self, _capacity: usize) {}
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let old = self.entry(slot);
        self.order.remove(&old);
        self.now += 1;
        let (c, t) = self.meta[slot as usize];
        // CRF_new = 1 + 2^(-λ Δt) · CRF_last, in log2 form.
        let decayed = c - self.lambda * (self.now - t) as f64;
        let log_crf = (1.0 + decayed.exp2()).log2();
        self.meta[slot as usize] = (log_crf, self.now);
        let e = self.entry(slot);
        self.order.insert(e);
    }
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.meta.len() <= i {
            self.meta.resize(i + 1, (0.0, 0));
        }
        self.now += 1;
        self.meta[i] = (0.0, self.now);
        let e = self.entry(slot);
        self.order.insert(e);
    }
    fn evict(&mut self) -> Slot {
        self.order
            .pop_first()
            .expect("evict called on an empty LRFU")
            .1
    }
    /// A switched-in block starts with the CRF of `1 + hits` references at its turn in the
    /// replay (an upper bound of its true CRF: the references' ages are not remembered).
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.on_insert(slot, key);
        let e = self.entry(slot);
        self.order.remove(&e);
        self.meta[slot as usize].0 = (1.0 + h.hits as f64).log2();
        let e = self.entry(slot);
        self.order.insert(e);
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        let e = self.entry(slot);
        self.order.remove(&e);
    }
}

#[cfg(test)]
mod tests {
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
        assert_ne!(miss_count("lru", 3, &seq), miss_count("lfu", 3, &seq));
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
