//! LFU: evict the least frequently used block.
//!
//! A block's frequency counts its accesses since it entered the cache (a new block starts
//! at 1; nothing is remembered about evicted blocks). Shines on stable popularity (a fixed
//! hot set larger than what recency alone keeps); fails when popularity shifts
//! (yesterday's hot blocks squat forever, "cache pollution") and on bursts, and it never
//! ages counts.
//!
//! The classic O(1) structure (Shah, Mitra & Matani, "An O(1) algorithm for implementing
//! the LFU cache eviction scheme", 2010): one bucket per frequency present, buckets linked
//! in increasing frequency, each bucket a list of its slots in the order they reached that
//! frequency. A hit moves the block to the next bucket (creating it beside the current one
//! if missing), an insertion goes to the frequency-1 bucket at the head, the victim is the
//! oldest block of the head bucket. Buckets are recycled through a slab and slots link
//! through one shared link array, so no event allocates once the cache is warm.
//!
//! Semantics match libCacheSim's `LFU.c` exactly (pinned in `tests/libcachesim_parity.rs`):
//! * a new block has frequency 1 and is appended to the frequency-1 list;
//! * a hit raises the frequency by one and appends the block to the new frequency's list;
//! * the victim is the first block of the lowest frequency's list, i.e. among equal
//!   frequencies the block that reached that frequency first leaves. Since every access
//!   raises the frequency, that is also the least recently used of them, and not
//!   necessarily the one that entered the cache first.

use crate::list::{Links, List, NodeSlab, NIL};
use crate::params::Params;
use crate::policy::{BlockHistory, Directory, EvictionPolicy, Key, Slot};
use crate::PolicyError;
use std::collections::BTreeMap;

/// One frequency's blocks, linked to the neighbouring frequencies present.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    freq: u64,
    /// Front = reached this frequency last; back = first (the next victim).
    blocks: List,
    /// The bucket of the next lower frequency present (`NIL` at the head).
    lower: u32,
    /// The bucket of the next higher frequency present (`NIL` at the top).
    higher: u32,
}

/// Least frequently used, FIFO among equal frequencies.
#[derive(Debug)]
pub struct Lfu {
    links: Links,
    buckets: NodeSlab<Bucket>,
    /// The lowest-frequency bucket (`NIL` when empty).
    head: u32,
    /// Per slot: its bucket.
    bucket_of: Vec<u32>,
    /// Frequency → bucket, built only for a run of [`EvictionPolicy::on_reconstruct`]
    /// calls (which place blocks at arbitrary frequencies) and valid while `index_valid`;
    /// any other change to the buckets invalidates it. Never touched on the hot path.
    index: BTreeMap<u64, u32>,
    index_valid: bool,
}

impl Default for Lfu {
    fn default() -> Self {
        Lfu {
            links: Links::default(),
            buckets: NodeSlab::default(),
            head: NIL,
            bucket_of: Vec::new(),
            index: BTreeMap::new(),
            index_valid: false,
        }
    }
}

impl Lfu {
    /// Builds from a parameter string (LFU takes none).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.finish()?;
        Ok(Self::default())
    }

    /// The frequency of a resident `slot` (for tests and reports).
    pub fn frequency(&self, slot: Slot) -> u64 {
        self.buckets.get(self.bucket_of[slot as usize]).freq
    }

    /// A new, empty bucket for `freq` linked between `lower` and `higher`.
    #[inline]
    fn new_bucket(&mut self, freq: u64, lower: u32, higher: u32) -> u32 {
        let b = self.buckets.alloc(Bucket {
            freq,
            blocks: List::default(),
            lower,
            higher,
        });
        if lower != NIL {
            self.buckets.get_mut(lower).higher = b;
        } else {
            self.head = b;
        }
        if higher != NIL {
            self.buckets.get_mut(higher).lower = b;
        }
        self.index_valid = false;
        b
    }

    /// Unlinks and recycles bucket `b` if it holds no block.
    #[inline]
    fn drop_if_empty(&mut self, b: u32) {
        let Bucket {
            blocks,
            lower,
            higher,
            ..
        } = *self.buckets.get(b);
        if !blocks.is_empty() {
            return;
        }
        if lower != NIL {
            self.buckets.get_mut(lower).higher = higher;
        } else {
            self.head = higher;
        }
        if higher != NIL {
            self.buckets.get_mut(higher).lower = lower;
        }
        self.buckets.release(b);
        self.index_valid = false;
    }

    /// Removes `slot` from its bucket's list (the bucket may become empty).
    #[inline]
    fn unlink_slot(&mut self, slot: Slot) -> u32 {
        let b = self.bucket_of[slot as usize];
        let mut blocks = self.buckets.get(b).blocks;
        blocks.remove(&mut self.links, slot);
        self.buckets.get_mut(b).blocks = blocks;
        b
    }

    #[inline]
    fn push_slot(&mut self, b: u32, slot: Slot) {
        let mut blocks = self.buckets.get(b).blocks;
        blocks.push_front(&mut self.links, slot);
        self.buckets.get_mut(b).blocks = blocks;
        self.bucket_of[slot as usize] = b;
    }
}

