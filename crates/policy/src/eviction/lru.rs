//! LRU: evict the least recently used block.
//!
//! The reference policy: a recency list over slots, O(1) per event. Shines on workloads
//! with strong recency (most block traces' hot sets); fails on loops and scans larger than
//! the cache (every access misses) — see ARC, LIRS and S3-FIFO for scan resistance.
//! Its hit ratio at every size comes from one pass of stack distances (Mattson et al.,
//! 1970), which is why the `mrc` crate can compute it exactly.
//!
//! Semantics match libCacheSim's `LRU`: hits move to the front, new blocks enter at the
//! front, the back is evicted.

use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// Least recently used.
#[derive(Debug, Default)]
pub struct Lru {
    links: Links,
    list: List,
}

impl Lru {
    /// Builds from a parameter string (LRU takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }
}

impl EvictionPolicy for Lru {
    fn name(&self) -> String {
        "lru".into()
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
            .pop_back(&mut self.links)
            .expect("evict called on an empty LRU")
    }
    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.links.prefetch(slot);
    }
    #[inline]
    fn prefetch_neighbours(&self, slot: Slot) {
        self.links.prefetch_neighbours(slot);
    }
    #[inline]
    fn prefetches_hits(&self) -> bool {
        true
    }
    #[inline]
    fn next_victim(&self) -> Option<Slot> {
        self.list.back()
    }
    #[inline]
    fn victim_after(&self, slot: Slot) -> Option<Slot> {
        self.list.prev(&self.links, slot)
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        self.list.remove(&mut self.links, slot);
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn evicts_least_recent() {
        // 1 2 3 1 4 (evicts 2) 2 (miss, evicts 3) 1 (hit)
        assert_eq!(miss_count("lru", 3, &[1, 2, 3, 1, 4, 2, 1]), 5);
    }

    #[test]
    fn victim_hints_follow_eviction_order() {
        // Slots 0, 1, 2 enter in that order; a hit on 0 makes 1 the next victim, then 2.
        use crate::policy::{Directory, EvictionPolicy};
        let mut lru = super::Lru::default();
        for s in 0..3 {
            lru.on_insert(s, s as u64);
        }
        lru.on_hit(0, 0);
        assert_eq!(lru.next_victim(), Some(1));
        assert_eq!(lru.victim_after(1), Some(2));
        assert_eq!(lru.victim_after(0), None);
        let mut map = crate::dirmap::DirMap::default();
        let mut dir = Directory::new(&mut map, &[]);
        assert_eq!(lru.evict(&mut dir), 1);
        assert_eq!(lru.evict(&mut dir), 2);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("lru");
    }
}
