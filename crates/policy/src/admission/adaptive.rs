//! SANCACHE's adaptive threshold: MRFU placement whose threshold follows the measured
//! benefit of placements (SANCACHE Figure 6), with a migration rate limit.
//!
//! Counting is [`super::mrfu`]'s (sequential filter), with the paper's cooling: every
//! `period` accesses each candidate's count is *reduced by* `cool-by` (default 1), so a
//! block that stops being touched loses its count at a steady pace (`cool-by=0` cools by
//! multiplying with `decay` instead, as MRFU does). Every `period` accesses — period `k`
//! is accesses `(k-1)*period + 1 ..= k*period` — the rule looks at the period's hits on
//! placed blocks and its migrations (placements). Every block resident in the partition
//! was placed by this policy, so "hits on placed blocks" is the partition's hits during
//! the period. The rule is the pure function [`step`], public so `alloc` (the fast tier's
//! controller) can reuse it:
//!
//! ```text
//! fn step(s, o) -> s':
//!     if o.migrations > 0 and o.hits < o.migrations:   // 1. placements did not pay
//!         s'.threshold = min(s.threshold + 1, s.max_threshold)
//!         s'.justify = max(s.justify - s.justify_step, s.min_justify)
//!         s'.last = RaisedThreshold; s'.reference = None
//!     elif s.reference is None:                        // 2. first paying period at this
//!         s'.last = Held; s'.reference = o.migrations  //    threshold: hold, remember
//!     elif |o.migrations - ref| / max(ref, 1) > s.justify:   // 3. paying, and the
//!         s'.threshold = max(s.threshold - 1, s.min_threshold) // migrations changed
//!         s'.justify = min(s.justify + s.justify_step, s.max_justify) // enough to act
//!         s'.last = LoweredThreshold; s'.reference = None
//!     else:                                            // 4. paying, little change:
//!         s'.last = Held                               //    hold the threshold
//! ```
//!
//! So a paying period (at least one hit per placement, or no placement at all) lowers the
//! threshold only when the number of migrations moved by more than `JUSTIFY` (a relative
//! change) from what it was when the threshold was last set, and each such move raises
//! `JUSTIFY`, so the next one needs a larger change: the threshold settles instead of
//! oscillating (the previous rule lowered and raised in a cycle of three periods and made
//! about 4x the placements of a fixed threshold for the same hits). A period whose
//! placements did not pay raises the threshold at once and relaxes `JUSTIFY`.
//!
//! Rate limit: at most `max_migrations` placements per period; further misses that reach
//! the threshold are bypassed and keep their counts (they can be placed next period, if
//! cooling leaves them enough).
//!
//! Where it shines: workloads whose reuse changes over time — the threshold rises during
//! scans and churn and holds where placements pay. Where it fails: the signal lags by a
//! period; a threshold raised during a burst of churn comes down only when the number of
//! migrations changes by more than `JUSTIFY`.

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
    /// Raised the threshold (placements did not pay).
    RaisedThreshold,
    /// Lowered the threshold and raised JUSTIFY (paying, migrations changed enough).
    LoweredThreshold,
    /// Held the threshold (paying, migrations changed too little).
    Held,
}

/// The adaptive rule's state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdState {
    /// Accesses a block needs before placement.
    pub threshold: u32,
    /// Relative change in migrations a paying period must show before the threshold is
    /// lowered.
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
    /// Migrations in the first paying period at the current threshold (`None` until
    /// that period has been seen).
    pub reference: Option<u64>,
}

