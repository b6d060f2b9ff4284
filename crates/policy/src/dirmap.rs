//! [`DirMap`]: the cache directory, a map from block key (`u64`) to a `u32` (a slot, or a
//! ghost's tag), hand-written as a flat open-addressing table with linear probing.
//!
//! Why not `hashbrown` (which [`crate::keymap::KeyMap`] still is everywhere else): the
//! directory is the simulator's hottest table (a probe for every request, another for
//! every victim), far larger than the core's caches, so each probe of a cold key is a
//! cache miss. hashbrown keeps a group of control bytes apart from the buckets, so that
//! probe is two dependent misses (control bytes, then the bucket), and the second cannot
//! be started before the first arrives. Here a bucket holds the key and its value inline
//! (16 bytes, four to a cache line) at an address that follows from the hash alone, so a
//! probe is one miss and [`DirMap::prefetch`] can start it requests ahead
//! ([`crate::BlockCache::prefetch`]). No crate offers that prefetch-by-key on a map we
//! could keep using elsewhere; the table is small enough to own. Measured on `lachesis
//! bench sim` (docs/measurements.md, "Where the time goes").
//!
//! Layout and invariants:
//! * `buckets.len()` is zero or a power of two, and the table is at most half full (so a
//!   probe rarely leaves its first cache line);
//! * an empty bucket has key [`EMPTY`] (`u64::MAX`); the real key `u64::MAX` is kept out
//!   of line in `max_val`;
//! * deletion shifts the following entries of the cluster back (no tombstones), so the
//!   table never degrades under the cache's constant insert/remove churn.
//!
//! The hash is [`crate::keymap::mix64`] (MurmurHash3's finaliser, two multiplies, every
//! input bit moving every output bit): block keys that differ only in their high bits
//! still spread. It is fixed, not seeded, so runs are reproducible; like the hashbrown map
//! before it with the same hasher, a trace crafted against it could collide keys (an
//! unseeded hash cannot stop that), which costs speed, never correctness.

use crate::keymap::mix64;
use crate::prefetch::prefetch_at;

/// The key marking an empty bucket.
pub const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    key: u64,
    val: u32,
}

const VACANT: Bucket = Bucket { key: EMPTY, val: 0 };

/// A key with its hash ([`mix64`]), computed once: the replay hashes each request's key
/// when it prefetches its bucket and reuses the hash for the lookups after. Built only by
/// [`Hashed::new`], so the hash always matches the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hashed {
    key: u64,
    hash: u64,
}

impl Hashed {
    /// Hashes `key`.
    #[inline]
    pub fn new(key: u64) -> Self {
        Hashed {
            key,
            hash: mix64(key),
        }
    }

    /// The key.
    #[inline]
    pub fn key(self) -> u64 {
        self.key
    }
}

/// A map from `u64` keys to `u32` values (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct DirMap {
    buckets: Vec<Bucket>,
    /// `buckets.len() - 1` (0 when empty).
    mask: usize,
    /// Entries in `buckets` (the key `u64::MAX` not counted).
    used: usize,
    /// The value of the key `u64::MAX`, which cannot live in a bucket.
    max_val: Option<u32>,
    /// Entries in `buckets` above which an insertion grows the table.
    grow_at: usize,
}

