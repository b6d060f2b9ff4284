//! MRFU placement (SANCACHE): the access-count threshold of [`super::threshold`], with
//! periodic cooling of the candidates' counts and a sequential filter.
//!
//! * Cooling: every `period` accesses all candidate counts are multiplied by `decay`
//!   (default 0.5) and zeros dropped, so a block must be hot *recently* to be placed — the
//!   "recently" in MRFU (most recently and frequently used). The sweep costs O(candidates)
//!   once per period, O(1) amortised per access when `period >= candidates`.
//! * Sequential filter: an access to the previous access's key or the next key continues a
//!   sequential run and adds nothing to any count, so a run counts once. Sequential streams
//!   are what disks serve well; a fast tier should not spend migrations on them.

use super::threshold::Candidates;
use super::AdmissionPolicy;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;

/// Counting with cooling and a sequential filter; shared by [`Mrfu`] and the adaptive rule.
#[derive(Debug)]
pub struct MrfuCounter {
    candidates: Candidates,
    period: u64,
    decay: f64,
    seen: u64,
    last_key: Option<Key>,
    filter_sequential: bool,
}

impl MrfuCounter {
    /// A counter cooling by `decay` every `period` accesses over at most `capacity`
    /// candidates.
    pub fn new(capacity: usize, period: u64, decay: f64, filter_sequential: bool) -> Self {
        MrfuCounter {
            candidates: Candidates::new(capacity),
            period: period.max(1),
            decay,
            seen: 0,
            last_key: None,
            filter_sequential,
        }
    }

    /// Counts one access; returns the key's count after it (unchanged for a sequential
    /// continuation; 0 for a resident key, which is not counted).
    pub fn record(&mut self, key: Key, resident: bool) -> u32 {
        self.seen += 1;
        if self.seen.is_multiple_of(self.period) {
            self.candidates.cool(self.decay);
        }
        let sequential = self.filter_sequential
            && self
                .last_key
                .is_some_and(|p| key == p || key == p.wrapping_add(1));
        self.last_key = Some(key);
        if resident {
            return 0;
        }
        if sequential {
            self.candidates.count(key)
        } else {
            self.candidates.bump(key, 1)
        }
    }

    /// Forgets a placed key.
    pub fn forget(&mut self, key: Key) {
        self.candidates.forget(key)
    }

    /// The candidate table.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }
}

/// MRFU placement: threshold with cooling and a sequential filter.
#[derive(Debug)]
pub struct Mrfu {
    threshold: u32,
    counter: MrfuCounter,
}

impl Mrfu {
    /// Builds from `threshold=N` (default 2), `period=P` accesses (default 65536),
    /// `decay=D` in `[0, 1]` (default 0.5), `candidates=C` (default 65536), `sequential=0|1`
    /// (filter on, default 1).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let threshold = p.usize_in("threshold", 2, 1, 1 << 20)? as u32;
        let period = p.usize_in("period", 65536, 1, usize::MAX)? as u64;
        let decay = p.f64_in("decay", 0.5, 0.0, 1.0)?;
        let cands = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        let seq = p.usize_in("sequential", 1, 0, 1)? == 1;
        p.finish()?;
        Ok(Mrfu {
            threshold,
            counter: MrfuCounter::new(cands, period, decay, seq),
        })
    }

    /// The counter.
    pub fn counter(&self) -> &MrfuCounter {
        &self.counter
    }
}

impl AdmissionPolicy for Mrfu {
    fn name(&self) -> String {
        format!("mrfu(threshold={})", self.threshold)
    }
    fn access(&mut self, key: Key, resident: bool) -> bool {
        let c = self.counter.record(key, resident);
        if !resident && c >= self.threshold {
            self.counter.forget(key);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::build_admission;

    #[test]
    fn a_scan_never_reaches_threshold_two_with_the_filter() {
        let mut with = build_admission("mrfu:threshold=2").unwrap();
        let mut without = build_admission("mrfu:threshold=2,sequential=0").unwrap();
        // Two sequential passes over 1000 blocks.
        let (mut placed_with, mut placed_without) = (0, 0);
        for _ in 0..2 {
            for k in 0..1000u64 {
                placed_with += with.access(k, false) as u32;
                placed_without += without.access(k, false) as u32;
            }
        }
        // With the filter only the first block of each pass counts (the second pass's
        // block 0 is not sequential to 999): block 0 reaches 2 and is placed.
        assert_eq!(placed_with, 1);
        assert_eq!(placed_without, 1000);
    }

    #[test]
    fn cooling_halves_counts_each_period() {
        let mut c = MrfuCounter::new(100, 4, 0.5, false);
        for _ in 0..3 {
            c.record(10, false);
        }
        assert_eq!(c.candidates().count(10), 3);
        c.record(20, false); // 4th access: cooling runs first, 3 -> 1
        assert_eq!(c.candidates().count(10), 1);
        assert_eq!(c.candidates().count(20), 1);
        for _ in 0..4 {
            c.record(30, false); // the 8th access cools again: 10 and 20 -> 0 (dropped), 30: 3 -> 1
        }
        assert_eq!(c.candidates().count(10), 0);
        assert_eq!(c.candidates().count(20), 0);
        assert_eq!(c.candidates().count(30), 2);
        assert_eq!(c.candidates().len(), 1);
    }
}
