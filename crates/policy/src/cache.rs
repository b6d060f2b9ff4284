//! The block cache's bookkeeping and the lookup loop, written once and shared by the
//! simulator and the live cache node (which stores each slot's data in an arena indexed by
//! the same [`Slot`]).
//!
//! [`BlockCache`] owns the directory (key to slot), the key of every slot, the free slots,
//! the capacity, and — when history is on — a last-access stamp per slot, which is SOPA's
//! LRU history list in a cheaper form: ordering resident slots by stamp gives the list,
//! oldest first, without touching a linked list on every hit. It asks its
//! [`EvictionPolicy`] which block leaves and its [`AdmissionPolicy`] whether a missed block
//! enters.
//!
//! The directory also holds the ghosts of a policy that keeps them there (ARC, see
//! [`Directory`]): a value with the [`GHOST`] bit is a ghost's tag, not a slot, so one
//! lookup per access tells a hit, a ghost hit and a cold miss apart. The resident count is
//! therefore `keys.len() - free.len()`, not the directory's length.
//!
//! Invariant: after any call returns, `len() <= capacity()`.

use crate::admission::AdmissionPolicy;
use crate::keymap::KeyMap;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot, GHOST};

type DirMap = KeyMap<u32>;

/// The outcome of one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The block was resident in this slot.
    Hit(Slot),
    /// The block was not resident and now is, in this slot.
    Inserted(Slot),
    /// The block was not resident and was not admitted (or the capacity is zero).
    Bypassed,
}

impl Access {
    /// Whether the access was a hit.
    #[inline]
    pub fn is_hit(self) -> bool {
        matches!(self, Access::Hit(_))
    }
}

/// A cache of fixed-size blocks with a pluggable eviction policy `P`.
pub struct BlockCache<P: EvictionPolicy = Box<dyn EvictionPolicy>> {
    dir: DirMap,
    keys: Vec<Key>,
    free: Vec<Slot>,
    capacity: usize,
    policy: P,
    admission: Option<Box<dyn AdmissionPolicy>>,
    /// With history: per slot, the last access and the hits since entry.
    stamps: Option<Vec<BlockHistory>>,
    clock: u64,
}

impl<P: EvictionPolicy> BlockCache<P> {
    /// An empty cache of `capacity` blocks evicting with `policy`, without history.
    pub fn new(capacity: usize, mut policy: P) -> Self {
        let reserve = capacity.min(1 << 24);
        let mut dir = DirMap::default();
        dir.reserve(reserve);
        policy.set_capacity(capacity, &mut Directory::new(&mut dir, &[]));
        BlockCache {
            dir,
            keys: Vec::with_capacity(reserve),
            free: Vec::new(),
            capacity,
            policy,
            admission: None,
            stamps: None,
            clock: 0,
        }
    }

    /// Keeps last-access stamps so the policy can be switched by reconstruction (costs 8
    /// bytes per block and one store per access).
    pub fn with_history(mut self) -> Self {
        self.stamps = Some(vec![BlockHistory::default(); self.keys.len()]);
        self
    }

