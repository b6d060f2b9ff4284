//! FIFO: evict the block that entered first; hits change nothing.
//!
//! One queue over slots: insertions at the head, the victim at the tail. O(1) and no work
//! at all on a hit, so no lock contention in a concurrent cache; the base of CLOCK, SIEVE
//! and S3-FIFO. Shines when popularity is flat or admission is selective, and is the
//! layout flash caches like (write-once logs); fails when a hot block entered long ago: it
//! is evicted regardless of use (Belady's anomaly also applies).
//!
//! Semantics are libCacheSim's `FIFO.c` exactly (pinned in `tests/libcachesim_parity.rs`):
//! new blocks are prepended at the head, the tail is evicted, a hit touches nothing.

use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// First in, first out.
#[derive(Debug, Default)]
pub struct Fifo {
    links: Links,
    queue: List,
}

impl Fifo {
    /// Builds from a parameter string (FIFO takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }
}

impl EvictionPolicy for Fifo {
    fn name(&self) -> String {
        "fifo".into()
    }
    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.links.reserve(capacity.min(1 << 24));
    }
    #[inline]
    fn on_hit(&mut self, _slot: Slot, _key: Key) {}
    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        self.queue.push_front(&mut self.links, slot);
    }
    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        self.queue
            .pop_back(&mut self.links)
            .expect("evict called on an empty FIFO")
    }
    #[inline]
    fn next_victim(&self) -> Option<Slot> {
        self.queue.back()
    }
    #[inline]
    fn victim_after(&self, slot: Slot) -> Option<Slot> {
        self.queue.prev(&self.links, slot)
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        self.queue.remove(&mut self.links, slot);
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn hits_do_not_protect() {
        // 1 2 3 1(hit) 4 evicts 1 (first in), so 1 misses again.
        assert_eq!(miss_count("fifo", 3, &[1, 2, 3, 1, 4, 1]), 5);
        assert_eq!(miss_count("lru", 3, &[1, 2, 3, 1, 4, 1]), 4);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("fifo");
    }
}
