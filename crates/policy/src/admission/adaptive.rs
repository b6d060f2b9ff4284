//! SANCACHE's adaptive threshold: MRFU placement whose threshold follows the measured
//! benefit of placements (SANCACHE Figure 6), with a migration rate limit.
//!
//! Counting is [`super::mrfu`]'s (cooling every `period` accesses, sequential filter). Every
//! `period` accesses — period `k` is accesses `(k-1)*period + 1 ..= k*period` — the rule
//! compares the period's benefit/cost ratio, hits on placed blocks per migration
//! (placement), with `JUSTIFY`. Every block resident in the partition was placed by this
//! policy, so "hits on placed blocks" is the partition's hits during the period (on blocks
//! placed in this period or earlier). The rule is the pure function [`step`], public so
//! `alloc` (the fast tier's controller) can reuse it:
//!
//! ```text
//! fn step(s, o) -> s':
//!     r = o.hits / o.migrations                 (no value when o.migrations = 0)
//!     if o.migrations > 0 and r < s.justify:    // 1. placements did not pay
//!         s'.threshold = min(s.threshold + 1, s.max_threshold)
//!         s'.last = RaisedThreshold
//!     elif o.migrations > 0 and s.last = RaisedThreshold and r > s.last_ratio:
//!         // 2. being pickier paid: demand more of the next placements
//!         s'.justify = min(s.justify + s.justify_step, s.max_justify)
//!         s'.last = RaisedJustify
//!     else:                                     // 3. r >= JUSTIFY, or no migration
//!         s'.threshold = max(s.threshold - 1, s.min_threshold)
//!         s'.justify = max(s.justify - s.justify_step, s.min_justify)
//!         s'.last = LoweredBoth
//!     s'.last_ratio = r if o.migrations > 0 else s.last_ratio
//! ```
//!
//! So a ratio exactly at JUSTIFY counts as paying; a period without migrations (nothing
//! reached the threshold, or an idle period) lowers both, letting more blocks in; and after
//! a raise of JUSTIFY the next paying period lowers both again, so the rule keeps probing
//! downwards rather than settling on a threshold that may have become too strict.
//!
//! Rate limit: at most `max_migrations` placements per period; further misses that reach
//! the threshold are bypassed and keep their counts (they can be placed next period, if
//! cooling leaves them enough).
//!
//! Where it shines: workloads whose reuse changes over time — the threshold rises during
//! scans and churn and falls when placements pay. Where it fails: the signal lags by a
//! period, and with few migrations per period the ratio is noisy, so short periods make
//! the threshold wander.

use super::mrfu::MrfuCounter;
use super::AdmissionPolicy;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What the last step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LastMove {
    /// Nothing yet.
    None,
    /// Raised the threshold.
    RaisedThreshold,
    /// Raised JUSTIFY.
    RaisedJustify,
    /// Lowered both.
    LoweredBoth,
}

/// The adaptive rule's state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdState {
    /// Accesses a block needs before placement.
    pub threshold: u32,
    /// Hits per migration a period must show.
    pub justify: f64,
    /// Lowest threshold.
    pub min_threshold: u32,
    /// Highest threshold.
    pub max_threshold: u32,
    /// Lowest JUSTIFY.
    pub min_justify: f64,
    /// Highest JUSTIFY.
    pub max_justify: f64,
    /// JUSTIFY's step.
    pub justify_step: f64,
    /// The previous step's move.
    pub last: LastMove,
    /// The previous period's ratio (hits per migration).
    pub last_ratio: f64,
}

impl Default for ThresholdState {
    /// The defaults of `adaptive`: threshold 2 in `[1, 16]`, JUSTIFY 1 in `[0.5, 8]` by
    /// steps of 0.5.
    fn default() -> Self {
        ThresholdState {
            threshold: 2,
            justify: 1.0,
            min_threshold: 1,
            max_threshold: 16,
            min_justify: 0.5,
            max_justify: 8.0,
            justify_step: 0.5,
            last: LastMove::None,
            last_ratio: 0.0,
        }
    }
}

/// One period's observation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeriodObservation {
    /// Hits on placed blocks during the period.
    pub hits: u64,
    /// Placements (migrations) during the period.
    pub migrations: u64,
}

