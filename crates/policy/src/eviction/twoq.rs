//! 2Q, full version (Johnson and Shasha, "2Q: A Low Overhead High Performance Buffer
//! Management Replacement Algorithm", VLDB '94).
//!
//! Owns: A1in, a FIFO of resident blocks seen once; Am, an LRU of resident blocks seen again
//! after leaving A1in; A1out, a FIFO of keys recently evicted from A1in (ghosts, no data).
//!
//! ## Algorithm (for a cache of `c` blocks, `Kin = floor(kin * c)`, `Kout = floor(kout * c)`)
//! * hit in Am: move to Am's front; hit in A1in: nothing (correlated references are not
//!   evidence of reuse);
//! * miss on a key in A1out: drop the ghost, reclaim a slot, insert at Am's front;
//! * miss on another key: reclaim a slot, insert at A1in's front;
//! * reclaim (only when the cache is full): if `|A1in| > Kin`, evict A1in's oldest block
//!   and remember its key at A1out's front (forgetting A1out's oldest key when it holds
//!   `Kout`); otherwise evict Am's LRU block and forget it.
//!
//! ## Where it shines and where it fails
//! A block must be referenced again after it leaves A1in to reach Am, so scans and one-hit
//! wonders never displace Am: 2Q is scan-resistant at LRU's cost per hit. Its fixed `Kin`
//! and `Kout` are its weakness: a working set whose reuse distance exceeds A1in plus A1out
//! never reaches Am, and the tuning that suits one trace does not suit another (ARC adapts
//! the split instead). Hits in A1in are not counted, so short-term popularity is lost.
//!
//! ## Parameters and libCacheSim
//! `kin` (alias `ain-size-ratio`, default 0.25) and `kout` (alias `aout-size-ratio`, default
//! 0.5) are fractions of the capacity, the paper's recommended values and libCacheSim's
//! `TwoQ` defaults. Semantics match libCacheSim's `TwoQ` (truncating `Kin` and `Kout`, the
//! strict `|A1in| > Kin` test, no movement on A1in hits); the miss ratios on the
//! cloudPhysics trace are identical at every size tested. One documented difference:
//! libCacheSim admits nothing when `Kin` truncates to 0 (`c < 4` at the default), because it
//! refuses objects larger than A1in; here every missed block is inserted (eviction policies
//! do not decide admission), so tiny caches behave as an LRU over Am.

use crate::ghost::GhostFifo;
use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

const IN_A1IN: u8 = 0;
const IN_AM: u8 = 1;

/// 2Q with A1in, A1out and Am.
#[derive(Debug)]
pub struct TwoQ {
    kin_ratio: f64,
    kout_ratio: f64,
    kin: usize,
    kout: usize,
    links: Links,
    a1in: List,
    am: List,
    which: Vec<u8>,
    keys: Vec<Key>,
    a1out: GhostFifo<()>,
    /// The pending miss was a ghost hit in A1out.
    ghost_hit: bool,
}

impl TwoQ {
    /// A 2Q with A1in and A1out sized as fractions of the capacity.
    pub fn new(kin: f64, kout: f64) -> Self {
        TwoQ {
            kin_ratio: kin,
            kout_ratio: kout,
            kin: 0,
            kout: 0,
            links: Links::default(),
            a1in: List::default(),
            am: List::default(),
            which: Vec::new(),
            keys: Vec::new(),
            a1out: GhostFifo::default(),
            ghost_hit: false,
        }
    }

    /// Builds from `kin=<fraction>,kout=<fraction>` (libCacheSim's `Ain-size-ratio` and
    /// `Aout-size-ratio` are accepted too).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let kin = p.f64_first(&["kin", "ain-size-ratio"], 0.25, 0.0, 1.0)?;
        let kout = p.f64_first(&["kout", "aout-size-ratio"], 0.5, 0.0, 64.0)?;
        p.finish()?;
        Ok(Self::new(kin, kout))
    }

    /// Sizes of A1in, Am, A1out.
    pub fn sizes(&self) -> [usize; 3] {
        [self.a1in.len(), self.am.len(), self.a1out.len()]
    }
}

impl Default for TwoQ {
    fn default() -> Self {
        Self::new(0.25, 0.5)
    }
}