    /// Places missed blocks only when `admission` says so (demand placement without one).
    pub fn with_admission(mut self, admission: Box<dyn AdmissionPolicy>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Capacity in blocks.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of resident blocks.
    #[inline]
    pub fn len(&self) -> usize {
        self.keys.len() - self.free.len()
    }

    /// Whether no block is resident.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The eviction policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The admission policy, if any.
    pub fn admission(&self) -> Option<&dyn AdmissionPolicy> {
        self.admission.as_deref()
    }

    /// The slot of `key` if resident, without counting an access.
    #[inline]
    pub fn lookup(&self, key: Key) -> Option<Slot> {
        self.dir.get(&key).copied().filter(|&v| v & GHOST == 0)
    }

    /// The key stored in a resident `slot`.
    #[inline]
    pub fn key_of(&self, slot: Slot) -> Key {
        self.keys[slot as usize]
    }

    /// Accesses `key`: a hit updates the policy; a miss may admit the block, evicting as
    /// many blocks as needed first. `on_evict(key, slot)` is called for every evicted block
    /// before its slot is reused, so the owner of the data can write it back.
    #[inline]
    pub fn access(&mut self, key: Key, mut on_evict: impl FnMut(Key, Slot)) -> Access {
        self.clock += 1;
        let ghost = match self.dir.get(&key) {
            Some(&v) if v & GHOST != 0 => Some(v & !GHOST),
            Some(&slot) => return self.hit(slot, key),
            None => None,
        };
        self.policy.on_miss(key, ghost);
        let admitted = match self.admission.as_mut() {
            Some(a) => a.access(key, false),
            None => true,
        };
        if !admitted || self.capacity == 0 {
            if ghost.is_some() {
                // The policy dropped its ghost in `on_miss`.
                self.dir.remove(&key);
            }
            return Access::Bypassed;
        }
        while self.len() >= self.capacity {
            let victim = self.evict_one();
            on_evict(self.keys[victim as usize], victim);
        }
        let slot = self.insert_new(key);
        std::hint::black_box(self.warm_victim());
        Access::Inserted(slot)
    }

    /// A hint for a caller that knows its next keys: reads what an access to `key` will
    /// read first (its directory entry and, if resident, the policy's metadata of its slot)
    /// and changes nothing. Called a few keys ahead of the accesses (as
    /// [`crate::sim::replay_stream`] does), it overlaps those memory loads with the work on
    /// earlier keys instead of waiting for each in turn. The value means nothing; pass it
    /// to [`std::hint::black_box`].
    #[inline]
    pub fn warm(&self, key: Key) -> u64 {
        match self.dir.get(&key) {
            Some(&v) if v & GHOST == 0 => self.policy.warm(v) ^ v as u64,
            Some(&v) => v as u64,
            None => 0,
        }
    }

    /// The first half of [`BlockCache::warm`]: reads only `key`'s directory entry. Called
    /// further ahead than `warm`, it splits the chain of dependent loads of one lookup
    /// (directory entry, then the slot's metadata) over two requests' time, so no single
    /// request waits for both.
    #[inline]
    pub fn warm_dir(&self, key: Key) -> u64 {
        self.dir.get(&key).map_or(0, |&v| v as u64)
    }

    /// Reads the key and directory entry of the policy's likely next victim (see
    /// [`EvictionPolicy::next_victim`]) and the key and metadata of the victim after it
    /// ([`EvictionPolicy::victim_after`]), so the next miss does not wait for them. The
    /// loads for the victim after next do not depend on the directory probe of the next
    /// one, so they run side by side; by the next miss its key is in cache and its
    /// directory probe is one load, not a chain of three.
    #[inline]
    fn warm_victim(&self) -> u64 {
        match self.policy.next_victim() {
            Some(v) => {
                let k = self.keys[v as usize];
                let after = match self.policy.victim_after(v) {
                    Some(w) => self.keys[w as usize] ^ self.policy.warm(w),
                    None => 0,
                };
                self.dir.get(&k).map_or(k, |&s| s as u64) ^ self.policy.warm(v) ^ after
            }
            None => 0,
        }
    }

    #[inline]
    /// Counts a hit on a resident `slot` found by [`BlockCache::lookup`]: what
    /// [`BlockCache::access`] does for a resident key, without probing the directory again.
    pub fn access_slot(&mut self, slot: Slot) -> Access {
        self.clock += 1;
        let key = self.keys[slot as usize];
        self.hit(slot, key)
    }

    fn hit(&mut self, slot: Slot, key: Key) -> Access {
        if let Some(a) = self.admission.as_mut() {
            a.access(key, true);
        }
        self.policy.on_hit(slot, key);
        if let Some(st) = self.stamps.as_mut() {
            let h = &mut st[slot as usize];
            h.last_access = self.clock;
            h.hits = h.hits.saturating_add(1);
        }
        Access::Hit(slot)
    }

    /// Removes the policy's victim from the directory and returns its (now free) slot.
    #[inline]
    fn evict_one(&mut self) -> Slot {
        let mut dir = Directory::new(&mut self.dir, &self.keys);
        let victim = self.policy.evict(&mut dir);
        let buried = dir.buried();
        let vkey = self.keys[victim as usize];
        if buried {
            debug_assert!(self.dir.get(&vkey).is_some_and(|&v| v & GHOST != 0));
        } else {
            let removed = self.dir.remove(&vkey);
            debug_assert_eq!(
                removed,
                Some(victim),
                "policy evicted a slot that is not resident"
            );
        }
        if let Some(a) = self.admission.as_mut() {
            a.on_evict(vkey);
        }
        self.free.push(victim);
        victim
    }

    #[inline]
    fn insert_new(&mut self, key: Key) -> Slot {
        let slot = match self.free.pop() {
            Some(s) => {
                self.keys[s as usize] = key;
                s
            }
            None => {
                self.keys.push(key);
                if let Some(st) = self.stamps.as_mut() {
                    st.push(BlockHistory::default());
                }
                (self.keys.len() - 1) as Slot
            }
        };
        if let Some(st) = self.stamps.as_mut() {
            st[slot as usize] = BlockHistory {
                last_access: self.clock,
                hits: 0,
            };
        }
        self.dir.insert(key, slot);
        self.policy.on_insert(slot, key);
        slot
    }

    /// Drops `key` if resident (trim, invalidation) and returns the slot it had.
    pub fn remove(&mut self, key: Key) -> Option<Slot> {
        let slot = match self.dir.entry(key) {
            hashbrown::hash_map::Entry::Occupied(e) if *e.get() & GHOST == 0 => e.remove(),
            _ => return None,
        };
        self.policy.on_remove(slot, key);
        self.free.push(slot);
        Some(slot)
    }

    /// Changes the capacity online. Shrinking evicts the policy's victims until the cache
    /// fits, reporting each with `on_evict` before the call returns; growing evicts nothing.
    pub fn resize(&mut self, capacity: usize, mut on_evict: impl FnMut(Key, Slot)) {
        while self.len() > capacity {
            let victim = self.evict_one();
            on_evict(self.keys[victim as usize], victim);
        }
        self.capacity = capacity;
        self.policy
            .set_capacity(capacity, &mut Directory::new(&mut self.dir, &self.keys));
    }

    /// Resident blocks ordered by last access, oldest first (SOPA's LRU history list).
    /// Without history the order is by slot.
    pub fn history(&self) -> Vec<(Slot, Key)> {
        self.history_with_meta()
            .into_iter()
            .map(|(s, k, _)| (s, k))
            .collect()
    }

    /// Like [`BlockCache::history`], with each block's remembered history (default values
    /// without history).
    pub fn history_with_meta(&self) -> Vec<(Slot, Key, BlockHistory)> {
        let meta = |s: Slot| {
            self.stamps
                .as_ref()
                .map_or(BlockHistory::default(), |st| st[s as usize])
        };
        let mut v: Vec<(Slot, Key, BlockHistory)> =
            self.resident().map(|(k, s)| (s, k, meta(s))).collect();
        v.sort_unstable_by_key(|&(s, _, h)| (h.last_access, s));
        v
    }

    /// Switches the eviction policy online by reconstruction: the resident blocks are
    /// replayed, oldest access first, into `new`'s `on_reconstruct` (by default `on_insert`). No block is dropped or
    /// moved and no data is written. Returns the old policy.
    pub fn switch_policy(&mut self, mut new: P) -> P {
        if self.dir.len() > self.len() {
            // The old policy's ghosts mean nothing to the new one.
            self.dir.retain(|_, v| *v & GHOST == 0);
        }
        new.set_capacity(
            self.capacity,
            &mut Directory::new(&mut self.dir, &self.keys),
        );
        for (slot, key, history) in self.history_with_meta() {
            new.on_reconstruct(slot, key, history);
        }
        std::mem::replace(&mut self.policy, new)
    }

    /// Iterates over resident `(key, slot)` pairs in no particular order.
    pub fn resident(&self) -> impl Iterator<Item = (Key, Slot)> + '_ {
        self.dir
            .iter()
            .filter(|&(_, &s)| s & GHOST == 0)
            .map(|(&k, &s)| (k, s))
    }
}
