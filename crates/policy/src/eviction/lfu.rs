//! LFU: evict the least frequently used block.
//!
//! Frequencies count hits since the block entered (no memory of evicted blocks, so a new
//! block starts at 1). Shines on stable popularity (a fixed hot set); fails when
//! popularity shifts (yesterday's hot blocks squat) and on bursts.
//!
//! Semantics match libCacheSim's `LFU` exactly: among blocks of the lowest frequency the
//! one that reached that frequency first leaves (FIFO within a frequency). Kept as an
//! ordered set of `(frequency, time reached, slot)`: O(log n) per event.

use crate::params::Params;
use crate::policy::{BlockHistory, EvictionPolicy, Key, Slot};
use crate::PolicyError;
use std::collections::BTreeSet;

/// Least frequently used, FIFO among equals.
#[derive(Debug, Default)]
pub struct Lfu {
    order: BTreeSet<(u64, u64, Slot)>,
    meta: Vec<(u64, u64)>,
    clock: u64,
}

impl Lfu {
    /// Builds from a parameter string (LFU takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }
}

impl EvictionPolicy for Lfu {
    fn name(&self) -> String {
        "lfu".into()
    }
    fn set_capacity(&mut self, _capacity: usize) {}
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let (f, t) = self.meta[slot as usize];
        self.order.remove(&(f, t, slot));
        self.clock += 1;
        self.meta[slot as usize] = (f + 1, self.clock);
        self.order.insert((f + 1, self.clock, slot));
    }
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.meta.len() <= i {
            self.meta.resize(i + 1, (0, 0));
        }
        self.clock += 1;
        self.meta[i] = (1, self.clock);
        self.order.insert((1, self.clock, slot));
    }
    fn evict(&mut self) -> Slot {
        self.order
            .pop_first()
            .expect("evict called on an empty LFU")
            .2
    }
    /// A switched-in block keeps its frequency: 1 + its hits since it entered.
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.on_insert(slot, key);
        let (_, t) = self.meta[slot as usize];
        self.order.remove(&(1, t, slot));
        let f = 1 + h.hits as u64;
        self.meta[slot as usize] = (f, t);
        self.order.insert((f, t, slot));
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        let (f, t) = self.meta[slot as usize];
        self.order.remove(&(f, t, slot));
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn frequency_then_fifo() {
        // 1 x3, 2 x2, 3 once; 4 evicts 3 (freq 1); 5 evicts 4 (freq 1, newest equal but only one);
        // 1 and 2 stay.
        assert_eq!(miss_count("lfu", 3, &[1, 1, 1, 2, 2, 3, 4, 5, 1, 2]), 5);
        // Equal frequencies: the one that got there first leaves.
        // 1 2 (both freq 1), 1 hit (freq 2), 2 hit (freq 2, later), 3 evicts 1.
        assert_eq!(miss_count("lfu", 2, &[1, 2, 1, 2, 3, 2, 1]), 4);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("lfu");
    }
}