impl EvictionPolicy for Lfu {
    fn name(&self) -> String {
        "lfu".into()
    }
    fn set_capacity(&mut self, capacity: usize, _dir: &mut Directory<'_>) {
        self.links.reserve(capacity.min(1 << 24));
    }
    #[inline]
    fn on_hit(&mut self, slot: Slot, _key: Key) {
        let b = self.unlink_slot(slot);
        let Bucket { freq, higher, .. } = *self.buckets.get(b);
        let next = if higher != NIL && self.buckets.get(higher).freq == freq + 1 {
            higher
        } else {
            self.new_bucket(freq + 1, b, higher)
        };
        self.push_slot(next, slot);
        self.drop_if_empty(b);
    }
    #[inline]
    fn on_insert(&mut self, slot: Slot, _key: Key) {
        let i = slot as usize;
        if self.bucket_of.len() <= i {
            self.bucket_of
                .resize((i + 1).max(self.bucket_of.len() * 2), NIL);
        }
        let b = if self.head != NIL && self.buckets.get(self.head).freq == 1 {
            self.head
        } else {
            self.new_bucket(1, NIL, self.head)
        };
        self.push_slot(b, slot);
    }
    #[inline]
    fn evict(&mut self, _dir: &mut Directory<'_>) -> Slot {
        let b = self.head;
        assert!(b != NIL, "evict called on an empty LFU");
        let mut blocks = self.buckets.get(b).blocks;
        let victim = blocks
            .pop_back(&mut self.links)
            .expect("LFU buckets are never empty");
        self.buckets.get_mut(b).blocks = blocks;
        self.drop_if_empty(b);
        victim
    }
    /// A switched-in block keeps its frequency, 1 + its hits since it entered, and joins
    /// that frequency's list as its newest member (blocks arrive oldest access first).
    /// O(log B) for B frequencies present, through a frequency index kept for the run of
    /// reconstruction calls.
    fn on_reconstruct(&mut self, slot: Slot, key: Key, h: BlockHistory) {
        let f = 1 + h.hits as u64;
        if f == 1 {
            return self.on_insert(slot, key);
        }
        if !self.index_valid {
            self.index.clear();
            let mut b = self.head;
            while b != NIL {
                let bucket = self.buckets.get(b);
                self.index.insert(bucket.freq, b);
                b = bucket.higher;
            }
        }
        let i = slot as usize;
        if self.bucket_of.len() <= i {
            self.bucket_of
                .resize((i + 1).max(self.bucket_of.len() * 2), NIL);
        }
        let b = match self.index.get(&f) {
            Some(&b) => b,
            None => {
                let lower = self.index.range(..f).next_back().map_or(NIL, |(_, &b)| b);
                let higher = if lower == NIL {
                    self.head
                } else {
                    self.buckets.get(lower).higher
                };
                let b = self.new_bucket(f, lower, higher);
                self.index.insert(f, b);
                b
            }
        };
        self.push_slot(b, slot);
        self.index_valid = true;
    }
    fn on_remove(&mut self, slot: Slot, _key: Key) {
        let b = self.unlink_slot(slot);
        self.drop_if_empty(b);
    }
}

#[cfg(test)]
mod tests {
    use super::Lfu;
    use crate::policy::EvictionPolicy;
    use crate::testkit::NoDir;
    use crate::testkit::{miss_count, pinned};
    use crate::BlockCache;

    #[test]
    fn frequency_then_fifo() {
        // 1 x3, 2 x2, 3 once (3 misses); 4 evicts 3 (freq 1); 5 evicts 4 (freq 1); 1 and 2
        // hit: 5 misses.
        assert_eq!(miss_count("lfu", 3, &[1, 1, 1, 2, 2, 3, 4, 5, 1, 2]), 5);
        // Equal frequencies: the block that got there first leaves, even if used since.
        // 1 2 (both freq 1), 1 hit (freq 2), 2 hit (freq 2, later), 3 evicts 1 (LRU would
        // evict 1 too); 2 hits; 1 misses and evicts 3 (freq 1).
        assert_eq!(miss_count("lfu", 2, &[1, 2, 1, 2, 3, 2, 1]), 4);
    }

