//! MRU: evict the most recently used block.
//!
//! One recency list over slots (as LRU), but the victim is taken from the head: the block
//! touched last before the current miss. O(1) per event. Named and studied by Chou &
//! DeWitt ("An evaluation of buffer management strategies for relational database
//! systems", VLDB 1985) for looping sequential access.
//!
//! Shines on cyclic scans larger than the cache (a loop over N+1 blocks with N slots: LRU
//! misses every access, MRU keeps N-1 of them resident); fails on nearly everything else,
//! since any hot block that was just used is the next victim (on the shared cloudPhysics
//! trace it is the worst policy here at every size).
//!
//! Semantics are libCacheSim's `MRU.c`: a hit moves the block to the head, a new block is
//! prepended at the head, and `evict` removes the head. PyPI `libcachesim` has no MRU, so
//! parity is checked against a naive model of those rules (`tests/libcachesim_parity.rs`)
//! and an independent Python model of them gave the same counts. One difference: with a
//! capacity of one block libCacheSim's `MRU_evict` dereferences the (null) successor of
//! the only block and crashes; here it simply empties the list.

use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// Most recently used.
#[derive(Debug, Default)]
pub struct Mru {
    links: Links,
    list: List,
}

impl Mru {
    /// Builds from a parameter string (MRU takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }
}

impl EvictionPolicy for Mru {
    fn name(&self) -> String {
        "mru".into()
    }
    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.links.reserve(capacity.min(1 << 24));
    }
    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        self.list.move_to_front(&mut self.links, slot);
    }
    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        self.list.push_front(&mut self.links, slot);
    }
    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        self.list
            .pop_front(&mut self.links)
            .expect("evict called on an empty MRU")
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        self.list.remove(&mut self.links, slot);
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn keeps_most_of_a_loop() {
        // Loop over 4 blocks, cache of 3, 3 rounds: LRU misses all 12.
        let lp: Vec<u64> = (0..3).flat_map(|_| 0..4).collect();
        assert_eq!(miss_count("lru", 3, &lp), 12);
        // MRU: round 1 misses 4 (3 evicts 2); round 2: 0,1 hit, 2 misses (evicts 1), 3 hits;
        // round 3: 0 hits, 1 misses (evicts 0), 2 hits, 3 hits.
        assert_eq!(miss_count("mru", 3, &lp), 6);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("mru");
    }
}
