//! Access-count threshold placement (MFU), as SANCACHE places chunks on its fast tier: a
//! missed block is placed only on its `threshold`-th access while not resident (the access
//! that reaches the threshold counts). Once placed, its count is forgotten; if it is later
//! evicted it has to earn its place again.
//!
//! Also owns [`Candidates`], the bounded table of counts that MRFU and the adaptive rule
//! share:
//! * Memory is bounded: at most `capacity` keys are held (a [`KeyMap`], the crate's block-key
//!   hash map, of a `u32` count and a `u32` cooling epoch per key, about 24 bytes a key with
//!   the table's load factor).
//! * Cooling is lazy: [`Candidates::cool`] only advances a global epoch (O(1)); a count is
//!   brought up to date (multiplied by `decay` once per epoch it missed, rounded down) when
//!   its key is next touched, so a period's cooling costs nothing per candidate. With the
//!   default `decay = 0.5` the lazy result is exactly that of halving eagerly every period.
//! * When a new key finds the table full, the table makes room in one sweep: all counts are
//!   brought up to date, zeros dropped, and if that is not enough, every count is halved as
//!   many times as needed (the number is found from a histogram of the counts' bit lengths,
//!   so it is one pass, not one pass per halving) until at most three quarters of the table
//!   is held. The weakest candidates go first and the order of the rest is kept. A sweep
//!   costs O(capacity) and frees at least a quarter of the table, so it is O(1) amortised
//!   per new key.
//!
//! Where it shines: a small hot set among one-touch traffic (scans, write-once data) — the
//! one-touch blocks never displace the hot set. Where it fails: every hot block pays
//! `threshold - 1` extra misses before placement, and a working set that moves faster than
//! counts accumulate is never placed; counts of keys that come back only after the table
//! was swept start again from zero.

use super::AdmissionPolicy;
use crate::keymap::KeyMap;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;

/// A count and the cooling epoch it was last brought up to date at.
#[derive(Clone, Copy, Debug)]
struct Entry {
    count: u32,
    epoch: u32,
}

/// `e`'s count multiplied by `decay` once per epoch from `e.epoch` to `now`, rounded down.
/// A negative `decay` `-d` subtracts `d` per epoch instead (cooling by subtraction).
#[inline]
fn cooled(e: Entry, now: u32, decay: f64) -> u32 {
    let k = now.wrapping_sub(e.epoch);
    if decay < 0.0 {
        let by = (-decay) as u64 * k as u64;
        return (e.count as u64).saturating_sub(by) as u32;
    }
    if k == 0 || e.count == 0 || decay == 1.0 {
        e.count
    } else if decay == 0.5 {
        // Exact: floor(floor(c / 2) / 2) = floor(c / 4).
        if k >= 32 {
            0
        } else {
            e.count >> k
        }
    } else {
        (e.count as f64 * decay.powi(k.min(i32::MAX as u32) as i32)) as u32
    }
}

/// A bounded table of access counts of non-resident blocks, with lazy cooling.
#[derive(Debug)]
pub struct Candidates {
    counts: KeyMap<Entry>,
    capacity: usize,
    decay: f64,
    epoch: u32,
    sweeps: u64,
}

impl Candidates {
    /// A table of at most `capacity` candidates (at least 1) that never cools by itself
    /// ([`Candidates::cool`] then halves).
    pub fn new(capacity: usize) -> Self {
        Self::with_decay(capacity, 0.5)
    }

    /// A table of at most `capacity` candidates (at least 1) whose counts are multiplied by
    /// `decay` (in `[0, 1]`, rounded down) at every [`Candidates::cool`].
    pub fn with_decay(capacity: usize, decay: f64) -> Self {
        let capacity = capacity.max(1);
        let mut counts = KeyMap::default();
        counts.reserve(capacity.min(1 << 16));
        Candidates {
            counts,
            capacity,
            decay: decay.clamp(0.0, 1.0),
            epoch: 0,
            sweeps: 0,
        }
    }

    /// A table of at most `capacity` candidates whose counts drop by `by` (saturating at
    /// 0) at every [`Candidates::cool`].
    pub fn with_subtraction(capacity: usize, by: u32) -> Self {
        let mut c = Self::with_decay(capacity, 0.5);
        c.decay = -(by.max(1) as f64);
        c
    }

    /// `e`'s count cooled up to the current epoch.
    #[inline]
    fn current(&self, e: Entry) -> u32 {
        cooled(e, self.epoch, self.decay)
    }

