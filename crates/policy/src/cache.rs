//! The block cache's bookkeeping and the lookup loop, written once and shared by the
//! simulator and the live cache node (which stores each slot's data in an arena indexed by
//! the same [`Slot`]).
//!
//! [`BlockCache`] owns the directory (key to slot, a [`DirMap`]: one cache line per probe,
//! prefetchable by key), the key of every slot, the free slots, the capacity, and — when
//! history is on — a last-access stamp per slot, which is SOPA's LRU history list in a
//! cheaper form: ordering resident slots by stamp gives the list, oldest first, without
//! touching a linked list on every hit. It asks its [`EvictionPolicy`] which block leaves
//! and its [`AdmissionPolicy`] whether a missed block enters. After each insertion it
//! prefetches what the next evictions will read (`prefetch_victims`), and a caller that
//! knows its next keys can prefetch their lookups ([`BlockCache::prefetch`]).
//!
//! The directory also holds the ghosts of a policy that keeps them there (ARC, see
//! [`Directory`]): a value with the [`GHOST`] bit is a ghost's tag, not a slot, so one
//! lookup per access tells a hit, a ghost hit and a cold miss apart. The resident count is
//! therefore `keys.len() - free.len()`, not the directory's length.
//!
//! Invariant: after any call returns, `len() <= capacity()`.

use crate::admission::AdmissionPolicy;
use crate::dirmap::{DirMap, Hashed};
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot, GHOST};
use crate::prefetch::prefetch_at;

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
        self.dir.get(key).filter(|&v| v & GHOST == 0)
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
    pub fn access(&mut self, key: Key, on_evict: impl FnMut(Key, Slot)) -> Access {
        self.access_hashed(Hashed::new(key), on_evict)
    }

    /// [`BlockCache::access`] of a key whose hash is already computed (by a caller that
    /// hashed it to [`BlockCache::prefetch`] it).
    #[inline]
    pub fn access_hashed(&mut self, k: Hashed, mut on_evict: impl FnMut(Key, Slot)) -> Access {
        let key = k.key();
        self.clock += 1;
        let ghost = match self.dir.get_hashed(k) {
            Some(v) if v & GHOST != 0 => Some(v & !GHOST),
            Some(slot) => return self.hit(slot, key),
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
                self.dir.remove(key);
            }
            return Access::Bypassed;
        }
        while self.len() >= self.capacity {
            let victim = self.evict_one();
            on_evict(self.keys[victim as usize], victim);
        }
        let slot = self.insert_new(k);
        self.prefetch_victims();
        Access::Inserted(slot)
    }

    /// A hint for a caller that knows its next keys (as [`crate::sim::replay_stream`]
    /// does): starts loading the directory buckets a lookup of `key` reads
    /// ([`crate::prefetch`]), which needs only the key's hash, and changes nothing. Called
    /// some requests ahead of the access, the load overlaps with the work on the requests
    /// between instead of being waited for.
    #[inline]
    pub fn prefetch(&self, key: Hashed) {
        self.dir.prefetch(key);
    }

    /// The second stage of [`BlockCache::prefetch`], called later for the same key (its
    /// directory bucket is in cache by then): if `key` is resident in one of the two
    /// buckets the first stage loaded ([`DirMap::peek`]: no probe loop, 5 % fewer
    /// instructions per LRU request than a full lookup), starts loading the
    /// policy's metadata a hit on its slot touches ([`EvictionPolicy::prefetch`]) and
    /// returns the slot, for the third stage.
    #[inline]
    pub fn prefetch_slot(&self, key: Hashed) -> Option<Slot> {
        // A hint needs no full lookup: a key past its first two buckets is not prefetched.
        let slot = self.dir.peek(key).filter(|&v| v & GHOST == 0)?;
        self.policy.prefetch(slot);
        self.prefetch_stamp(slot);
        Some(slot)
    }

    /// The third stage, later again: [`EvictionPolicy::prefetch_neighbours`] of the slot
    /// [`BlockCache::prefetch_slot`] returned. A slot that has changed hands since is
    /// harmless (it is a hint).
    #[inline]
    pub fn prefetch_neighbours(&self, slot: Slot) {
        self.policy.prefetch_neighbours(slot);
    }

    /// A hint: the key the next eviction would most likely remove
    /// ([`EvictionPolicy::next_victim`]), for an owner that sends victims elsewhere (a
    /// lower level) and wants to start loading where it will put them. `None` when the
    /// policy cannot say cheaply or the cache is not full.
    #[inline]
    pub fn next_victim_key(&self) -> Option<Key> {
        if self.len() < self.capacity {
            return None;
        }
        let v = self.policy.next_victim()?;
        self.keys.get(v as usize).copied()
    }

    /// Prepares later evictions after an insertion, walking from the policy's likely next
    /// victim `v` ([`EvictionPolicy::next_victim`]) towards the front
    /// ([`EvictionPolicy::victim_after`]): `w`, the victim after `v`, gets its directory
    /// bucket loaded (its key was loaded by the call one insertion earlier, when it was
    /// `x`), and `x`, the victim after `w`, gets its key and metadata loaded
    /// ([`crate::prefetch`]). So each eviction finds its victim's key, metadata and
    /// directory bucket in cache, each started at least one miss earlier, and nothing here
    /// waits for a load that was not started by an earlier call. A policy that cannot name
    /// the victim after next gets the next victim's directory bucket.
    #[inline]
    fn prefetch_victims(&self) {
        let Some(v) = self.policy.next_victim() else {
            return;
        };
        match self.policy.victim_after(v) {
            Some(w) => {
                self.dir.prefetch(Hashed::new(self.keys[w as usize]));
                if let Some(x) = self.policy.victim_after(w) {
                    prefetch_at(&self.keys, x as usize);
                    self.policy.prefetch(x);
                }
            }
            None => {
                self.dir.prefetch(Hashed::new(self.keys[v as usize]));
                self.policy.prefetch(v);
            }
        }
        // The next insertion takes the victim's slot and stamps it.
        self.prefetch_stamp(v);
    }

    /// Starts loading `slot`'s history stamp (a hit or an insertion into the slot writes
    /// it), when the cache keeps history.
    #[inline]
    fn prefetch_stamp(&self, slot: Slot) {
        if let Some(st) = self.stamps.as_ref() {
            prefetch_at(st, slot as usize);
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

    #[inline(always)]
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
            debug_assert!(self.dir.get(vkey).is_some_and(|v| v & GHOST != 0));
        } else {
            let removed = self.dir.remove(vkey);
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
    fn insert_new(&mut self, k: Hashed) -> Slot {
        let key = k.key();
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
        self.dir.insert_hashed(k, slot);
        self.policy.on_insert(slot, key);
        slot
    }

    /// Drops `key` if resident (trim, invalidation) and returns the slot it had.
    pub fn remove(&mut self, key: Key) -> Option<Slot> {
        let slot = match self.dir.get(key) {
            Some(s) if s & GHOST == 0 => s,
            _ => return None,
        };
        self.dir.remove(key);
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
        self.dir.iter().filter(|&(_, s)| s & GHOST == 0)
    }
}
