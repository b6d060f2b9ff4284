//! [`LastTime`]: the map from key to last access time of the exact stack.
//!
//! An open-addressing table with linear probing and the key and time side by side in one
//! 16-byte slot, so a lookup costs one cache miss where a general hash map (control bytes
//! apart from the entries) costs two — the lookup is most of an exact stack-distance
//! step once the Fenwick tree fits in cache. Keys are hashed with MurmurHash3's finaliser
//! (`policy::keymap::mix64`), the table stays at most 3/4 full, and removal shifts
//! following entries back (no tombstones), so lookups never slow down with churn.

use policy::keymap::mix64;

/// Starts loading the cache line holding `slot` without waiting for it.
///
/// A plain load (`black_box(slot)`) is no prefetch: the CPU cannot retire it, nor anything
/// after it, until the line arrives, so it stalls as long as the lookup it was meant to
/// hide (68 % of the exact method's time in `perf`). The `prefetch` instruction retires at
/// once. `examples/exact_only` measures the difference (see the module doc of `exact`).
#[inline(always)]
#[allow(unsafe_code)] // the workspace denies it; this is the one measured exception
fn prefetch_line<T>(slot: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only needs SSE, which every x86_64 CPU has (it is part of the
    // target's baseline), and a prefetch never faults or changes memory; `slot` is a valid
    // reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((slot as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

const EMPTY: u32 = u32::MAX;

/// Key → last access time (`u32`, never `u32::MAX`).
#[derive(Clone, Debug)]
pub struct LastTime {
    slots: Vec<(u64, u32)>,
    len: usize,
    mask: usize,
}

impl Default for LastTime {
    fn default() -> Self {
        Self::with_slots(1024)
    }
}

impl LastTime {
    fn with_slots(n: usize) -> Self {
        let n = n.next_power_of_two().max(16);
        LastTime {
            slots: vec![(0, EMPTY); n],
            len: 0,
            mask: n - 1,
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        mix64(key) as usize & self.mask
    }

    /// Sets `key`'s time to `t` and returns the previous time, if any.
    #[inline]
    pub fn insert(&mut self, key: u64, t: u32) -> Option<u32> {
        debug_assert!(t != EMPTY);
        let mut i = self.home(key);
        loop {
            let s = &mut self.slots[i];
            if s.1 == EMPTY {
                *s = (key, t);
                self.len += 1;
                if self.len * 4 > self.slots.len() * 3 {
                    self.grow();
                }
                return None;
            }
            if s.0 == key {
                return Some(std::mem::replace(&mut s.1, t));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Asks the CPU to bring `key`'s home slot into cache, so a lookup a few keys later
    /// finds it there: the cache miss overlaps with the work on the keys in between.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        prefetch_line(&self.slots[self.home(key)]);
    }

    fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.1 == EMPTY {
                return None;
            }
            if s.0 == key {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Whether `key` is present.
    #[inline]
    pub fn contains_key(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    /// Removes `key`, returning its time.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        let mut hole = self.find(key)?;
        let t = self.slots[hole].1;
        self.slots[hole].1 = EMPTY;
        self.len -= 1;
        // Backward-shift: move later entries of the run into the hole when their home
        // does not lie cyclically in (hole, j].
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let s = self.slots[j];
            if s.1 == EMPTY {
                return Some(t);
            }
            let home = self.home(s.0);
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.slots[hole] = s;
                self.slots[j].1 = EMPTY;
                hole = j;
            }
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        *self = Self::with_slots(old.len() * 2);
        for (k, t) in old {
            if t != EMPTY {
                self.insert(k, t);
            }
        }
    }

    /// Entries present.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated (16 bytes each).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Replaces every time `t` with `new_time(t)` (compaction of the time axis: the
    /// caller maps each live time to its rank among the live times).
    pub fn renumber(&mut self, new_time: impl Fn(u32) -> u32) {
        for s in &mut self.slots {
            if s.1 != EMPTY {
                s.1 = new_time(s.1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in prop::collection::vec((0u64..200, 0u8..3), 1..2000)) {
            let mut a = LastTime::default();
            let mut b: HashMap<u64, u32> = HashMap::new();
            for (i, (k, op)) in ops.into_iter().enumerate() {
                let k = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (k % 7);
                match op {
                    0 | 1 => prop_assert_eq!(a.insert(k, i as u32), b.insert(k, i as u32)),
                    _ => prop_assert_eq!(a.remove(k), b.remove(&k)),
                }
                prop_assert_eq!(a.len(), b.len());
                prop_assert_eq!(a.contains_key(k), b.contains_key(&k));
            }
            for (k, t) in &b {
                prop_assert_eq!(a.find(*k).map(|i| a.slots[i].1), Some(*t));
            }
        }
    }

    #[test]
    fn renumber_keeps_order() {
        let mut a = LastTime::default();
        for (k, t) in [(5u64, 100u32), (6, 7), (7, 5000), (8, 42)] {
            a.insert(k, t);
        }
        let mut order = [100u32, 7, 5000, 42];
        order.sort_unstable();
        a.renumber(|t| order.binary_search(&t).unwrap() as u32);
        let got: Vec<Option<u32>> = [6u64, 8, 5, 7].iter().map(|&k| a.insert(k, 9)).collect();
        assert_eq!(got, vec![Some(0), Some(1), Some(2), Some(3)]);
    }
}