    /// Adds `by` to `key`'s (cooled) count and returns the new count.
    pub fn bump(&mut self, key: Key, by: u32) -> u32 {
        let epoch = self.epoch;
        let (decay, now) = (self.decay, self.epoch);
        if let Some(e) = self.counts.get_mut(&key) {
            let c = cooled(*e, now, decay).saturating_add(by);
            *e = Entry { count: c, epoch };
            return c;
        }
        if self.counts.len() >= self.capacity {
            self.make_room();
        }
        self.counts.insert(key, Entry { count: by, epoch });
        by
    }

    /// The table is full: bring every count up to date, drop zeros, then halve all counts
    /// as often as needed for at most three quarters of the table to stay.
    fn make_room(&mut self) {
        self.sweeps += 1;
        let target = self.capacity - (self.capacity / 4).max(1);
        // Histogram of bit lengths of the current counts: a count with `b` bits survives
        // `s` halvings iff `b > s`.
        let mut hist = [0usize; 33];
        let epoch = self.epoch;
        let decayed: Vec<(Key, u32)> = self
            .counts
            .iter()
            .map(|(&k, &e)| (k, self.current(e)))
            .collect();
        for &(_, c) in &decayed {
            hist[(32 - c.leading_zeros()) as usize] += 1;
        }
        // The fewest halvings that leave at most `target` nonzero counts.
        let mut survivors: usize = hist[1..].iter().sum();
        let mut shift = 0u32;
        while survivors > target {
            shift += 1;
            survivors -= hist[shift as usize];
        }
        self.counts.clear();
        for (k, c) in decayed {
            let c = if shift >= 32 { 0 } else { c >> shift };
            if c > 0 {
                self.counts.insert(k, Entry { count: c, epoch });
            }
        }
    }

    /// The (cooled) count of `key`; 0 if unknown.
    pub fn count(&self, key: Key) -> u32 {
        self.counts.get(&key).map_or(0, |&e| self.current(e))
    }

    /// Forgets `key` (it was placed).
    pub fn forget(&mut self, key: Key) {
        self.counts.remove(&key);
    }

    /// One cooling step: every count is multiplied by the decay (rounded down). O(1): the
    /// counts are brought up to date lazily, and zeros are dropped when the table is swept.
    pub fn cool(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        // Ages are taken modulo 2^32; every 2^31 epochs bring all counts up to date so no
        // age can wrap.
        if self.epoch.is_multiple_of(1 << 31) {
            let epoch = self.epoch;
            let mut counts = std::mem::take(&mut self.counts);
            counts.retain(|_, e| {
                e.count = self.current(*e);
                e.epoch = epoch;
                e.count > 0
            });
            self.counts = counts;
        }
    }

    /// Number of keys held, including ones whose count has cooled to zero but that have not
    /// been swept yet. Never more than [`Candidates::capacity`].
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Number of keys whose cooled count is nonzero (O(len); for tests and reports).
    pub fn live(&self) -> usize {
        self.counts
            .values()
            .filter(|&&e| self.current(e) > 0)
            .count()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The bound on candidates.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The factor applied at each [`Candidates::cool`].
    pub fn decay(&self) -> f64 {
        self.decay
    }

    /// How many times the table was full and swept.
    pub fn sweeps(&self) -> u64 {
        self.sweeps
    }
}

/// Place a block on its `threshold`-th non-resident access.
#[derive(Debug)]
pub struct Threshold {
    threshold: u32,
    candidates: Candidates,
}

impl Threshold {
    /// A threshold of `n` (at least 1) with at most `candidates` counted keys.
    pub fn new(n: u32, candidates: usize) -> Self {
        Threshold {
            threshold: n.max(1),
            candidates: Candidates::new(candidates),
        }
    }

    /// Builds from `n=N` (threshold, default 2) and `candidates=C` (table bound, default
    /// 65536).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let n = p.usize_in("n", 2, 1, 1 << 20)? as u32;
        let c = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        p.finish()?;
        Ok(Self::new(n, c))
    }

    /// Candidates currently counted.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }
}