/// The adaptive rule, one period: the state for the next period, from this period's
/// observation (rules in the module doc). Pure.
pub fn step(s: ThresholdState, o: PeriodObservation) -> ThresholdState {
    let mut n = s;
    let ratio = if o.migrations == 0 {
        f64::INFINITY
    } else {
        o.hits as f64 / o.migrations as f64
    };
    if o.migrations > 0 && ratio < s.justify {
        n.threshold = s.threshold.saturating_add(1).min(s.max_threshold);
        n.last = LastMove::RaisedThreshold;
    } else if o.migrations > 0 && s.last == LastMove::RaisedThreshold && ratio > s.last_ratio {
        n.justify = (s.justify + s.justify_step).min(s.max_justify);
        n.last = LastMove::RaisedJustify;
    } else {
        n.threshold = s.threshold.saturating_sub(1).max(s.min_threshold);
        n.justify = (s.justify - s.justify_step).max(s.min_justify);
        n.last = LastMove::LoweredBoth;
    }
    n.last_ratio = if ratio.is_finite() {
        ratio
    } else {
        s.last_ratio
    };
    n
}

/// MRFU placement with SANCACHE's adaptive threshold and a migration rate limit.
#[derive(Debug)]
pub struct Adaptive {
    state: ThresholdState,
    counter: MrfuCounter,
    period: u64,
    max_migrations: u64,
    seen: u64,
    hits: u64,
    migrations: u64,
    history: VecDeque<ThresholdState>,
}

impl Adaptive {
    /// Builds from `threshold` (start, default 2), `min-threshold` (1), `max-threshold`
    /// (16), `justify` (start, 1.0), `min-justify` (0.5), `max-justify` (8), `justify-step`
    /// (0.5), `period` (65536 accesses), `max-migrations` per period (default unlimited),
    /// `decay` (0.5), `candidates` (65536), `sequential` (1).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let min_threshold = p.usize_in("min-threshold", 1, 1, 1 << 20)? as u32;
        let max_threshold =
            p.usize_in("max-threshold", 16, min_threshold as usize, 1 << 20)? as u32;
        let threshold = p.usize_in(
            "threshold",
            2,
            min_threshold as usize,
            max_threshold as usize,
        )? as u32;
        let min_justify = p.f64_in("min-justify", 0.5, 0.0, 1e9)?;
        let max_justify = p.f64_in("max-justify", 8.0, min_justify, 1e9)?;
        let justify = p.f64_in("justify", 1.0, min_justify, max_justify)?;
        let justify_step = p.f64_in("justify-step", 0.5, 0.0, 1e9)?;
        let period = p.usize_in("period", 65536, 1, usize::MAX)? as u64;
        let max_migrations = p.usize_in("max-migrations", usize::MAX, 0, usize::MAX)? as u64;
        let decay = p.f64_in("decay", 0.5, 0.0, 1.0)?;
        let cands = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        let seq = p.usize_in("sequential", 1, 0, 1)? == 1;
        p.finish()?;
        Ok(Adaptive {
            state: ThresholdState {
                threshold,
                justify,
                min_threshold,
                max_threshold,
                min_justify,
                max_justify,
                justify_step,
                last: LastMove::None,
                last_ratio: 0.0,
            },
            counter: MrfuCounter::new(cands, period, decay, seq),
            period,
            max_migrations,
            seen: 0,
            hits: 0,
            migrations: 0,
            history: VecDeque::new(),
        })
    }

    /// The current state.
    pub fn state(&self) -> ThresholdState {
        self.state
    }

    /// The state after each completed period, oldest first (bounded to the last 1024).
    pub fn history(&self) -> impl ExactSizeIterator<Item = ThresholdState> + '_ {
        self.history.iter().copied()
    }

    /// Ends a period: applies [`step`] to what it observed.
    fn end_period(&mut self) {
        self.state = step(
            self.state,
            PeriodObservation {
                hits: self.hits,
                migrations: self.migrations,
            },
        );
        if self.history.len() == 1024 {
            self.history.pop_front();
        }
        self.history.push_back(self.state);
        self.hits = 0;
        self.migrations = 0;
    }
}

