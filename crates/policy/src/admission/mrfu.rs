//! MRFU placement (SANCACHE): the access-count threshold of [`super::threshold`], with
//! periodic cooling of the candidates' counts and a sequential filter.
//!
//! * Cooling: once every period, every candidate's count drops by `cool-by` (default 1,
//!   never below zero), so a block must be hot *recently* to be placed — the "recently"
//!   in MRFU (most recently and frequently used). The period is of time, as published
//!   (`cool-s`, default 15 s: the paper's evaluation decrements by 1 every 15 s, its
//!   example every 30 s), read from the owner's clock through [`AdmissionPolicy::tick`];
//!   or, for an owner without a clock, of `period` accesses (hits and misses alike; the
//!   access that completes a period is counted after the cooling). `decay=D` multiplies
//!   the counts by `D` each period (rounded down) instead of subtracting. Cooling is lazy
//!   ([`super::threshold::Candidates::cool`] advances an epoch; a count catches up when
//!   touched; zeros leave when the bounded table is swept), so it costs O(1) per period.
//! * Sequential filter: an access to the previous access's key or to the previous key + 1
//!   continues a sequential run and adds nothing to any count, so a run counts once (at
//!   its first block). Hits take part in runs too. Sequential streams are what disks serve
//!   well; a fast tier should not spend migrations on them.
//!
//! Where it shines: hot sets that drift (cooling forgets yesterday's hot blocks) mixed with
//! scans and backups (the filter keeps them out). Where it fails: a workload whose hot
//! blocks are themselves read sequentially (a small file read whole, again and again) —
//! only the first block of each run is ever placed; and blocks whose reuse interval is
//! longer than a few periods never accumulate a count.

use super::threshold::Candidates;
use super::AdmissionPolicy;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;

/// How often counts are cooled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Every {
    /// Every this many accesses.
    Accesses(u64),
    /// Every this many seconds of the owner's clock ([`AdmissionPolicy::tick`]).
    Seconds(f64),
}

impl std::fmt::Display for Every {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Every::Accesses(n) => write!(f, "{n} accesses"),
            Every::Seconds(s) => write!(f, "{s}s"),
        }
    }
}

/// Counting with cooling and a sequential filter; shared by [`Mrfu`] and the adaptive rule.
#[derive(Debug)]
pub struct MrfuCounter {
    candidates: Candidates,
    every: Every,
    seen: u64,
    /// With [`Every::Seconds`]: when the next cooling is due (`None` before the first tick).
    next_cool: Option<f64>,
    last_key: Option<Key>,
    filter_sequential: bool,
}

impl MrfuCounter {
    /// A counter cooling by `decay` every `period` accesses over at most `capacity`
    /// candidates.
    pub fn new(capacity: usize, period: u64, decay: f64, filter_sequential: bool) -> Self {
        Self::with(
            Candidates::with_decay(capacity, decay),
            Every::Accesses(period.max(1)),
            filter_sequential,
        )
    }

    /// A counter whose counts drop by `by` every `period` accesses (SANCACHE's cooling by
    /// subtraction) over at most `capacity` candidates.
    pub fn subtracting(capacity: usize, period: u64, by: u32, filter_sequential: bool) -> Self {
        Self::with(
            Candidates::with_subtraction(capacity, by),
            Every::Accesses(period.max(1)),
            filter_sequential,
        )
    }

    /// A counter over `candidates` (which say how a cooling changes a count), cooled
    /// `every` period.
    pub fn with(candidates: Candidates, every: Every, filter_sequential: bool) -> Self {
        let every = match every {
            Every::Accesses(n) => Every::Accesses(n.max(1)),
            Every::Seconds(s) => Every::Seconds(if s > 0.0 { s } else { f64::INFINITY }),
        };
        MrfuCounter {
            candidates,
            every,
            seen: 0,
            next_cool: None,
            last_key: None,
            filter_sequential,
        }
    }

