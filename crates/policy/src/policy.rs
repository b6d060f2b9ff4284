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
//! * not resident: [`EvictionPolicy::on_miss`]`(key, ghost)` first (whether or not the
//!   block will be admitted), then, if admitted, [`EvictionPolicy::evict`] while the cache
//!   is full (each call must return a resident slot and forget it), then
//!   [`EvictionPolicy::on_insert`]`(slot, key)` with a free slot.
//!
//! Outside accesses: [`EvictionPolicy::evict`] to shrink (with no `on_miss` before it),
//! [`EvictionPolicy::on_remove`] when a block leaves for another reason (trim,
//! invalidation), and [`EvictionPolicy::set_capacity`] before first use and on every resize.
//! A slot is never given to `on_insert` while the policy still tracks it as resident.
//!
//! `evict` and `set_capacity` get the cache's directory and `on_miss` the ghost tag found
//! there, so a policy may keep its ghosts in the directory (ARC, see [`Directory`]); the
//! others ignore both.
//! [`crate::sanity::Checked`] wraps any policy and asserts this contract in tests.

use crate::dirmap::DirMap;

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
    /// target, 2Q's queue sizes, LIRS's LIR set) recompute them here; a policy that keeps
    /// ghosts in the directory ([`Directory`]) forgets those it no longer has room for.
    fn set_capacity(&mut self, capacity: usize, dir: &mut Directory<'_>);

    /// A resident block was accessed.
    fn on_hit(&mut self, slot: Slot, key: Key);

    /// `key` was looked up and is not resident. Called before any `evict` and `on_insert`
    /// this miss causes, and also for misses that admission then declines. Policies with
    /// ghost lists adapt here. `ghost` is the tag this policy left in the directory for
    /// `key` with [`Directory::bury`], if any (a policy that never buries never sees one).
    #[inline]
    fn on_miss(&mut self, _key: Key, _ghost: Option<u32>) {}

    /// A new block was placed in `slot`.
    fn on_insert(&mut self, slot: Slot, key: Key);

    /// Chooses a resident block to evict, forgets it as resident and returns its slot.
    /// Called only when at least one block is resident. A policy may keep the victim as a
    /// ghost of its own, or in the cache's directory ([`Directory::bury`], dropping old
    /// ones with [`Directory::forget`]); most ignore `dir`.
    fn evict(&mut self, dir: &mut Directory<'_>) -> Slot;

    /// A resident block leaves without being chosen by `evict` (trim, invalidation).
    fn on_remove(&mut self, slot: Slot, key: Key);

    /// Reconstruction after an online switch: a block already resident is handed to this
    /// (new) policy, oldest access first, with what the cache remembers of it. The default
    /// treats it as a new block; policies that rank by frequency use `hits` so a switch
    /// does not make them relearn it (SOPA replays blocks only; this keeps their history).
    fn on_reconstruct(&mut self, slot: Slot, key: Key, _history: BlockHistory) {
        self.on_insert(slot, key)
    }

    /// A hint, not an event: starts loading ([`crate::prefetch`]) the metadata a hit on
    /// resident `slot` touches first, as far as its address is known without reading
    /// anything (LRU: the slot's list links; CLOCK: its counter), so a caller that knows
    /// its next keys ([`crate::BlockCache::prefetch_slot`]) has those loads under way while
    /// it serves earlier ones. Changes nothing.
    #[inline]
    fn prefetch(&self, _slot: Slot) {}

    /// A hint, not an event: the second stage of [`EvictionPolicy::prefetch`], called
    /// later for the same slot (its first-stage lines are in cache by then): reads them and
    /// starts loading what their contents point to (LRU: the list neighbours' links, which
    /// an unlink writes). Changes nothing.
    #[inline]
    fn prefetch_neighbours(&self, _slot: Slot) {}

    /// A hint, not an event: the slot the next [`EvictionPolicy::evict`] would most likely
    /// return if nothing else happened first, so the cache can read its key and directory
    /// entry ahead of time. `None` (the default) when the policy cannot say cheaply.
    #[inline]
    fn next_victim(&self) -> Option<Slot> {
        None
    }

    /// Whether [`EvictionPolicy::prefetch`] does anything, i.e. a hit touches per-slot
    /// metadata worth loading ahead (a replay then prefetches in three stages, see
    /// [`crate::sim::replay_stream`]). `false` by default.
    #[inline]
    fn prefetches_hits(&self) -> bool {
        false
    }

    /// A hint, not an event: the slot [`EvictionPolicy::evict`] would most likely return
    /// after resident `slot` if nothing else happened first (LRU and FIFO: the list
    /// neighbour towards the front), so the cache can start reading the victim after
    /// next while it reads the next one. `None` (the default) when the policy cannot say
    /// cheaply.
    #[inline]
    fn victim_after(&self, _slot: Slot) -> Option<Slot> {
        None
    }
}

/// Tag bit of a ghost entry in the cache's directory; a value without it is a slot.
pub const GHOST: u32 = 1 << 31;

/// The cache's directory (key to slot) as a policy sees it during
/// [`EvictionPolicy::evict`]: a policy that keeps history of evicted blocks (ARC) may
/// leave the victim's key in the directory as a ghost carrying a 31-bit tag of its own, so
/// the cache's one lookup per access finds resident blocks and ghosts alike, and a ghost
/// costs no map of the policy's own. The cache hands the tag back on a miss
/// ([`EvictionPolicy::on_miss`]), overwrites the entry when the block enters again,
/// drops it when the block is not admitted, and drops every ghost when the policy is
/// switched. The policy must [`Directory::forget`] a ghost it no longer tracks.
pub struct Directory<'a> {
    map: &'a mut DirMap,
    keys: &'a [Key],
    buried: bool,
}

