//! ARC, the Adaptive Replacement Cache (Megiddo and Modha, "ARC: A Self-Tuning, Low
//! Overhead Replacement Cache", FAST '03).
//!
//! Owns: two LRU lists of resident slots, T1 (seen once recently) and T2 (seen at least
//! twice), two LRU lists of evicted keys, B1 and B2 (their ghosts), and the adaptive
//! target `p` for T1's size.
//!
//! ## Algorithm (for a cache of `c` blocks)
//! * hit in T1 or T2: move to the front of T2;
//! * miss on a key in B1 (a recency ghost): grow `p` by `max(|B2|/|B1|, 1)` (at most `c`),
//!   drop the ghost, REPLACE, insert at the front of T2;
//! * miss on a key in B2 (a frequency ghost): shrink `p` by `max(|B1|/|B2|, 1)` (at least
//!   0), drop the ghost, REPLACE, insert at the front of T2;
//! * miss on a new key: if `|T1|+|B1| = c`, drop B1's LRU and REPLACE, or, when B1 is
//!   empty, evict T1's LRU without a ghost; otherwise, if the directory holds `2c` keys,
//!   drop B2's LRU, then REPLACE; insert at the front of T1;
//! * REPLACE: if T1 is non-empty and `|T1| > p` (or `|T1| = p` and the key was in B2), move
//!   T1's LRU to B1's front, else move T2's LRU to B2's front.
//!
//! The ghost lists remember about `c` keys, so a scan (one pass over many new keys) only
//! churns T1 and B1 while T2 keeps the blocks that were reused.
//!
//! ## Where it shines and where it fails
//! Mixed workloads whose balance of recency and frequency changes over time: `p` follows
//! the mix without tuning, and a one-time scan cannot flush T2. It costs about twice LRU's
//! metadata (a ghost key per resident block). It fails on loops slightly larger than the
//! cache (like LRU, every access misses) and adapts slowly when the working set moves
//! faster than the ghosts can learn (LIRS and S3-FIFO do better there).
//!
//! ## Data structure
//! T1 and T2 are intrusive lists over one link array indexed by slot, with a byte per slot
//! saying which. The ghosts live in the cache's directory ([`Directory`]): evicting a block
//! turns its directory entry into a ghost whose tag holds the list (B1 or B2) and its
//! sequence number in that list's [`GhostRing`], a FIFO of keys with out-of-order removal
//! (ghosts are never reordered, only pushed, dropped at the back, or removed on a hit). So
//! the cache's single lookup per access also finds a ghost and its list, a demotion
//! rewrites the victim's entry in place instead of removing it from one map and adding it
//! to another, and dropping the oldest ghost advances the ring and removes that one key
//! from the directory ([`Directory::forget`]), as the paper bounds its lists: one ghost
//! at a time, never a sweep of the whole directory. So the directory holds at most `2c`
//! keys and never grows or rehashes past its first size for `2c`. A miss costs the
//! directory one lookup, one rewrite, one insertion and at most one removal (a dropped
//! ghost), against three more operations in a separate ghost map. (It used to leave
//! dropped ghosts behind, stale, and sweep the whole directory once a capacity's worth
//! had accumulated, then rebuild the table: 35 % of a replay's time.)
//!
//! ## Why it is fast
//! The replay is bound by memory loads of tables larger than the core's caches, so each
//! step reads as few cache lines as it can and names the next ones early:
//! * a ghost hit is believed on its directory tag alone: every ghost tag names a live
//!   cell of its ring (the ring and the directory drop a ghost together), so reading the
//!   cell to check its key, a miss on a megabyte-sized ring, bought nothing (it was a
//!   tenth of a replay's CPU time in `perf`; a debug build still checks it);
//! * [`EvictionPolicy::victim_after`] names the neighbour of a victim in its own list,
//!   which is what REPLACE takes next unless `p` moves, so the cache starts loading the
//!   key, links and directory entry of the victim after next (5 % less CPU time on
//!   `lachesis bench sim`'s Zipf trace, against a few more instructions);
//! * a hit's prefetch loads the slot's list byte with its links.
//!
//! ## Hooks and libCacheSim
//! `on_miss` sees the incoming key and its ghost tag, so a ghost hit adapts `p` and
//! removes the ghost before the cache calls `evict`, and `evict` knows whether it
//! runs REPLACE (ghost hit) or the new-key case. An `evict` with no miss before it (the
//! cache shrinks) runs REPLACE alone; `set_capacity` then trims the ghosts to the new
//! `c` and clamps `p`.
//!
//! Semantics match libCacheSim's `ARC` (`p` is a float as there, and with unit-size blocks
//! its size tests reduce to the paper's counts); on the cloudPhysics trace the miss ratios
//! are identical at every size tested (see `tests/libcachesim_parity_adaptive.rs`). One
//! point from libCacheSim that the paper leaves open: REPLACE also takes T1's LRU when T2
//! is empty.

