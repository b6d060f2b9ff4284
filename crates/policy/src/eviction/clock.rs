//! CLOCK (second chance; Corbató, "A paging experiment with the Multics system", 1968),
//! generalised to an n-bit counter per block.
//!
//! A FIFO ring whose hand skips blocks used since it last passed: on a hit the block's
//! counter rises (saturating at `2^n - 1`); at eviction the hand looks at the tail, takes
//! it if its counter is 0, and otherwise decrements the counter and moves the block to the
//! head (one more lap), repeating until it finds a zero. A hit is one byte store, no list
//! work; an eviction is amortised O(1) (every skip consumes one counter increment made by
//! an earlier hit). Approximates LRU at FIFO's cost; with n > 1 it also weighs frequency.
//! Shines where LRU does, on hardware and in concurrent caches; fails on scans and loops
//! like LRU, and with large n it lets once-hot blocks squat for many laps.
//!
//! Semantics are libCacheSim's `Clock.c` exactly (pinned in `tests/libcachesim_parity.rs`):
//! * a new block is prepended at the head with counter 0 (one access is not a "use"; the
//!   counter counts re-references);
//! * a hit adds one to the counter unless it is at `2^n - 1`, and does not move the block;
//! * eviction starts at the tail: counter ≥ 1 → counter − 1 and move to the head; counter
//!   0 → victim;
//! * parameter `n-bit-counter` (1 to 8, default 1, libCacheSim's name and default).

use crate::list::{Links, List};
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;

/// CLOCK with saturating n-bit counters.
#[derive(Debug)]
pub struct Clock {
    links: Links,
    ring: List,
    counter: Vec<u8>,
    max: u8,
    bits: usize,
}

impl Clock {
    /// Builds from `n-bit-counter=N` (1 to 8, default 1).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let bits = p.usize_in("n-bit-counter", 1, 1, 8)?;
        p.finish()?;
        Ok(Clock {
            links: Links::default(),
            ring: List::default(),
            counter: Vec::new(),
            max: ((1u16 << bits) - 1) as u8,
            bits,
        })
    }
}

impl EvictionPolicy for Clock {
    fn name(&self) -> String {
        if self.bits == 1 {
            "clock".into()
        } else {
            format!("clock(n-bit-counter={})", self.bits)
        }
    }
    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.links.reserve(capacity.min(1 << 24));
    }
    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let c = &mut self.counter[slot as usize];
        if *c < self.max {
            *c += 1;
        }
    }
    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.counter.len() <= i {
            self.counter.resize(i + 1, 0);
        }
        self.counter[i] = 0;
        self.ring.push_front(&mut self.links, slot);
    }
    /// A switched-in block keeps its hits as its counter (saturating).
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        self.on_insert(slot, key);
        self.counter[slot as usize] = h.hits.min(self.max as u32) as u8;
    }

    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        loop {
            let t = self.ring.back().expect("evict called on an empty CLOCK");
            let c = &mut self.counter[t as usize];
            if *c == 0 {
                self.ring.remove(&mut self.links, t);
                return t;
            }
            *c -= 1;
            self.ring.move_to_front(&mut self.links, t);
        }
    }
    #[inline]
    fn prefetch(&self, slot: Slot) {
        crate::prefetch::prefetch_at(&self.counter, slot as usize);
    }
    #[inline]
    fn next_victim(&self) -> Option<Slot> {
        self.ring.back()
    }
    #[inline]
    fn victim_after(&self, slot: Slot) -> Option<Slot> {
        self.ring.prev(&self.links, slot)
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        self.ring.remove(&mut self.links, slot);
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{miss_count, pinned};

    #[test]
    fn second_chance() {
        // 1 2 3, hit 1, 4: hand skips 1 (clears it), evicts 2; 1 hits; 2 misses.
        assert_eq!(miss_count("clock", 3, &[1, 2, 3, 1, 4, 1, 2]), 5);
        assert_eq!(miss_count("fifo", 3, &[1, 2, 3, 1, 4, 1, 2]), 6);
    }

    #[test]
    fn two_bit_counters_give_two_laps() {
        // 1, hit twice, has counter 2 and survives the sweeps for 3 and 4.
        let seq = [1, 1, 1, 2, 3, 4, 1];
        assert_eq!(miss_count("clock:n-bit-counter=2", 2, &seq), 4);
        assert_eq!(miss_count("clock", 2, &seq), 5);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("clock");
        pinned::contract("clock:n-bit-counter=3");
    }
}
