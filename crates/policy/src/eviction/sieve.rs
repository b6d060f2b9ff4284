//! SIEVE: a FIFO queue with one visited bit per block and a hand that sweeps from the
//! oldest block towards the newest (Zhang, Yang, Yue, Vigfusson and Rashmi, "SIEVE is
//! Simpler than LRU: an Efficient Turn-Key Eviction Algorithm for Web Caches", NSDI '24).
//!
//! Owns: the insertion-ordered queue of resident slots, one visited bit per slot, and the
//! hand. Nothing is remembered about evicted blocks.
//!
//! ## Algorithm
//! * hit: set the block's visited bit (nothing moves: *lazy promotion*);
//! * insert: the new block goes to the head (newest end) with the bit clear;
//! * evict: starting at the hand (the tail, the oldest block, when the hand is unset), clear
//!   and pass over visited blocks towards the head, wrapping to the tail; evict the first
//!   unvisited block and leave the hand at the next newer block.
//!
//! Unlike CLOCK, survivors are not moved to the head: they keep their place, so new blocks
//! that are never hit again are evicted quickly (*quick demotion*) while the hand sweeps.
//!
//! ## Where it shines and where it fails
//! Web and block workloads with a popular set and many one-hit wonders: hits cost one store,
//! and the miss ratio is often below LRU's and near ARC's. It is not scan-resistant in the
//! ARC sense — a loop larger than the cache misses every time — and a block that was hit
//! once survives one whole sweep even when it is never used again.
//!
//! ## libCacheSim
//! Matches libCacheSim's `Sieve` (same queue direction, hand start and wrap, and hand
//! placement after an eviction; a removed block under the hand moves the hand to the next
//! newer block): the miss ratios on the cloudPhysics trace are identical at every size
//! tested (see `tests/libcachesim_parity_adaptive.rs`).

use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// SIEVE with a moving hand.
#[derive(Debug, Default)]
pub struct Sieve {
    links: Links,
    queue: List,
    visited: Vec<bool>,
    /// The next block the hand looks at; `None` means "start at the tail".
    hand: Option<Slot>,
}

impl Sieve {
    /// Builds from a parameter string (SIEVE takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }
}

impl EvictionPolicy for Sieve {
    fn name(&self) -> String {
        "sieve".into()
    }

    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        let n = capacity.min(1 << 24);
        self.links.reserve(n);
        if self.visited.len() < n {
            self.visited.resize(n, false);
        }
    }

    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        self.visited[slot as usize] = true;
    }

    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.visited.len() <= i {
            self.visited
                .resize((i + 1).max(self.visited.len() * 2), false);
        }
        self.visited[i] = false;
        self.queue.push_front(&mut self.links, slot);
    }

    /// A switched-in block that was hit since it entered arrives visited.
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.on_insert(slot, key);
        self.visited[slot as usize] = h.hits > 0;
    }

    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        let tail = self.queue.back().expect("evict called on an empty SIEVE");
        let mut cur = self.hand.unwrap_or(tail);
        while self.visited[cur as usize] {
            self.visited[cur as usize] = false;
            cur = match self.queue.prev(&self.links, cur) {
                Some(p) => p,
                None => self.queue.back().unwrap_or(cur),
            };
        }
        self.hand = self.queue.prev(&self.links, cur);
        self.queue.remove(&mut self.links, cur);
        cur
    }

    fn on_remove(&mut self, slot: Slot, _key: Key) {
        if self.hand == Some(slot) {
            self.hand = self.queue.prev(&self.links, slot);
        }
        self.queue.remove(&mut self.links, slot);
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn lazy_promotion_keeps_hit_block_in_place() {
        // Capacity 3, queue shown newest..oldest.
        //   1 2 3 miss            [3 2 1]             3 misses
        //   3 hit                 3 visited, stays put
        //   4: hand at tail 1 (unvisited) -> evict 1, hand -> 2     [4 3 2]
        //   5: hand 2 unvisited -> evict 2, hand -> 3               [5 4 3]
        //   6: hand 3 visited -> clear, 4 unvisited -> evict 4      [6 5 3]
        //   3 hit: it was the least recently used block, yet it survived.
        let seq = [1, 2, 3, 3, 4, 5, 6, 3];
        assert_eq!(miss_count("sieve", 3, &seq), 6);
        // LRU evicts 3 at `6` and misses it again.
        assert_eq!(miss_count("lru", 3, &seq), 7);
    }

    #[test]
    fn one_hit_wonders_leave_first() {
        // Capacity 4 with a hot pair {1,2} and a stream of new keys: after warm-up every
        // new key evicts the previous new key, never 1 or 2 (both are hit between misses).
        let mut keys = vec![1, 2];
        for k in 10..30 {
            keys.extend([k, 1, 2]);
        }
        // 2 cold misses for 1 and 2, then 20 misses for the new keys, no other misses.
        assert_eq!(miss_count("sieve", 4, &keys), 22);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("sieve");
    }
}