impl<'a> Directory<'a> {
    /// Wraps the cache's map and its keys by slot.
    pub(crate) fn new(map: &'a mut DirMap, keys: &'a [Key]) -> Self {
        Directory {
            map,
            keys,
            buried: false,
        }
    }

    /// Whether [`Directory::bury`] was called.
    pub(crate) fn buried(&self) -> bool {
        self.buried
    }

    /// The key of resident `slot`.
    #[inline]
    pub fn key_of(&self, slot: Slot) -> Key {
        self.keys[slot as usize]
    }

    /// Makes `key`, the key of the resident slot `evict` is about to return, a ghost
    /// tagged `tag` (below [`GHOST`]) instead of removing it from the directory.
    #[inline]
    pub fn bury(&mut self, key: Key, tag: u32) {
        debug_assert!(tag < GHOST);
        let v = self.map.get_mut(key).expect("buried key is resident");
        debug_assert!(*v & GHOST == 0, "buried key is already a ghost");
        *v = GHOST | tag;
        self.buried = true;
    }

    /// Changes the tag of ghost `key`.
    #[inline]
    pub fn retag(&mut self, key: Key, tag: u32) {
        let v = self.map.get_mut(key).expect("retagged key is a ghost");
        debug_assert!(*v & GHOST != 0);
        *v = GHOST | tag;
    }

    /// A hint: starts loading the directory bucket of `key` (a ghost the policy will
    /// [`Directory::forget`] soon), so that removal does not wait for memory.
    #[inline]
    pub fn prefetch(&self, key: Key) {
        self.map.prefetch(crate::dirmap::Hashed::new(key));
    }

    /// Drops ghost `key` from the directory.
    #[inline]
    pub fn forget(&mut self, key: Key) {
        let v = self.map.remove(key);
        debug_assert!(v.is_some_and(|v| v & GHOST != 0), "forgot a non-ghost");
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
    fn set_capacity(&mut self, capacity: usize, dir: &mut Directory<'_>) {
        (**self).set_capacity(capacity, dir)
    }
    #[inline]
    fn on_hit(&mut self, slot: Slot, key: Key) {
        (**self).on_hit(slot, key)
    }
    #[inline]
    fn on_miss(&mut self, key: Key, ghost: Option<u32>) {
        (**self).on_miss(key, ghost)
    }
    #[inline]
    fn on_insert(&mut self, slot: Slot, key: Key) {
        (**self).on_insert(slot, key)
    }
    #[inline]
    fn evict(&mut self, dir: &mut Directory<'_>) -> Slot {
        (**self).evict(dir)
    }
    #[inline]
    fn on_remove(&mut self, slot: Slot, key: Key) {
        (**self).on_remove(slot, key)
    }
    fn on_reconstruct(&mut self, slot: Slot, key: Key, history: BlockHistory) {
        (**self).on_reconstruct(slot, key, history)
    }
    #[inline]
    fn prefetch(&self, slot: Slot) {
        (**self).prefetch(slot)
    }
    #[inline]
    fn prefetch_neighbours(&self, slot: Slot) {
        (**self).prefetch_neighbours(slot)
    }
    #[inline]
    fn next_victim(&self) -> Option<Slot> {
        (**self).next_victim()
    }
    #[inline]
    fn victim_after(&self, slot: Slot) -> Option<Slot> {
        (**self).victim_after(slot)
    }
    #[inline]
    fn prefetches_hits(&self) -> bool {
        (**self).prefetches_hits()
    }
}
