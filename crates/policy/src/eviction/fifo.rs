//! FIFO: evict the block that entered first; hits change nothing.
//!
//! The cheapest policy (no work on a hit, so no lock contention in a concurrent cache) and
//! the base of CLOCK, SIEVE and S3-FIFO. Shines when popularity is flat or when admission
//! is selective; fails when a hot block entered long ago (it is evicted regardless of
//! use). Semantics match libCacheSim's `FIFO`: new blocks at the head, evict the tail.

use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{EvictionPolicy, Key, Slot};
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
    fn set_capacity(&mut self, capacity: usize) {
        self.links.reserve(capacity.min(1 << 24));
    }
    #[inline]
    fn on_hit(&mut self, _slot: Slot, _key: Key) {}
    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        self.queue.push_front(&mut self.links, slot);
    }
    #[inline]
    fn evict(&mut self) -> Slot {
        self.queue
            .pop_back(&mut self.links)
            .expect("evict called on an empty FIFO")
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
