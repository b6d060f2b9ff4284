//! [`Checked`]: a wrapper that asserts the [`EvictionPolicy`] contract (see
//! [`crate::policy`]) around any policy. Tests run every policy through it; it panics on
//! the first violation, naming the policy and the event.

use crate::policy::{Directory, EvictionPolicy, Key, Slot};
use rustc_hash::FxHashMap;

/// A policy wrapped with contract checks.
pub struct Checked<P> {
    inner: P,
    resident: FxHashMap<Slot, Key>,
    capacity: usize,
}

impl<P: EvictionPolicy> Checked<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        Checked {
            inner,
            resident: FxHashMap::default(),
            capacity: 0,
        }
    }

    /// Number of blocks the wrapper believes are resident.
    pub fn resident(&self) -> usize {
        self.resident.len()
    }
}

impl<P: EvictionPolicy> Checked<P> {
    fn check_set_capacity(&mut self, capacity: usize) {
        assert!(
            self.resident.len() <= capacity,
            "{}: set_capacity({capacity}) with {} resident",
            self.inner.name(),
            self.resident.len()
        );
        self.capacity = capacity;
    }
    fn check_miss(&self, key: Key) {
        assert!(
            !self.resident.values().any(|&k| k == key) || self.resident.len() > 4096,
            "{}: on_miss for a resident key",
            self.inner.name()
        );
    }
    fn check_evict(&mut self, evict: impl FnOnce(&mut P) -> Slot) -> Slot {
        assert!(
            !self.resident.is_empty(),
            "{}: evict on empty",
            self.inner.name()
        );
        let s = evict(&mut self.inner);
        assert!(
            self.resident.remove(&s).is_some(),
            "{}: evict returned slot {s}, which is not resident",
            self.inner.name()
        );
        s
    }
}

impl<P: EvictionPolicy> EvictionPolicy for Checked<P> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn set_capacity(&mut self, capacity: usize, dir: &mut Directory<'_>) {
        self.check_set_capacity(capacity);
        self.inner.set_capacity(capacity, dir)
    }
    fn on_hit(&mut self, slot: Slot, key: Key) {
        assert_eq!(
            self.resident.get(&slot),
            Some(&key),
            "{}: on_hit for a slot that is not resident",
            self.inner.name()
        );
        self.inner.on_hit(slot, key)
    }
    fn on_miss(&mut self, key: Key, ghost: Option<u32>) {
        self.check_miss(key);
        self.inner.on_miss(key, ghost)
    }
    fn on_insert(&mut self, slot: Slot, key: Key) {
        assert!(
            self.resident.len() < self.capacity,
            "{}: insert into a full cache",
            self.inner.name()
        );
        let prev = self.resident.insert(slot, key);
        assert!(
            prev.is_none(),
            "{}: slot {slot} inserted twice",
            self.inner.name()
        );
        self.inner.on_insert(slot, key)
    }
    fn evict(&mut self, dir: &mut Directory<'_>) -> Slot {
        self.check_evict(|p| p.evict(dir))
    }
    fn on_remove(&mut self, slot: Slot, key: Key) {
        assert_eq!(
            self.resident.remove(&slot),
            Some(key),
            "{}: remove of a non-resident slot",
            self.inner.name()
        );
        self.inner.on_remove(slot, key)
    }
    fn prefetch(&self, slot: Slot) {
        self.inner.prefetch(slot)
    }
    fn prefetch_neighbours(&self, slot: Slot) {
        self.inner.prefetch_neighbours(slot)
    }
    fn next_victim(&self) -> Option<Slot> {
        let v = self.inner.next_victim();
        if let Some(v) = v {
            assert!(
                self.resident.contains_key(&v),
                "{}: next_victim {v} is not resident",
                self.inner.name()
            );
        }
        v
    }
    fn victim_after(&self, slot: Slot) -> Option<Slot> {
        let v = self.inner.victim_after(slot);
        if let Some(v) = v {
            assert!(
                self.resident.contains_key(&v),
                "{}: victim_after {slot} gave {v}, which is not resident",
                self.inner.name()
            );
        }
        v
    }
    fn prefetches_hits(&self) -> bool {
        self.inner.prefetches_hits()
    }
}