use crate::ghost::{GhostRing, SEQ_MASK};
use crate::list::{Links, List, NIL};
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::prefetch::prefetch_at;
use crate::PolicyError;

/// Which list a resident slot is in.
const IN_T1: u8 = 0;
const IN_T2: u8 = 1;

/// Bit of a ghost's directory tag (above its 30-bit sequence number) set for B2.
const B2_TAG: u32 = 1 << 30;

/// The ring a ghost tag points into.
#[inline]
fn ring_of<'a>(b1: &'a GhostRing, b2: &'a GhostRing, tag: u32) -> &'a GhostRing {
    if tag & B2_TAG == 0 {
        b1
    } else {
        b2
    }
}

/// What the pending miss (between `on_miss` and `on_insert`) was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// No miss is pending: an `evict` now is a shrink.
    None,
    /// A key in neither ghost list.
    New,
    /// A key that was in B1.
    GhostB1,
    /// A key that was in B2.
    GhostB2,
}

/// Adaptive Replacement Cache.
#[derive(Debug)]
pub struct Arc {
    capacity: usize,
    /// Target size of T1.
    p: f64,
    links: Links,
    t1: List,
    t2: List,
    which: Vec<u8>,
    /// B1's keys; each has a directory tag with its sequence number here.
    b1: GhostRing,
    /// B2's keys; each has a directory tag with its sequence number here and [`B2_TAG`].
    b2: GhostRing,
    pending: Pending,
}

impl Default for Arc {
    fn default() -> Self {
        Arc {
            capacity: 0,
            p: 0.0,
            links: Links::default(),
            t1: List::default(),
            t2: List::default(),
            which: Vec::new(),
            b1: GhostRing::default(),
            b2: GhostRing::default(),
            pending: Pending::None,
        }
    }
}

impl Arc {
    /// Builds from a parameter string (ARC takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }

    /// The current target size of T1 (for tests and reports).
    pub fn target(&self) -> f64 {
        self.p
    }

    /// Sizes of T1, T2, B1, B2.
    pub fn sizes(&self) -> [usize; 4] {
        [self.t1.len(), self.t2.len(), self.b1.len(), self.b2.len()]
    }

    /// Moves T1's or T2's LRU block to its ghost list and returns its slot.
    #[inline]
    fn demote(&mut self, from_t1: bool, dir: &mut Directory<'_>) -> Slot {
        let (list, ghost, tag) = if from_t1 {
            (&mut self.t1, &mut self.b1, 0)
        } else {
            (&mut self.t2, &mut self.b2, B2_TAG)
        };
        let slot = list.pop_back(&mut self.links).expect("non-empty list");
        let key = dir.key_of(slot);
        let seq = ghost.push(key, |k, s| dir.retag(k, tag | s));
        dir.bury(key, tag | seq);
        slot
    }

    /// Drops the LRU ghost of B1 (or B2) and its directory entry.
    #[inline]
    fn drop_ghost(&mut self, from_b1: bool, dir: &mut Directory<'_>) {
        let ring = if from_b1 { &mut self.b1 } else { &mut self.b2 };
        if let Some(key) = ring.pop_back() {
            // A ghost's directory entry lives exactly as long as the ring holds it: a
            // ghost hit removes it from the ring (`on_miss`) before the cache overwrites
            // or drops the entry, so the key popped here is still a ghost there.
            dir.forget(key);
            // The next drop from this list removes its new back: start loading it.
            if let Some(next) = ring.back() {
                dir.prefetch(next);
            }
        }
    }

    /// REPLACE of the paper: demote T1's or T2's LRU block, depending on `p`.
    #[inline]
    fn replace(&mut self, in_b2: bool, dir: &mut Directory<'_>) -> Slot {
        let t1 = self.t1.len() as f64;
        let take_t1 =
            (!self.t1.is_empty() && (t1 > self.p || (t1 == self.p && in_b2))) || self.t2.is_empty();
        self.demote(take_t1, dir)
    }
}

impl EvictionPolicy for Arc {
    fn name(&self) -> String {
        "arc".into()
    }

