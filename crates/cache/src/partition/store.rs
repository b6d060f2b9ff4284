//! The slot store of a partition: the arena holding each slot's bytes, per-slot metadata
//! (dirty bit, version), the fill table of in-flight read misses, and placing a block
//! into a slot. Everything here runs under the partition's lock.
//!
//! The fill table (`key → (readers, generation)`) lets a read miss read the backend
//! outside the lock: every write, trim or invalidation of a block bumps its generation,
//! and a fill installs its bytes only if the generation did not change meanwhile.

use super::write_back::WbEntry;
use super::Inner;
use crate::stats::{AccessObserver, Counters};
use crate::write_policy::WritePolicy;
use policy::{Access, EvictionSpec, Key, Slot};
use rustc_hash::{FxHashMap, FxHashSet};
use std::ops::Range;

#[derive(Clone, Copy, Default)]
pub(super) struct SlotMeta {
    pub(super) dirty: bool,
    pub(super) version: u64,
}

pub(super) struct Fill {
    pub(super) readers: u32,
    pub(super) gen: u64,
}

/// Everything but the `BlockCache`, so eviction callbacks can borrow it.
pub(super) struct Store {
    pub(super) bs: usize,
    pub(super) arena: Vec<u8>,
    pub(super) meta: Vec<SlotMeta>,
    pub(super) dirty: FxHashSet<Key>,
    pub(super) wb: FxHashMap<Key, WbEntry>,
    pub(super) fills: FxHashMap<Key, Fill>,
    pub(super) next_seq: u64,
    pub(super) stats: Counters,
    pub(super) write_policy: WritePolicy,
    pub(super) eviction: EvictionSpec,
    pub(super) observer: Option<Box<dyn AccessObserver>>,
    /// The arena runs of the last lent read, kept so lending a hit allocates nothing.
    pub(super) lent_runs: Vec<Range<usize>>,
}

impl Store {
    #[inline]
    pub(super) fn block(&self, slot: Slot) -> &[u8] {
        let s = slot as usize * self.bs;
        &self.arena[s..s + self.bs]
    }

    pub(super) fn ensure(&mut self, slot: Slot, capacity: usize) {
        let need = (slot as usize + 1) * self.bs;
        if self.arena.len() < need {
            let target = need.max((self.arena.len() * 2).min(capacity * self.bs));
            self.arena.resize(target, 0);
        }
        if self.meta.len() <= slot as usize {
            let target = (slot as usize + 1).max((self.meta.len() * 2).min(capacity));
            self.meta.resize(target, SlotMeta::default());
        }
    }
    /// Copies a whole block into `slot` and records its state.
    pub(super) fn place(
        &mut self,
        slot: Slot,
        key: Key,
        data: &[u8],
        dirty: bool,
        capacity: usize,
    ) {
        self.ensure(slot, capacity);
        let s = slot as usize * self.bs;
        self.arena[s..s + self.bs].copy_from_slice(data);
        self.meta[slot as usize].version += 1;
        self.set_dirty(slot, key, dirty);
    }

    /// Writes `src` at `in_off` of a resident slot.
    pub(super) fn patch(&mut self, slot: Slot, key: Key, in_off: usize, src: &[u8], dirty: bool) {
        let s = slot as usize * self.bs + in_off;
        self.arena[s..s + src.len()].copy_from_slice(src);
        self.meta[slot as usize].version += 1;
        self.set_dirty(slot, key, dirty);
    }
    /// A block changed (write, trim, invalidation): in-flight fills must not install.
    #[inline]
    pub(super) fn touch(&mut self, key: Key) {
        if !self.fills.is_empty() {
            if let Some(f) = self.fills.get_mut(&key) {
                f.gen += 1;
            }
        }
    }

    pub(super) fn begin_fill(&mut self, key: Key) -> u64 {
        let f = self.fills.entry(key).or_insert(Fill { readers: 0, gen: 0 });
        f.readers += 1;
        f.gen
    }

    /// Ends a fill; true if no change touched the block since it began.
    pub(super) fn end_fill(&mut self, key: Key, gen: u64) -> bool {
        let Some(f) = self.fills.get_mut(&key) else {
            return false;
        };
        let valid = f.gen == gen;
        f.readers -= 1;
        if f.readers == 0 {
            self.fills.remove(&key);
        }
        valid
    }
}

impl Inner {
    /// Places a whole block for a missed `key`; false if admission declined.
    pub(super) fn insert(
        &mut self,
        key: Key,
        data: &[u8],
        dirty: bool,
        victims: &mut Vec<Key>,
    ) -> bool {
        let Inner { bc, st } = self;
        let cap = bc.capacity();
        match bc.access(key, |k, s| st.evicted(k, s, victims)) {
            Access::Inserted(s) | Access::Hit(s) => {
                st.place(s, key, data, dirty, cap);
                true
            }
            Access::Bypassed => false,
        }
    }
}