    #[test]
    fn ties_go_by_time_reached_not_by_insertion() {
        // Cache of 2: 1 and 2 enter; 2 then 1 reach frequency 2. 3 evicts 2 (it reached 2
        // first) although 1 entered first; so 1 hits. Misses: 1 2 3.
        assert_eq!(miss_count("lfu", 2, &[1, 2, 2, 1, 3, 1]), 3);
    }

    #[test]
    fn new_block_starts_at_one_and_buckets_recycle() {
        let mut c = BlockCache::new(2, Lfu::default());
        let s1 = c.access(1, |_, _| {});
        for _ in 0..5 {
            c.access(1, |_, _| {});
        }
        let crate::Access::Inserted(s1) = s1 else {
            panic!("first access must insert")
        };
        assert_eq!(c.policy().frequency(s1), 6);
        let crate::Access::Inserted(s2) = c.access(2, |_, _| {}) else {
            panic!()
        };
        assert_eq!(c.policy().frequency(s2), 1);
        // A stream of one-time blocks churns through the frequency-1 bucket only.
        for k in 10..1000 {
            c.access(k, |_, _| {});
        }
        assert_eq!(c.lookup(1), Some(s1));
        assert!(c.policy().buckets.live() <= 2);
    }

    #[test]
    fn evict_walks_up_after_the_lowest_bucket_empties() {
        // Shrinking evicts repeatedly without inserts in between.
        let mut p = Lfu::default();
        p.set_capacity(3, &mut NoDir::default().dir());
        p.on_insert(0, 10);
        p.on_insert(1, 11);
        p.on_insert(2, 12);
        p.on_hit(1, 11);
        p.on_hit(1, 11);
        p.on_hit(2, 12);
        assert_eq!(p.evict(&mut NoDir::default().dir()), 0);
        assert_eq!(p.evict(&mut NoDir::default().dir()), 2);
        assert_eq!(p.evict(&mut NoDir::default().dir()), 1);
        assert_eq!(p.head, crate::list::NIL);
    }

    /// libCacheSim's LFU written plainly: per key `(frequency, time it reached it)`, the
    /// victim is the smallest pair.
    fn naive(capacity: usize, keys: &[u64]) -> u64 {
        let mut m: std::collections::HashMap<u64, (u64, u64)> = Default::default();
        let mut misses = 0;
        for (t, &k) in keys.iter().enumerate() {
            if let Some(e) = m.get_mut(&k) {
                *e = (e.0 + 1, t as u64);
                continue;
            }
            misses += 1;
            if m.len() == capacity {
                let (&v, _) = m.iter().min_by_key(|(_, &e)| e).unwrap();
                m.remove(&v);
            }
            m.insert(k, (1, t as u64));
        }
        misses
    }

    proptest::proptest! {
        #[test]
        fn matches_the_naive_model(
            cap in 1usize..12,
            keys in proptest::collection::vec(0u64..24, 1..300),
        ) {
            proptest::prop_assert_eq!(miss_count("lfu", cap, &keys), naive(cap, &keys));
        }
    }

    #[test]
    fn reconstruction_places_blocks_by_frequency_then_replay_order() {
        use crate::policy::BlockHistory;
        let h = |hits| BlockHistory {
            last_access: 0,
            hits,
        };
        let mut p = Lfu::default();
        p.set_capacity(8, &mut NoDir::default().dir());
        p.on_reconstruct(0, 10, h(4));
        p.on_reconstruct(1, 11, h(0));
        p.on_reconstruct(2, 12, h(2));
        p.on_reconstruct(3, 13, h(4));
        p.on_reconstruct(4, 14, h(2));
        // A hit between reconstruction calls changes the buckets (1 → frequency 2).
        p.on_hit(1, 11);
        p.on_reconstruct(5, 15, h(1));
        assert_eq!((p.frequency(0), p.frequency(1), p.frequency(5)), (5, 2, 2));
        let order: Vec<_> = (0..6)
            .map(|_| p.evict(&mut NoDir::default().dir()))
            .collect();
        // Frequency 2: 1 (by its hit) then 5; frequency 3: 2, 4; frequency 5: 0, 3.
        assert_eq!(order, vec![1, 5, 2, 4, 0, 3]);
        assert_eq!(p.head, crate::list::NIL);
    }

    #[test]
    fn contract_holds() {
        pinned::contract("lfu");
    }
}
