//! The in-memory state of a partition: the arena holding each slot's bytes, per-slot
//! metadata (dirty bit, version), the dirty set and the write-back table, the fill table
//! of in-flight read misses; placing and patching blocks, marking them dirty or clean,
//! and moving evicted dirty blocks to the write-back table. Everything here runs under
//! the partition's lock; writing dirty data to the backend is `write_back`'s.
//!
//! A dirty block is either resident (its slot's dirty bit set, its key in the dirty set)
//! or in the **write-back table** (`key → bytes`): a dirty block that is evicted (by a
//! miss, a shrink, admission declining a write) moves there under the lock and is written
//! to the backend after the lock is released. Reads and partial writes consult the table
//! before the backend, so the data is never invisible. A block is resident, or in this
//! table, or neither — never both.
//!
//! The fill table (`key → (readers, generation)`) lets a read miss read the backend
//! outside the lock: every write, trim or invalidation of a block bumps its generation,
//! and a fill installs its bytes only if the generation did not change meanwhile.

use super::Inner;
use crate::stats::{AccessObserver, Counters};
use crate::volume::Volume;
use crate::write_policy::WritePolicy;
use policy::{Access, EvictionSpec, Key, Slot};
use rustc_hash::{FxHashMap, FxHashSet};
use std::ops::Range;
use std::sync::Arc;

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
    /// The slots of the last lent read's blocks (reused likewise).
    pub(super) lent_slots: Vec<Slot>,
    /// How much dirty data the partition may hold (`dirty`).
    pub(super) dirty_limits: super::DirtyLimits,
    /// Blocks writers owe to throttling, carried between writes (`dirty`).
    pub(super) clean_debt: f64,
    /// The partition's role in a pair of exclusive levels (`demote`).
    pub(super) exclusive: super::exclusive::Exclusive,
    /// The node's volumes, to name the export of a demoted victim (`demote`).
    pub(super) vols: Arc<crate::volume::VolumeTable>,
}

/// Bytes of an evicted dirty block waiting to be written back, with the sequence number
/// that tells a write-back whether they changed while it ran.
pub(super) struct WbEntry {
    pub(super) data: Arc<[u8]>,
    pub(super) seq: u64,
}

impl Store {
    /// Marks resident `slot` (holding `key`) dirty or clean.
    pub(super) fn set_dirty(&mut self, slot: Slot, key: Key, dirty: bool) {
        let m = &mut self.meta[slot as usize];
        if m.dirty != dirty {
            m.dirty = dirty;
            if dirty {
                self.dirty.insert(key);
            } else {
                self.dirty.remove(&key);
            }
        }
    }

    /// Called by `BlockCache` for every evicted block, before its slot is reused. A dirty
    /// victim moves to the write-back table; a clean one is demoted if the partition is
    /// an upper exclusive level (`demote`).
    pub(super) fn evicted(&mut self, key: Key, slot: Slot, victims: &mut Vec<Key>) {
        self.stats.evictions += 1;
        if self.meta[slot as usize].dirty {
            let data: Arc<[u8]> = Arc::from(self.block(slot));
            self.set_dirty(slot, key, false);
            self.push_wb(key, data);
            victims.push(key);
        } else if matches!(self.exclusive, super::exclusive::Exclusive::Upper(_)) {
            let vols = self.vols.clone();
            self.demote(key, slot, &vols);
        }
    }

    pub(super) fn push_wb(&mut self, key: Key, data: Arc<[u8]>) {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.wb.insert(key, WbEntry { data, seq });
    }
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

impl Store {
    /// Blocks `first..end` of `vol` changed (trim): in-flight fills of them must not
    /// install.
    pub(super) fn touch_range(&mut self, vol: &Volume, first: u64, end: u64) {
        let (lo, hi) = (vol.key(first), vol.key(end));
        for (k, f) in self.fills.iter_mut() {
            if (lo..hi).contains(k) {
                f.gen += 1;
            }
        }
    }
}

impl Inner {
    /// Keys of `vol`'s blocks `first..end` held in memory (resident or write-back table).
    pub(super) fn keys_in(&self, vol: &Volume, first: u64, end: u64) -> Vec<Key> {
        let g = self;
        let (lo, hi) = (vol.key(first), vol.key(end));
        if end - first <= (g.bc.len() + g.st.wb.len()) as u64 {
            (first..end)
                .map(|b| vol.key(b))
                .filter(|k| g.bc.lookup(*k).is_some() || g.st.wb.contains_key(k))
                .collect()
        } else {
            let mut v: Vec<Key> =
                g.bc.resident()
                    .map(|(k, _)| k)
                    .filter(|k| (lo..hi).contains(k))
                    .collect();
            v.extend(g.st.wb.keys().copied().filter(|k| (lo..hi).contains(k)));
            v
        }
    }
}