    #[inline]
    fn evict(&mut self, dir: &mut Directory<'_>) -> Slot {
        debug_assert!(!self.t1.is_empty() || !self.t2.is_empty());
        match self.pending {
            Pending::GhostB1 => self.replace(false, dir),
            Pending::GhostB2 => self.replace(true, dir),
            Pending::None => self.replace(false, dir),
            Pending::New => {
                let l1 = self.t1.len() + self.b1.len();
                if l1 + 1 > self.capacity {
                    if !self.b1.is_empty() {
                        self.drop_ghost(true, dir);
                        self.replace(false, dir)
                    } else if !self.t1.is_empty() {
                        // T1 alone fills the cache: evict its LRU without a ghost.
                        self.t1.pop_back(&mut self.links).expect("non-empty T1")
                    } else {
                        self.replace(false, dir)
                    }
                } else {
                    let total = l1 + self.t2.len() + self.b2.len();
                    if total >= 2 * self.capacity && !self.b2.is_empty() {
                        self.drop_ghost(false, dir);
                    }
                    self.replace(false, dir)
                }
            }
        }
    }

    fn set_capacity(&mut self, capacity: usize, dir: &mut Directory<'_>) {
        self.capacity = capacity;
        let n = capacity.min(1 << 24);
        self.links.reserve(n);
        if self.which.len() < n {
            self.which.resize(n, IN_T1);
        }
        self.b1.reserve(n);
        self.b2.reserve(n);
        self.p = self.p.min(capacity as f64);
        // Keep the directory invariants: |T1|+|B1| <= c and the total <= 2c.
        while self.t1.len() + self.b1.len() > capacity && !self.b1.is_empty() {
            self.drop_ghost(true, dir);
        }
        while self.t1.len() + self.t2.len() + self.b1.len() + self.b2.len() > 2 * capacity {
            if !self.b2.is_empty() {
                self.drop_ghost(false, dir);
            } else if !self.b1.is_empty() {
                self.drop_ghost(true, dir);
            } else {
                break;
            }
        }
    }

    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let w = &mut self.which[slot as usize];
        if *w == IN_T1 {
            *w = IN_T2;
            self.t1.remove(&mut self.links, slot);
            self.t2.push_front(&mut self.links, slot);
        } else {
            self.t2.move_to_front(&mut self.links, slot);
        }
    }

    #[inline]
    fn on_miss(&mut self, key: Key, ghost: Option<u32>) {
        // Every ghost tag in the directory names a live cell of its ring (see
        // `drop_ghost`), so the tag alone tells the list: reading the ring's cell to
        // check its key was a cache miss on a megabyte-sized ring, a tenth of a replay.
        self.pending = match ghost {
            Some(tag) => {
                debug_assert!(ring_of(&self.b1, &self.b2, tag).holds(tag & SEQ_MASK, key));
                let (b1, b2) = (self.b1.len() as f64, self.b2.len() as f64);
                if tag & B2_TAG == 0 {
                    let delta = (b2 / b1).max(1.0);
                    self.p = (self.p + delta).min(self.capacity as f64);
                    self.b1.remove(tag & SEQ_MASK);
                    Pending::GhostB1
                } else {
                    let delta = (b1 / b2).max(1.0);
                    self.p = (self.p - delta).max(0.0);
                    self.b2.remove(tag & SEQ_MASK);
                    Pending::GhostB2
                }
            }
            None => Pending::New,
        };
    }

    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.which.len() <= i {
            let n = (i + 1).max(self.which.len() * 2);
            self.which.resize(n, IN_T1);
        }
        if matches!(self.pending, Pending::GhostB1 | Pending::GhostB2) {
            self.which[i] = IN_T2;
            self.t2.push_front(&mut self.links, slot);
        } else {
            self.which[i] = IN_T1;
            self.t1.push_front(&mut self.links, slot);
        }
        self.pending = Pending::None;
    }

    /// A switched-in block that was hit since it entered goes to T2 (seen twice).
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        if h.hits > 0 {
            self.pending = Pending::GhostB1;
        }
        self.on_insert(slot, key);
    }

    /// The slot's links and its list byte (a hit reads both).
    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.links.prefetch(slot);
        prefetch_at(&self.which, slot as usize);
    }
    #[inline]
    fn prefetch_neighbours(&self, slot: Slot) {
        self.links.prefetch_neighbours(slot);
    }
    #[inline]
    fn prefetches_hits(&self) -> bool {
        true
    }
    /// T1's LRU block when T1 is above its target, else T2's (what `replace` takes when
    /// no ghost was hit; a hint only).
    #[inline]
    fn next_victim(&self) -> Option<Slot> {
        if (!self.t1.is_empty() && self.t1.len() as f64 > self.p) || self.t2.is_empty() {
            self.t1.back()
        } else {
            self.t2.back()
        }
    }
    /// The neighbour of `slot` towards the front of its own list (T1 or T2, whichever
    /// [`EvictionPolicy::next_victim`] named): what REPLACE takes next from the same
    /// list. Needs only `slot`'s links, not which list it is in.
    #[inline]
    fn victim_after(&self, slot: Slot) -> Option<Slot> {
        let prev = self.links.get(slot).prev;
        (prev != NIL).then_some(prev)
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        if self.which[slot as usize] == IN_T1 {
            self.t1.remove(&mut self.links, slot);
        } else {
            self.t2.remove(&mut self.links, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{miss_count, pinned};
    use crate::BlockCache;

    #[test]
    fn scan_does_not_flush_frequent_blocks() {
        // Capacity 4. Blocks 1 and 2 are used twice (they enter T2), then a scan of 20 new
        // keys passes through T1/B1 only: 1 and 2 still hit afterwards.
        let mut keys = vec![1, 2, 1, 2];
        keys.extend(100..120);
        keys.extend([1, 2]);
        // 2 cold misses + 20 scan misses; the final 1 and 2 hit.
        assert_eq!(miss_count("arc", 4, &keys), 22);
        // LRU loses both to the scan.
        assert_eq!(miss_count("lru", 4, &keys), 24);
    }

    #[test]
    fn ghost_hit_in_b1_grows_target_and_enters_t2() {
        let mut c = BlockCache::new(2, Arc::default());
        for k in [1, 2, 3] {
            c.access(k, |_, _| {});
        }
        // |T1| + |B1| = c and B1 is empty: 3 evicted T1's LRU (1) without a ghost.
        assert_eq!(c.policy().sizes(), [2, 0, 0, 0]);
        let mut c = BlockCache::new(2, Arc::default());
        for k in [1, 1, 2, 3] {
            c.access(k, |_, _| {}); // 1 in T2; 3 makes REPLACE move 2 (T1's LRU) to B1
        }
        assert_eq!(c.policy().sizes(), [1, 1, 1, 0]);
        assert_eq!(c.policy().target(), 0.0);
        c.access(2, |_, _| {}); // B1 hit: p = 1; REPLACE (|T1| = p) moves 1 to B2
        assert_eq!(c.policy().target(), 1.0);
        assert_eq!(c.policy().sizes(), [1, 1, 0, 1]);
        assert!(c.lookup(2).is_some() && c.lookup(3).is_some());
        c.access(1, |_, _| {}); // B2 hit: p = 0; REPLACE moves 3 (T1) to B1
        assert_eq!(c.policy().target(), 0.0);
        assert_eq!(c.policy().sizes(), [0, 2, 1, 0]);
    }

    #[test]
    fn hand_computed_sequence() {
        // Capacity 2: 1 2 (T1=[2,1]) 1 (hit -> T2=[1], T1=[2]) 3 (new: |T1|+|B1|=1 < 2,
        // total 2 < 4 -> REPLACE: |T1|=1 > p=0 -> 2 to B1; T1=[3]) 2 (B1 hit: p=1;
        // REPLACE: |T1|=1 = p, not from B2 -> T2's LRU 1 to B2; 2 into T2) 1 (B2 hit:
        // p = 0; REPLACE: |T1|=1 > 0 -> 3 to B1; 1 into T2) 3 (B1 hit) -> misses 1 2 3 2 1 3.
        assert_eq!(miss_count("arc", 2, &[1, 2, 1, 3, 2, 1, 3]), 6);
    }

    #[test]
    fn shrink_without_miss_and_regrow() {
        let mut c = BlockCache::new(8, Arc::default());
        for k in 0..40u64 {
            c.access(k % 12, |_, _| {});
        }
        let mut evicted = 0;
        c.resize(3, |_, _| evicted += 1);
        assert_eq!((c.len(), evicted), (3, 5));
        let s = c.policy().sizes();
        assert!(s[0] + s[2] <= 3 && s.iter().sum::<usize>() <= 6, "{s:?}");
        assert!(c.policy().target() <= 3.0);
        c.resize(8, |_, _| {});
        for k in 0..40u64 {
            c.access(k % 5, |_, _| {});
        }
        assert_eq!(c.len(), 5);
    }

    proptest::proptest! {
        /// At a fixed capacity the paper's directory invariants hold after every access:
        /// |T1|+|T2| <= c, |T1|+|B1| <= c, the directory holds at most 2c keys, 0 <= p <= c.
        #[test]
        fn directory_invariants(cap in 1usize..16, keys in proptest::collection::vec(0u64..48, 1..600)) {
            let mut c = BlockCache::new(cap, Arc::default());
            for k in keys {
                c.access(k, |_, _| {});
                let [t1, t2, b1, b2] = c.policy().sizes();
                let p = c.policy().target();
                proptest::prop_assert!(t1 + t2 == c.len() && t1 + t2 <= cap);
                proptest::prop_assert!(t1 + b1 <= cap);
                proptest::prop_assert!(t1 + t2 + b1 + b2 <= 2 * cap);
                proptest::prop_assert!((0.0..=cap as f64).contains(&p));
            }
        }
    }

    #[test]
    fn contract_holds() {
        pinned::contract("arc");
    }
}