impl DirMap {
    /// An empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        mix64(key) as usize & self.mask
    }

    #[inline]
    fn home_of(&self, k: Hashed) -> usize {
        k.hash as usize & self.mask
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.used + self.max_val.is_some() as usize
    }

    /// Whether the map is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for `additional` more entries without growing.
    pub fn reserve(&mut self, additional: usize) {
        let need = (self.used + additional).saturating_mul(2).max(8);
        if need > self.buckets.len() {
            self.rehash(need.next_power_of_two());
        }
    }

    fn rehash(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.buckets, vec![VACANT; size]);
        self.mask = size - 1;
        self.grow_at = size / 2;
        for b in old {
            if b.key != EMPTY {
                let mut i = self.home(b.key);
                while self.buckets[i].key != EMPTY {
                    i = (i + 1) & self.mask;
                }
                self.buckets[i] = b;
            }
        }
    }

    /// Starts loading the buckets a lookup of `key` reads first (its home bucket and the
    /// one after, usually the same cache line) without waiting for them; see
    /// [`crate::prefetch`]. Needs no load of the table itself, only the hash.
    #[inline]
    pub fn prefetch(&self, key: Hashed) {
        let i = self.home_of(key);
        prefetch_at(&self.buckets, i);
        prefetch_at(&self.buckets, (i + 1) & self.mask);
    }

    /// A hint: the value of `key` if it sits in one of the two buckets
    /// [`DirMap::prefetch`] loads (its home and the one after, where nine keys in ten of a
    /// table at most half full sit), else `None` whether or not `key` is present.
    /// No probe loop and no end-of-cluster test: what a prefetch stage needs to find a
    /// slot to load ahead, at a third of a lookup's instructions.
    #[inline]
    pub fn peek(&self, k: Hashed) -> Option<u32> {
        if k.key == EMPTY {
            return None;
        }
        let i = self.home_of(k);
        let a = self.buckets.get(i)?;
        if a.key == k.key {
            return Some(a.val);
        }
        let b = self.buckets.get((i + 1) & self.mask)?;
        (b.key == k.key).then_some(b.val)
    }

    /// The bucket index of `key` (not [`EMPTY`]), if present.
    #[inline]
    fn find(&self, k: Hashed) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let key = k.key;
        let mut i = self.home_of(k);
        loop {
            let k = self.buckets[i].key;
            if k == key {
                return Some(i);
            }
            if k == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        self.get_hashed(Hashed::new(key))
    }

    /// [`DirMap::get`] with the hash already computed.
    #[inline]
    pub fn get_hashed(&self, k: Hashed) -> Option<u32> {
        if k.key == EMPTY {
            return self.max_val;
        }
        self.find(k).map(|i| self.buckets[i].val)
    }

    /// The value of `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut u32> {
        if key == EMPTY {
            return self.max_val.as_mut();
        }
        self.find(Hashed::new(key))
            .map(|i| &mut self.buckets[i].val)
    }

    /// Sets `key` to `val`, returning the old value.
    #[inline]
    pub fn insert(&mut self, key: u64, val: u32) -> Option<u32> {
        self.insert_hashed(Hashed::new(key), val)
    }

    /// [`DirMap::insert`] with the hash already computed.
    #[inline]
    pub fn insert_hashed(&mut self, k: Hashed, val: u32) -> Option<u32> {
        let key = k.key;
        if key == EMPTY {
            return self.max_val.replace(val);
        }
        if self.used + 1 > self.grow_at {
            self.rehash((self.buckets.len() * 2).max(8));
        }
        let mut i = self.home_of(k);
        loop {
            let b = &mut self.buckets[i];
            if b.key == key {
                return Some(std::mem::replace(&mut b.val, val));
            }
            if b.key == EMPTY {
                *b = Bucket { key, val };
                self.used += 1;
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Removes `key`, returning its value.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        if key == EMPTY {
            return self.max_val.take();
        }
        let i = self.find(Hashed::new(key))?;
        let val = self.buckets[i].val;
        self.erase(i);
        Some(val)
    }

    /// Empties bucket `i`, shifting back later entries of its cluster whose probe path
    /// crosses it, so every entry stays reachable from its home without tombstones.
    fn erase(&mut self, i: usize) {
        let mask = self.mask;
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let b = self.buckets[j];
            if b.key == EMPTY {
                break;
            }
            let home = self.home(b.key);
            // `b` may fill the hole if the hole lies on its probe path (home ..= j).
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.buckets[hole] = VACANT;
        self.used -= 1;
    }

    /// Keeps only the entries for which `keep(key, &mut val)` is true (rebuilds the table,
    /// O(buckets)).
    pub fn retain(&mut self, mut keep: impl FnMut(u64, &mut u32) -> bool) {
        if let Some(v) = self.max_val.as_mut() {
            if !keep(EMPTY, v) {
                self.max_val = None;
            }
        }
        let mut dropped = false;
        for b in self.buckets.iter_mut() {
            if b.key != EMPTY && !keep(b.key, &mut b.val) {
                *b = VACANT;
                dropped = true;
            }
        }
        if dropped {
            self.used = self.buckets.iter().filter(|b| b.key != EMPTY).count();
            // Vacated buckets may have broken probe paths: put every entry back.
            self.rehash(self.buckets.len());
        }
    }

    /// All `(key, value)` pairs in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.max_val.map(|v| (EMPTY, v)).into_iter().chain(
            self.buckets
                .iter()
                .filter(|b| b.key != EMPTY)
                .map(|b| (b.key, b.val)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Get(u64),
        Retain(u32),
    }

    fn key() -> impl Strategy<Value = u64> {
        // A small key space (so removes and re-inserts hit), high-bit-only keys, and the
        // out-of-line key u64::MAX.
        prop_oneof![
            0u64..64,
            (0u64..64).prop_map(|k| k << 40),
            Just(u64::MAX),
            Just(u64::MAX - 1),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (key(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => key().prop_map(Op::Remove),
            2 => key().prop_map(Op::Get),
            1 => (1u32..5).prop_map(Op::Retain),
        ]
    }

    proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec(op(), 0..400)) {
            let mut m = DirMap::new();
            let mut model: HashMap<u64, u32> = HashMap::new();
            for o in ops {
                match o {
                    Op::Insert(k, v) => prop_assert_eq!(m.insert(k, v), model.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(m.remove(k), model.remove(&k)),
                    Op::Get(k) => {
                        prop_assert_eq!(m.get(k), model.get(&k).copied());
                        if let Some(v) = m.get_mut(k) {
                            *v ^= 1;
                            *model.get_mut(&k).unwrap() ^= 1;
                        }
                    }
                    Op::Retain(d) => {
                        m.retain(|k, v| !(k as u32 ^ *v).is_multiple_of(d));
                        model.retain(|&k, v| !(k as u32 ^ *v).is_multiple_of(d));
                    }
                }
                prop_assert_eq!(m.len(), model.len());
            }
            let mut all: Vec<(u64, u32)> = m.iter().collect();
            all.sort_unstable();
            let mut want: Vec<(u64, u32)> = model.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(all, want);
        }
    }

    #[test]
    fn peek_finds_keys_near_home_and_nothing_else() {
        let mut m = DirMap::new();
        for k in 0..1000u64 {
            m.insert(k, k as u32 + 7);
        }
        let mut found = 0;
        for k in 0..2000u64 {
            let h = Hashed::new(k);
            match m.peek(h) {
                Some(v) => {
                    assert_eq!(Some(v), m.get(k));
                    found += 1;
                }
                None => {
                    let home = m.home_of(h);
                    let near = [home, (home + 1) & m.mask];
                    assert!(near.iter().all(|&i| m.buckets[i].key != k), "{k}");
                }
            }
        }
        // Just under half full (1,000 keys in 2,048 buckets): about nine in ten keys are in
        // their first two buckets.
        assert_eq!(m.buckets.len(), 2048);
        assert!(found > 850 && found <= 1000, "{found}");
        assert_eq!(DirMap::new().peek(Hashed::new(3)), None);
    }

    #[test]
    fn churn_keeps_every_key_reachable() {
        // A cache's steady state: a sliding window of keys, one in, one out.
        let mut m = DirMap::new();
        m.reserve(1000);
        for k in 0..200_000u64 {
            m.insert(k, k as u32);
            if k >= 1000 {
                assert_eq!(m.remove(k - 1000), Some((k - 1000) as u32));
            }
        }
        assert_eq!(m.len(), 1000);
        for k in 199_000..200_000u64 {
            assert_eq!(m.get(k), Some(k as u32));
        }
        assert!(m.buckets.len() <= 4096);
    }
}
