//! LRU-K (O'Neil, O'Neil & Weikum, SIGMOD'93): evict the block whose K-th most recent
//! reference is oldest.
//!
//! A block referenced fewer than K times has an infinite backward K-distance and leaves
//! first (the oldest last reference among them first, the paper's subsidiary LRU rule).
//! The paper's "retained information" keeps reference history of evicted blocks so a block
//! that returns is not treated as new; we retain the history of up to `history` × capacity
//! evicted blocks (default 1×), forgetting the oldest first. The correlated-reference
//! period is 0 (every reference counts), as in most simulators.
//!
//! Shines against scans (a block touched once never displaces one touched K times) and on
//! database index/data mixes; reacts slowly to shifts in popularity. Ordered set of
//! `(class, time, slot)`: O(log n) per event. Parameters `k` (1 to 8, default 2; k=1 is
//! LRU) and `history`.
//!
//! libCacheSim's `LRU-K` orders blocks the same way but keeps no retained history (its
//! PyPI peer gives the same miss ratio as `lruk:history=0`).

use crate::keymap::KeyMap;
use crate::list::{Links, List, NodeSlab};
use crate::params::Params;
use crate::policy::{BlockHistory, EvictionPolicy, Key, Slot};
use crate::PolicyError;
use std::collections::BTreeSet;

/// Reference times of one block, newest first (0 = none).
type Refs = [u64; 8];

/// LRU-K.
#[derive(Debug)]
pub struct LruK {
    k: usize,
    history_ratio: f64,
    history_cap: usize,
    order: BTreeSet<(u8, u64, Slot)>,
    refs: Vec<Refs>,
    keys: Vec<Key>,
    now: u64,
    ghosts: KeyMap<u32>,
    ghost_nodes: NodeSlab<(Key, Refs)>,
    ghost_links: Links,
    ghost_fifo: List,
}

impl LruK {
    /// Builds from `k=K,history=H`.
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let k = p.usize_in("k", 2, 1, 8)?;
        let history_ratio = p.f64_in("history", 1.0, 0.0, 64.0)?;
        p.finish()?;
        Ok(LruK {
            k,
            history_ratio,
            history_cap: 0,
            order: BTreeSet::new(),
            refs: Vec::new(),
            keys: Vec::new(),
            now: 0,
            ghosts: KeyMap::default(),
            ghost_nodes: NodeSlab::default(),
            ghost_links: Links::default(),
            ghost_fifo: List::default(),
        })
    }

    /// `(class, time)`: class 0 = fewer than K references (time = last reference), class 1
    /// = K-th most recent reference time.
    fn rank(&self, r: &Refs) -> (u8, u64) {
        if r[self.k - 1] == 0 {
            (0, r[0])
        } else {
            (1, r[self.k - 1])
        }
    }

    fn entry(&self, slot: Slot) -> (u8, u64, Slot) {
        let (c, t) = self.rank(&self.refs[slot as usize]);
        (c, t, slot)
    }

    fn touch(r: &mut Refs, now: u64) {
        r.copy_within(0..7, 1);
        r[0] = now;
    }

    fn trim_history(&mut self) {
        while self.ghosts.len() > self.history_cap {
            let Some(n) = self.ghost_fifo.pop_back(&mut self.ghost_links) else {
                break;
            };
            let key = self.ghost_nodes.get(n).0;
            self.ghosts.remove(&key);
            self.ghost_nodes.release(n);
        }
    }
}

impl EvictionPolicy for LruK {
    fn name(&self) -> String {
        format!("lruk(k={},history={})", self.k, self.history_ratio)
    }
    fn set_capacity(&mut self, capacity: usize) {
        self.history_cap = (capacity as f64 * self.history_ratio) as usize;
        self.trim_history();
    }
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let e = self.entry(slot);
        self.order.remove(&e);
        self.now += 1;
        Self::touch(&mut self.refs[slot as usize], self.now);
        let e = self.entry(slot);
        self.order.insert(e);
    }
    fn on_insert(&mut self, slot: Slot, key: Key) {
        let i = slot as usize;
        if self.refs.len() <= i {
            self.refs.resize(i + 1, [0; 8]);
            self.keys.resize(i + 1, 0);
        }
        self.now += 1;
        let mut r = [0; 8];
        if let Some(n) = self.ghosts.remove(&key) {
            r = self.ghost_nodes.get(n).1;
            self.ghost_fifo.remove(&mut self.ghost_links, n);
            self.ghost_nodes.release(n);
        }
        Self::touch(&mut r, self.now);
        self.refs[i] = r;
        self.keys[i] = key;
        let e = self.entry(slot);
        self.order.insert(e);
    }
    /// A switched-in block with at least K-1 hits arrives with K references at its turn in
    /// the replay (so blocks rank by last access among themselves, after the ones seen
    /// fewer than K times); others as new blocks.
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.on_insert(slot, key);
        if h.hits as usize + 1 >= self.k {
            let e = self.entry(slot);
            self.order.remove(&e);
            let now = self.now;
            self.refs[slot as usize][..self.k].fill(now);
            let e = self.entry(slot);
            self.order.insert(e);
        }
    }
    fn evict(&mut self) -> Slot {
        let (_, _, slot) = self
            .order
            .pop_first()
            .expect("evict called on an empty LRU-K");
        if self.history_cap > 0 {
            let key = self.keys[slot as usize];
            let n = self.ghost_nodes.alloc((key, self.refs[slot as usize]));
            self.ghost_fifo.push_front(&mut self.ghost_links, n);
            self.ghosts.insert(key, n);
            self.trim_history();
        }
        slot
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
    fn one_time_blocks_leave_first() {
        // 1 and 2 referenced twice; the scan 3,4,5 only displaces itself.
        let seq = [1, 1, 2, 2, 3, 4, 5, 1, 2];
        assert_eq!(miss_count("lruk", 3, &seq), 5);
        assert_eq!(miss_count("lru", 3, &seq), 7);
    }

    #[test]
    fn k1_is_lru() {
        let seq = [1, 2, 3, 1, 4, 2, 5, 1, 3, 4, 2, 2, 6, 1];
        assert_eq!(
            miss_count("lruk:k=1,history=0", 3, &seq),
            miss_count("lru", 3, &seq)
        );
    }

    #[test]
    fn history_remembers_evicted_blocks() {
        // Cache of 1: 1 1 (two refs) then 2 2 evicts 1; 1 returns with history (3 refs
        // counting now) and so 2 (2 refs, older 2nd ref) leaves before 1 on the next miss.
        let seq = [1, 1, 2, 2, 1, 3, 1];
        assert!(miss_count("lruk", 1, &seq) <= miss_count("lruk:history=0", 1, &seq));
    }

    #[test]
    fn contract_holds() {
        pinned::contract("lruk");
        pinned::contract("lruk:k=3,history=2");
    }
}