impl Default for ThresholdState {
    /// The defaults of `adaptive`: threshold 2 in `[1, 16]`, JUSTIFY 0.5 in `[0.25, 8]` by
    /// steps of 0.25.
    fn default() -> Self {
        ThresholdState {
            threshold: 2,
            justify: 0.5,
            min_threshold: 1,
            max_threshold: 16,
            min_justify: 0.25,
            max_justify: 8.0,
            justify_step: 0.25,
            last: LastMove::None,
            reference: None,
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
    if o.migrations > 0 && o.hits < o.migrations {
        n.threshold = s.threshold.saturating_add(1).min(s.max_threshold);
        n.justify = (s.justify - s.justify_step).max(s.min_justify);
        n.last = LastMove::RaisedThreshold;
        n.reference = None;
        return n;
    }
    let Some(r) = s.reference else {
        n.last = LastMove::Held;
        n.reference = Some(o.migrations);
        return n;
    };
    let change = (o.migrations as f64 - r as f64).abs() / (r.max(1) as f64);
    if change > s.justify && s.threshold > s.min_threshold {
        n.threshold = s.threshold - 1;
        n.justify = (s.justify + s.justify_step).min(s.max_justify);
        n.last = LastMove::LoweredThreshold;
        n.reference = None;
    } else {
        n.last = LastMove::Held;
    }
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
    /// (16), `justify` (start, 0.5), `min-justify` (0.25), `max-justify` (8),
    /// `justify-step` (0.25), `period` (65536 accesses), `max-migrations` per period
    /// (default unlimited), `cool-by` (1; 0: multiply by `decay`), `decay` (0.5),
    /// `candidates` (65536), `sequential` (1).
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
        let min_justify = p.f64_in("min-justify", 0.25, 0.0, 1e9)?;
        let max_justify = p.f64_in("max-justify", 8.0, min_justify, 1e9)?;
        let justify = p.f64_in("justify", 0.5, min_justify, max_justify)?;
        let justify_step = p.f64_in("justify-step", 0.25, 0.0, 1e9)?;
        let period = p.usize_in("period", 65536, 1, usize::MAX)? as u64;
        let max_migrations = p.usize_in("max-migrations", usize::MAX, 0, usize::MAX)? as u64;
        let cool_by = p.usize_in("cool-by", 1, 0, 1 << 20)? as u32;
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
                reference: None,
            },
            counter: if cool_by > 0 {
                MrfuCounter::subtracting(cands, period, cool_by, seq)
            } else {
                MrfuCounter::new(cands, period, decay, seq)
            },
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
            justify: 0.5,
            min_threshold: 1,
            max_threshold: 4,
            min_justify: 0.25,
            max_justify: 1.0,
            justify_step: 0.25,
            last: LastMove::None,
            reference: None,
        }
    }

    #[test]
    fn scripted_trajectory() {
        let obs = |hits, migrations| PeriodObservation { hits, migrations };
        let mut s = start();
        // 5 hits for 10 placements did not pay: raise the threshold, relax JUSTIFY.
        s = step(s, obs(5, 10));
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (3, 0.25, LastMove::RaisedThreshold)
        );
        // First paying period at threshold 3: hold, remember 4 migrations.
        s = step(s, obs(30, 4));
        assert_eq!((s.threshold, s.reference), (3, Some(4)));
        // 4 -> 5 migrations (change 0.25, not above 0.25): hold.
        s = step(s, obs(30, 5));
        assert_eq!((s.threshold, s.justify, s.last), (3, 0.25, LastMove::Held));
        // 4 -> 10 (change 1.5 > 0.25): act, JUSTIFY up to 0.5.
        s = step(s, obs(40, 10));
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (2, 0.5, LastMove::LoweredThreshold)
        );
        // A steady paying workload then holds.
        for _ in 0..5 {
            s = step(s, obs(40, 10));
        }
        assert_eq!((s.threshold, s.justify, s.last), (2, 0.5, LastMove::Held));
        // Bounded above.
        for _ in 0..10 {
            s = step(s, obs(0, 10));
        }
        assert_eq!((s.threshold, s.justify), (4, 0.25));
    }

    #[test]
    fn a_steady_paying_workload_does_not_oscillate() {
        // The old rule lowered and raised in turn over three periods; this one holds.
        let mut s = ThresholdState::default();
        let mut moves = Vec::new();
        for _ in 0..30 {
            s = step(
                s,
                PeriodObservation {
                    hits: 300,
                    migrations: 100,
                },
            );
            moves.push(s.threshold);
        }
        assert!(moves[2..].windows(2).all(|w| w[0] == w[1]), "{moves:?}");
    }

    #[test]
    fn the_running_policy_follows_step() {
        let mut a = Adaptive::from_params(
            &Params::parse(
                "adaptive",
                "threshold=2,max-threshold=4,justify=0.5,min-justify=0.25,max-justify=1,\
                 justify-step=0.25,period=10,sequential=0,cool-by=0,decay=1",
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
        // Period 3: only hits: 10 / 0 (migrations 1 -> 0: change 1 > 0.25).
        for _ in 0..10 {
            a.access(2, true);
        }
        assert_eq!(placed, [false, true, false, false, true]);
        let trajectory: Vec<(u32, f64, LastMove)> = a
            .history()
            .map(|s| (s.threshold, s.justify, s.last))
            .collect();
        assert_eq!(
            trajectory,
            vec![
                (3, 0.25, LastMove::RaisedThreshold), // 0 < 1
                (3, 0.25, LastMove::Held),            // 7 >= 1: remember 1 migration
                (2, 0.5, LastMove::LoweredThreshold), // 1 -> 0 migrations: change 1
            ]
        );
    }

    #[test]
    fn cooling_subtracts_every_period() {
        // Threshold 3, cool-by 1 every 4 accesses: a block touched every other period
        // never reaches 3; touched twice per period it does.
        let mut a =
            build_admission("adaptive:threshold=3,min-threshold=3,period=4,sequential=0,cool-by=1")
                .unwrap();
        let mut placed = false;
        for k in 0..40u64 {
            let key = if k % 8 == 0 { 7 } else { 1000 + 3 * k };
            placed |= key == 7 && a.access(key, false);
            if key != 7 {
                a.access(key, false);
            }
        }
        assert!(!placed);
        let mut b =
            build_admission("adaptive:threshold=3,min-threshold=3,period=4,sequential=0,cool-by=1")
                .unwrap();
        let got: Vec<bool> = (0..6).map(|_| b.access(9, false)).collect();
        assert!(got.contains(&true), "{got:?}");
    }

    #[test]
    fn rate_limit_caps_placements_per_period() {
        // Threshold 1 held there, at most 5 placements per period of 100 accesses: of 300
        // distinct misses, the first 5 of each period are placed.
        let mut a = build_admission(
            "adaptive:threshold=1,max-threshold=1,max-migrations=5,period=100,sequential=0",
        )
        .unwrap();
        let placed: Vec<u64> = (0..300u64).filter(|&i| a.access(i * 3, false)).collect();
        assert_eq!(
            placed,
            [0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 200, 201, 202, 203, 204]
        );
        // Unlimited, every miss is placed.
        let mut b = build_admission("adaptive:threshold=1,max-threshold=1,period=100").unwrap();
        assert_eq!((0..300u64).filter(|&i| b.access(i * 3, false)).count(), 300);
    }
}