    /// The owner's clock reads `now` seconds: with periods of time, one cooling per period
    /// that has ended since the last tick (the first tick starts the first period).
    pub fn tick(&mut self, now: f64) {
        let Every::Seconds(p) = self.every else {
            return;
        };
        if !now.is_finite() {
            return;
        }
        let next = *self.next_cool.get_or_insert(now + p);
        if now >= next {
            // Each cooling is O(1); a clock that jumps far ahead cools at most 2^20 times
            // (more would leave every count at zero anyway).
            let k = (((now - next) / p).floor() + 1.0).min((1u32 << 20) as f64) as u32;
            for _ in 0..k {
                self.candidates.cool();
            }
            self.next_cool = Some(next + k as f64 * p);
        }
    }
    /// Counts one access; returns the key's count after it (unchanged for a sequential
    /// continuation; 0 for a resident key, which is not counted).
    pub fn record(&mut self, key: Key, resident: bool) -> u32 {
        self.seen += 1;
        if let Every::Accesses(p) = self.every {
            if self.seen.is_multiple_of(p) {
                self.candidates.cool();
            }
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

    /// Gives a key whose placement was deferred its count back (at least `count`).
    pub fn restore(&mut self, key: Key, count: u32) {
        let c = self.candidates.count(key);
        if c < count {
            self.candidates.bump(key, count - c);
        }
    }

    /// How often counts are cooled.
    pub fn every(&self) -> Every {
        self.every
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

/// Reads `policy`'s cooling from `p`: `cool-s` seconds (default 15) or `period_key`
/// accesses (not both), and `cool-by` (default 1; 0: no cooling) or `decay` (not both),
/// over at most `cands` candidates.
pub(crate) fn cooling_from(
    p: &Params,
    policy: &str,
    cands: usize,
    period_key: &str,
) -> Result<(Candidates, Every), PolicyError> {
    let bad = |key: &str, message: &str| PolicyError::BadParam {
        policy: policy.into(),
        key: key.into(),
        message: message.into(),
    };
    if p.has(period_key) && p.has("cool-s") {
        return Err(bad(
            "cool-s",
            &format!("give `cool-s` (seconds) or `{period_key}` (accesses), not both"),
        ));
    }
    let every = if p.has(period_key) {
        Every::Accesses(p.usize_in(period_key, 65536, 1, usize::MAX)? as u64)
    } else {
        Every::Seconds(p.f64_in("cool-s", 15.0, 1e-6, 1e9)?)
    };
    if p.has("decay") && p.has("cool-by") {
        return Err(bad(
            "decay",
            "give `decay` (multiply) or `cool-by` (subtract), not both",
        ));
    }
    let candidates = if p.has("decay") {
        Candidates::with_decay(cands, p.f64_in("decay", 0.5, 0.0, 1.0)?)
    } else {
        match p.usize_in("cool-by", 1, 0, 1 << 20)? as u32 {
            0 => Candidates::with_decay(cands, 1.0),
            by => Candidates::with_subtraction(cands, by),
        }
    };
    Ok((candidates, every))
}

impl Mrfu {
    /// Builds from `threshold=N` (default 2), the cooling (`cool-s=S` seconds, default 15,
    /// or `period=P` accesses; `cool-by=B`, default 1, or `decay=D` in `[0, 1]`),
    /// `candidates=C` (default 65536), `sequential=0|1` (filter on, default 1).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let threshold = p.usize_in("threshold", 2, 1, 1 << 20)? as u32;
        let cands = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        let (candidates, every) = cooling_from(p, "mrfu", cands, "period")?;
        let seq = p.usize_in("sequential", 1, 0, 1)? == 1;
        p.finish()?;
        Ok(Mrfu {
            threshold,
            counter: MrfuCounter::with(candidates, every, seq),
        })
    }

    /// The counter.
    pub fn counter(&self) -> &MrfuCounter {
        &self.counter
    }
}

/// How a cooling changes a count, for names: `by=N` or `decay=D`.
pub(crate) fn cooling_name(c: &Candidates) -> String {
    let d = c.decay();
    if d < 0.0 {
        format!("by={}", -d)
    } else {
        format!("decay={d}")
    }
}

impl AdmissionPolicy for Mrfu {
    fn name(&self) -> String {
        format!(
            "mrfu(threshold={},cool={},{})",
            self.threshold,
            self.counter.every(),
            cooling_name(self.counter.candidates())
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
        Some(self.counter.candidates().len() as u64)
    }
    fn access(&mut self, key: Key, resident: bool) -> bool {
        let c = self.counter.record(key, resident);
        if !resident && c >= self.threshold {
            self.counter.forget(key);
            return true;
        }
        false
    }
    fn tick(&mut self, now: f64) {
        self.counter.tick(now);
    }
    fn deferred(&mut self, key: Key) {
        self.counter.restore(key, self.threshold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::build_admission;
    use proptest::prelude::*;

    #[test]
    fn a_sequential_scan_never_reaches_threshold_two_with_the_filter() {
        // One scan of 1000 distinct blocks, then the same scan again.
        let mut with = build_admission("mrfu:threshold=2,period=100000").unwrap();
        let mut without = build_admission("mrfu:threshold=2,period=100000,sequential=0").unwrap();
        let mut placed_with = Vec::new();
        let mut placed_without = Vec::new();
        for pass in 0..2 {
            for k in 0..1000u64 {
                if with.access(k, false) {
                    placed_with.push((pass, k));
                }
                if without.access(k, false) {
                    placed_without.push((pass, k));
                }
            }
        }
        // With the filter each pass counts once, at its first block; the second pass's
        // block 0 does not continue the run (999 -> 0), so block 0 alone reaches 2.
        assert_eq!(placed_with, vec![(1, 0)]);
        // Without it, every block reaches 2 on the second pass.
        assert_eq!(placed_without.len(), 1000);
        assert!(placed_without.iter().all(|&(pass, _)| pass == 1));
    }

    #[test]
    fn the_filter_counts_a_run_once_and_repeats_as_continuations() {
        let mut c = MrfuCounter::new(100, 1_000, 0.5, true);
        assert_eq!(c.record(50, false), 1); // starts a run
        assert_eq!(c.record(50, false), 1); // same key: continuation
        assert_eq!(c.record(51, false), 0); // next key: continuation, not counted
        assert_eq!(c.record(7, false), 1); // a jump: counted
        assert_eq!(c.record(50, false), 2); // a jump: counted
        assert_eq!(c.record(51, true), 0); // a hit continues the run too
        assert_eq!(c.record(52, false), 0); // so 52 is a continuation
        assert_eq!(c.record(49, false), 1); // backwards is a jump
        assert_eq!(c.candidates().count(51), 0);
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
            c.record(30, false); // the 8th access cools again: 10 and 20 -> 0, 30: 3 -> 1
        }
        assert_eq!(c.candidates().count(10), 0);
        assert_eq!(c.candidates().count(20), 0);
        assert_eq!(c.candidates().count(30), 2);
        assert_eq!(c.candidates().live(), 1);
    }

    #[test]
    fn a_block_must_be_hot_recently() {
        // Threshold 3, period 10: block 1 is read at accesses 1, 2, 11, 12, ...; fillers
        // (one-touch) in between. The 10th access halves block 1's count (2 -> 1), so it
        // reaches 3 only at access 12; without cooling it would at access 11.
        let run = |decay: &str| {
            let mut m = build_admission(&format!(
                "mrfu:threshold=3,period=10,sequential=0,decay={decay}"
            ))
            .unwrap();
            (1..=20u64)
                .filter(|&i| {
                    let key = if matches!(i, 1 | 2 | 11 | 12) {
                        1
                    } else {
                        1000 + 2 * i
                    };
                    m.access(key, false) && key == 1
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run("0.5"), vec![12]);
        assert_eq!(run("1"), vec![11]);
        // decay 0 forgets everything each period: 2 -> 0, then 11, 12 make only 2.
        assert_eq!(run("0"), Vec::<u64>::new());
    }

    proptest! {
        #[test]
        fn candidate_table_never_exceeds_its_bound(
            cap in 1usize..40,
            period in 1u64..50,
            seq in any::<bool>(),
            ops in proptest::collection::vec((0u64..300, any::<bool>()), 1..2000),
        ) {
            let mut c = MrfuCounter::new(cap, period, 0.5, seq);
            for (k, resident) in ops {
                c.record(k, resident);
                prop_assert!(c.candidates().len() <= cap);
            }
        }
    }
}