impl EvictionPolicy for TwoQ {
    fn name(&self) -> String {
        format!("2q(kin={},kout={})", self.kin_ratio, self.kout_ratio)
    }

    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.kin = (capacity as f64 * self.kin_ratio) as usize;
        self.kout = (capacity as f64 * self.kout_ratio) as usize;
        let n = capacity.min(1 << 24);
        self.links.reserve(n);
        if self.which.len() < n {
            self.which.resize(n, IN_A1IN);
            self.keys.resize(n, 0);
        }
        self.a1out.set_capacity(self.kout);
    }

    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        if self.which[slot as usize] == IN_AM {
            self.am.move_to_front(&mut self.links, slot);
        }
    }

    #[inline]
    fn on_miss(&mut self, key: Key, _ghost: Option<u32>) {
        self.ghost_hit = self.a1out.take(key).is_some();
    }

    #[inline]
    fn on_insert(&mut self, slot: Slot, key: Key) {
        let i = slot as usize;
        if self.which.len() <= i {
            let n = (i + 1).max(self.which.len() * 2);
            self.which.resize(n, IN_A1IN);
            self.keys.resize(n, 0);
        }
        self.keys[i] = key;
        if self.ghost_hit {
            self.which[i] = IN_AM;
            self.am.push_front(&mut self.links, slot);
        } else {
            self.which[i] = IN_A1IN;
            self.a1in.push_front(&mut self.links, slot);
        }
        self.ghost_hit = false;
    }

    /// A switched-in block that was hit since it entered goes to Am.
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.ghost_hit = h.hits > 0;
        self.on_insert(slot, key);
    }

    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        if self.a1in.len() > self.kin || (self.am.is_empty() && !self.a1in.is_empty()) {
            let slot = self.a1in.pop_back(&mut self.links).expect("non-empty A1in");
            self.a1out.remember(self.keys[slot as usize], ());
            slot
        } else {
            self.am
                .pop_back(&mut self.links)
                .expect("evict called on an empty 2Q")
        }
    }

    fn on_remove(&mut self, slot: Slot, _key: Key) {
        if self.which[slot as usize] == IN_AM {
            self.am.remove(&mut self.links, slot);
        } else {
            self.a1in.remove(&mut self.links, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{miss_count, pinned};
    use crate::BlockCache;

    #[test]
    fn reuse_after_a1in_reaches_am_and_survives_a_scan() {
        // Capacity 8: Kin = 2, Kout = 4. 1 and 2 are used, pushed out of A1in by 3..=10
        // (into A1out), used again (ghost hits: into Am), then a scan of 30 new keys only
        // cycles A1in; 1 and 2 hit at the end.
        let mut keys: Vec<u64> = vec![1, 2];
        keys.extend(3..=10);
        keys.extend([1, 2]);
        keys.extend(100..130);
        keys.extend([1, 2]);
        // 10 cold misses, 2 ghost-hit misses, 30 scan misses; the final 1 and 2 hit.
        assert_eq!(miss_count("2q", 8, &keys), 42);
        assert_eq!(miss_count("lru", 8, &keys), 44);
    }

    #[test]
    fn a1in_hits_do_not_promote() {
        // Capacity 4: Kin = 1, Kout = 2. 1 is hit while in A1in, which does not save it:
        // 1 2 3 4 fill A1in; 1 hits (no move); 5 evicts 1 (A1in > Kin) into A1out.
        let mut c = BlockCache::new(4, TwoQ::default());
        for k in [1, 2, 3, 4, 1, 5] {
            c.access(k, |_, _| {});
        }
        assert!(c.lookup(1).is_none());
        assert_eq!(c.policy().sizes(), [4, 0, 1]);
        // 1 again: a ghost hit (its ghost is dropped), admitted to Am; 2 (A1in's oldest)
        // is evicted and becomes the only ghost.
        c.access(1, |_, _| {});
        assert_eq!(c.policy().sizes(), [3, 1, 1]);
        assert!(c.lookup(2).is_none());
    }

    #[test]
    fn params_and_aliases() {
        assert_eq!(crate::build("2q").unwrap().name(), "2q(kin=0.25,kout=0.5)");
        assert_eq!(
            crate::build("twoq:Ain-size-ratio=0.3,kout=1")
                .unwrap()
                .name(),
            "2q(kin=0.3,kout=1)"
        );
        assert!(crate::build("2q:kin=2").is_err());
    }

    #[test]
    fn contract_holds() {
        pinned::contract("2q");
    }
}