impl AdmissionPolicy for Adaptive {
    fn name(&self) -> String {
        format!(
            "adaptive(threshold={},justify={})",
            self.state.threshold, self.state.justify
        )
    }
    fn access(&mut self, key: Key, resident: bool) -> bool {
        let c = self.counter.record(key, resident);
        let place = if resident {
            self.hits += 1;
            true
        } else if c >= self.state.threshold && self.migrations < self.max_migrations {
            self.counter.forget(key);
            self.migrations += 1;
            true
        } else {
            false
        };
        self.seen += 1;
        if self.seen.is_multiple_of(self.period) {
            self.end_period();
        }
        place
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::build_admission;

    fn start() -> ThresholdState {
        ThresholdState {
            threshold: 2,
            justify: 1.0,
            min_threshold: 1,
            max_threshold: 4,
            min_justify: 0.5,
            max_justify: 2.0,
            justify_step: 0.5,
            last: LastMove::None,
            last_ratio: 0.0,
        }
    }

    #[test]
    fn scripted_trajectory() {
        let obs = |hits, migrations| PeriodObservation { hits, migrations };
        let mut s = start();
        // Poor ratio (0.5 < 1): raise the threshold.
        s = step(s, obs(5, 10));
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (3, 1.0, LastMove::RaisedThreshold)
        );
        // Better ratio (3 >= 1) after a raise that improved it: raise JUSTIFY.
        s = step(s, obs(30, 10));
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (3, 1.5, LastMove::RaisedJustify)
        );
        // Still good, nothing just raised: lower both.
        s = step(s, obs(30, 10));
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (2, 1.0, LastMove::LoweredBoth)
        );
        // No migrations at all: lower both to the minimums.
        s = step(s, obs(0, 0));
        s = step(s, obs(0, 0));
        assert_eq!((s.threshold, s.justify), (1, 0.5));
        // Bounded above.
        for _ in 0..10 {
            s = step(s, obs(0, 10));
        }
        assert_eq!(s.threshold, 4);
    }

    #[test]
    fn the_running_policy_follows_step() {
        let mut a = Adaptive::from_params(
            &Params::parse(
                "adaptive",
                "threshold=2,max-threshold=4,justify=1,min-justify=0.5,max-justify=2,\
                 justify-step=0.5,period=10,sequential=0",
            )
            .unwrap(),
        )
        .unwrap();
        let mut t = 0u64;
        let mut filler = |a: &mut Adaptive, n: usize| {
            for _ in 0..n {
                t += 2;
                assert!(!a.access(1_000 + t, false));
            }
        };
        let mut placed = Vec::new();
        // Period 1: block 1 placed on its 2nd miss, never hit: 0 hits / 1 migration.
        placed.push(a.access(1, false));
        placed.push(a.access(1, false));
        filler(&mut a, 8);
        // Period 2 (threshold 3): block 2 placed on its 3rd miss, then 7 hits: 7 / 1.
        for _ in 0..3 {
            placed.push(a.access(2, false));
        }
        for _ in 0..7 {
            a.access(2, true);
        }
        // Period 3: block 3 placed on its 3rd miss, no hits: 0 / 1.
        for _ in 0..3 {
            placed.push(a.access(3, false));
        }
        filler(&mut a, 7);
        // Period 4: only hits: 10 / 0.
        for _ in 0..10 {
            a.access(3, true);
        }
        assert_eq!(
            placed,
            [false, true, false, false, true, false, false, true]
        );
        let trajectory: Vec<(u32, f64, LastMove)> = a
            .history()
            .map(|s| (s.threshold, s.justify, s.last))
            .collect();
        assert_eq!(
            trajectory,
            vec![
                (3, 1.0, LastMove::RaisedThreshold), // 0 < 1
                (3, 1.5, LastMove::RaisedJustify),   // 7 >= 1, after a raise, 7 > 0
                (4, 1.5, LastMove::RaisedThreshold), // 0 < 1.5
                (3, 1.0, LastMove::LoweredBoth),     // no migration
            ]
        );
    }

    #[test]
    fn rate_limit_caps_placements_per_period() {
        // Threshold 1 held there (JUSTIFY 0 is always met), at most 5 placements per
        // period of 100 accesses: of 300 distinct misses, the first 5 of each period are
        // placed.
        let mut a = build_admission(
            "adaptive:threshold=1,justify=0,min-justify=0,max-migrations=5,period=100,sequential=0",
        )
        .unwrap();
        let placed: Vec<u64> = (0..300u64).filter(|&i| a.access(i * 3, false)).collect();
        assert_eq!(
            placed,
            [0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 200, 201, 202, 203, 204]
        );
        // Unlimited, every miss is placed.
        let mut b =
            build_admission("adaptive:threshold=1,justify=0,min-justify=0,period=100").unwrap();
        assert_eq!((0..300u64).filter(|&i| b.access(i * 3, false)).count(), 300);
    }
}
