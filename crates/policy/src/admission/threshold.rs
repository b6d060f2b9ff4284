//! Access-count threshold placement (MFU), as SANCACHE places chunks on its fast tier: a
//! missed block is placed only on its `threshold`-th access while not resident.
//!
//! Candidate counts live in a bounded table ([`Candidates`]): when it holds `capacity`
//! candidates, it is swept once — every count halved, zeros dropped (the oldest evidence
//! fades first), and if that freed nothing the table is cleared — so memory stays bounded
//! and each access costs O(1) amortised. Shines when a small hot set should be isolated
//! from one-touch traffic; costs `threshold - 1` extra misses per hot block.

use super::AdmissionPolicy;
use crate::keymap::KeyMap;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;

/// A bounded table of access counts of non-resident blocks.
#[derive(Debug)]
pub struct Candidates {
    counts: KeyMap<u32>,
    capacity: usize,
}

impl Candidates {
    /// A table of at most `capacity` candidates (at least 1).
    pub fn new(capacity: usize) -> Self {
        Candidates {
            counts: KeyMap::default(),
            capacity: capacity.max(1),
        }
    }

    /// Adds `by` to `key`'s count and returns the new count.
    pub fn bump(&mut self, key: Key, by: u32) -> u32 {
        if !self.counts.contains_key(&key) && self.counts.len() >= self.capacity {
            self.cool(0.5);
            if self.counts.len() >= self.capacity {
                self.counts.clear();
            }
        }
        let c = self.counts.entry(key).or_insert(0);
        *c = c.saturating_add(by);
        *c
    }

    /// The count of `key` (0 if unknown).
    pub fn count(&self, key: Key) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }

    /// Forgets `key` (it was placed).
    pub fn forget(&mut self, key: Key) {
        self.counts.remove(&key);
    }

    /// Multiplies every count by `factor` (rounding down), dropping zeros.
    pub fn cool(&mut self, factor: f64) {
        self.counts.retain(|_, c| {
            *c = (*c as f64 * factor) as u32;
            *c > 0
        });
    }

    /// Number of candidates held.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no candidate is held.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The bound on candidates.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Place a block on its `threshold`-th non-resident access.
#[derive(Debug)]
pub struct Threshold {
    threshold: u32,
    candidates: Candidates,
}

impl Threshold {
    /// Builds from `n=N` (threshold, default 2) and `candidates=C` (table bound, default
    /// 65536).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let n = p.usize_in("n", 2, 1, 1 << 20)? as u32;
        let c = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        p.finish()?;
        Ok(Threshold {
            threshold: n,
            candidates: Candidates::new(c),
        })
    }

    /// Candidates currently counted.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }
}

impl AdmissionPolicy for Threshold {
    fn name(&self) -> String {
        format!("threshold(n={})", self.threshold)
    }
    fn access(&mut self, key: Key, resident: bool) -> bool {
        if resident {
            return true;
        }
        if self.candidates.bump(key, 1) >= self.threshold {
            self.candidates.forget(key);
            true
        } else {
            false
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
        let mut t = build_admission("threshold:n=3").unwrap();
        assert!(!t.access(7, false));
        assert!(!t.access(7, false));
        assert!(t.access(7, false));
        // Counting starts again after placement.
        assert!(!t.access(7, false));
    }

    proptest! {
        #[test]
        fn table_stays_bounded(cap in 1usize..64, keys in proptest::collection::vec(0u64..500, 1..2000)) {
            let mut c = Candidates::new(cap);
            for k in keys {
                c.bump(k, 1);
                prop_assert!(c.len() <= cap);
            }
        }
    }
}
