//! The eviction-policy interface, modelled on SOPA's policy module.
//!
//! The cache (the policy's user, [`crate::BlockCache`]) owns the block directory (key to
//! slot) and the universal metadata (the key in each slot, last-access stamps for
//! reconstruction). A policy owns only its own metadata, indexed by [`Slot`], plus any
//! history of blocks that are no longer resident (ghosts), indexed by [`Key`]. It answers
//! events; it never decides how many blocks the cache holds: the cache tells it the
//! capacity and asks it for a victim whenever it needs room.
//!
//! ## The contract
//!
//! The cache calls, for every access to `key`:
//! * resident: [`EvictionPolicy::on_hit`]`(slot, key)`;
//! * not resident: [`EvictionPolicy::on_miss`]`(key)` first (whether or not the block will
//!   be admitted), then, if admitted, [`EvictionPolicy::evict`] while the cache is full
//!   (each call must return a resident slot and forget it), then
//!   [`EvictionPolicy::on_insert`]`(slot, key)` with a free slot.
//!
//! Outside accesses: [`EvictionPolicy::evict`] to shrink (with no `on_miss` before it),
//! [`EvictionPolicy::on_remove`] when a block leaves for another reason (trim,
//! invalidation), and [`EvictionPolicy::set_capacity`] before first use and on every resize.
//! A slot is never given to `on_insert` while the policy still tracks it as resident.
//! [`crate::sanity::Checked`] wraps any policy and asserts this contract in tests.

/// Index of a resident block in the cache's directory. The cache hands out slots densely
/// from `0` and recycles them, so a policy can keep per-slot metadata in a `Vec`.
pub type Slot = u32;

/// Identity of a block (object-mode or block-mode key, see [`trace::Request`]).
pub type Key = u64;

/// An eviction policy: decides which resident block leaves.
pub trait EvictionPolicy: Send {
    /// The canonical name with parameters, e.g. `lrfu(lambda=0.001)`.
    fn name(&self) -> String;

    /// The cache's capacity in blocks; called before first use and on every resize (after
    /// any evictions a shrink needed). Policies with capacity-relative parameters (ARC's
    /// target, 2Q's queue sizes, LIRS's LIR set) recompute them here.
    fn set_capacity(&mut self, capacity: usize);

    /// A resident block was accessed.
    fn on_hit(&mut self, slot: Slot, key: Key);

    /// `key` was looked up and is not resident. Called before any `evict` and `on_insert`
    /// this miss causes, and also for misses that admission then declines. Policies with
    /// ghost lists adapt here.
    fn on_miss(&mut self, _key: Key) {}

    /// A new block was placed in `slot`.
    fn on_insert(&mut self, slot: Slot, key: Key);

    /// Chooses a resident block to evict, forgets it as resident (it may keep it as a
    /// ghost) and returns its slot. Called only when at least one block is resident.
    fn evict(&mut self) -> Slot;

    /// A resident block leaves without being chosen by `evict` (trim, invalidation).
    fn on_remove(&mut self, slot: Slot, key: Key);

    /// Reconstruction after an online switch: a block already resident is handed to this
    /// (new) policy, oldest access first, with what the cache remembers of it. The default
    /// treats it as a new block; policies that rank by frequency use `hits` so a switch
    /// does not make them relearn it (SOPA replays blocks only; this keeps their history).
    fn on_reconstruct(&mut self, slot: Slot, key: Key, _history: BlockHistory) {
        self.on_insert(slot, key)
    }
}

/// What the cache remembers of a resident block, for reconstruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHistory {
    /// The cache's access clock at the block's last access.
    pub last_access: u64,
    /// Hits since the block entered the cache.
    pub hits: u32,
}

impl<P: EvictionPolicy + ?Sized> EvictionPolicy for Box<P> {
    fn name(&self) -> String {
        (**self).name()
    }
    #[inline]
    fn set_capacity(&mut self, capacity: usize) {
        (**self).set_capacity(capacity)
    }
    #[inline]
    fn on_hit(&mut self, slot: Slot, key: Key) {
        (**self).on_hit(slot, key)
    }
    #[inline]
    fn on_miss(&mut self, key: Key) {
        (**self).on_miss(key)
    }
    #[inline]
    fn on_insert(&mut self, slot: Slot, key: Key) {
        (**self).on_insert(slot, key)
    }
    #[inline]
    fn evict(&mut self) -> Slot {
        (**self).evict()
    }
    #[inline]
    fn on_remove(&mut self, slot: Slot, key: Key) {
        (**self).on_remove(slot, key)
    }
    fn on_reconstruct(&mut self, slot: Slot, key: Key, history: BlockHistory) {
        (**self).on_reconstruct(slot, key, history)
    }
}