impl AdmissionPolicy for Threshold {
    fn name(&self) -> String {
        format!(
            "threshold(n={},candidates={})",
            self.threshold,
            self.candidates.capacity()
        )
    }
    fn set_threshold(&mut self, n: u32) -> bool {
        self.threshold = n.max(1);
        true
    }
    fn threshold(&self) -> Option<u32> {
        Some(self.threshold)
    }
    fn candidates(&self) -> Option<u64> {
        Some(self.candidates.len() as u64)
    }
    fn access(&mut self, key: Key, resident: bool) -> bool {
        if resident {
            return true;
        }
        if self.threshold == 1 || self.candidates.bump(key, 1) >= self.threshold {
            self.candidates.forget(key);
            true
        } else {
            false
        }
    }
    fn deferred(&mut self, key: Key) {
        let c = self.candidates.count(key);
        if c < self.threshold {
            self.candidates.bump(key, self.threshold - c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::build_admission;
    use proptest::prelude::*;

    #[test]
    fn places_on_the_nth_access() {
        for n in 1..=6u32 {
            let mut t = build_admission(&format!("threshold:n={n}")).unwrap();
            for round in 0..3 {
                for i in 1..=n {
                    // Hits in between do not count towards placement.
                    assert!(t.access(99, true));
                    assert_eq!(t.access(7, false), i == n, "n={n} round={round} i={i}");
                }
            }
        }
    }

    #[test]
    fn counts_are_per_key() {
        let mut t = Threshold::new(3, 100);
        assert!(!t.access(1, false));
        assert!(!t.access(2, false));
        assert!(!t.access(1, false));
        assert!(!t.access(2, false));
        assert_eq!(t.candidates().count(1), 2);
        assert!(t.access(1, false));
        assert_eq!(t.candidates().count(1), 0);
        assert!(t.access(2, false));
        assert!(t.candidates().is_empty());
    }

    #[test]
    fn a_full_table_drops_the_weakest_first() {
        let mut c = Candidates::new(8);
        // Keys 0..4 have count 4, keys 4..8 count 1.
        for k in 0..8u64 {
            let n = if k < 4 { 4 } else { 1 };
            for _ in 0..n {
                c.bump(k, 1);
            }
        }
        assert_eq!((c.len(), c.sweeps()), (8, 0));
        // Key 100 is new: the sweep must keep at most 6; one halving drops the four ones.
        assert_eq!(c.bump(100, 1), 1);
        assert_eq!((c.len(), c.sweeps()), (5, 1));
        for k in 0..4 {
            assert_eq!(c.count(k), 2);
        }
        for k in 4..8 {
            assert_eq!(c.count(k), 0);
        }
        // Fill up with ones again: 5 held, 3 more keys fit, the 4th sweeps.
        for k in 200..203 {
            c.bump(k, 1);
        }
        assert_eq!((c.len(), c.sweeps()), (8, 1));
        c.bump(300, 1);
        // One halving: 0..4 keep 1, all ones drop; 300 enters.
        assert_eq!((c.len(), c.sweeps()), (5, 2));
        assert_eq!(c.count(0), 1);
        assert_eq!(c.count(300), 1);
    }

    #[test]
    fn a_full_table_of_equal_counts_is_halved_until_a_quarter_is_free() {
        let mut c = Candidates::new(4);
        for k in 0..4u64 {
            c.bump(k, 5); // 0b101
        }
        // All four have 3 bits: three halvings are needed to drop any, and they drop all.
        c.bump(9, 1);
        assert_eq!(c.len(), 1);
        assert_eq!(c.count(9), 1);
    }

    #[test]
    fn lazy_cooling_equals_eager_halving() {
        let mut c = Candidates::new(100);
        c.bump(1, 13);
        c.bump(2, 6);
        c.cool(); // 6, 3
        c.bump(1, 1); // 7
        c.cool(); // 3, 1
        c.cool(); // 1, 0
        assert_eq!(c.count(1), 1);
        assert_eq!(c.count(2), 0);
        assert_eq!((c.len(), c.live()), (2, 1));
        let mut d = Candidates::with_decay(100, 0.75);
        d.bump(1, 100);
        d.cool();
        d.cool();
        assert_eq!(d.count(1), 56); // floor(100 * 0.5625)
    }

    proptest! {
        #[test]
        fn table_stays_bounded(
            cap in 1usize..64,
            ops in proptest::collection::vec((0u64..500, 1u32..5, 0u8..20), 1..2000),
        ) {
            let mut c = Candidates::new(cap);
            for (k, by, cool) in ops {
                if cool == 0 {
                    c.cool();
                }
                let n = c.bump(k, by);
                prop_assert!(n >= by);
                prop_assert_eq!(c.count(k), n);
                prop_assert!(c.len() <= cap);
            }
        }

        #[test]
        fn threshold_policy_table_stays_bounded(
            cap in 1usize..32,
            n in 1u32..5,
            keys in proptest::collection::vec(0u64..300, 1..2000),
        ) {
            let mut t = Threshold::new(n, cap);
            for k in keys {
                t.access(k, false);
                prop_assert!(t.candidates().len() <= cap);
            }
        }
    }
}
