//! SANCACHE's adaptive threshold: MRFU placement whose migration threshold follows the
//! paper's Figure 6 rule, with a migration rate limit that defers placements.
//!
//! Counting is [`super::mrfu`]'s (sequential filter), with the paper's cooling by
//! subtraction: every `cool-period` accesses (default: the adaptation `period`) each
//! candidate's count drops by `cool-by` (default 1; `cool-by=0` multiplies by `decay`
//! instead, as `mrfu` does). `cool-by=0,decay=1` turns cooling off: MFU counting. A block is
//! placed when its count reaches the threshold. At the end of every period the rule looks
//! at the period's hits on placed blocks (`Δhits`) and its migrations (`Δmigs`). Every
//! block resident in the partition was placed by this policy, so "hits on placed blocks"
//! are the partition's hits during the period. The rule is the pure function [`step`],
//! public so `alloc` (the fast tier's controller) can run it too:
//!
//! ```text
//! fn step(s, o) -> s':
//!     if o.migrations > s.justify:                 // enough migrations to judge
//!         ratio = o.hits / o.migrations            // benefit / cost (hits per chunk)
//!         if ratio < s.justify:  s'.threshold = s.threshold + 1   // not worth it
//!         else:                  s'.justify   = s.justify + 1     // paid: ask more
//!     else:                                        // too few migrations
//!         s'.threshold = max(s.threshold - 1, s.min_threshold)
//!         s'.justify   = max(s.justify - 1, 0)
//! ```
//!
//! That is Figure 6 step by step: JUSTIFY is a bar on hits per migrated chunk that starts
//! at 0 and rises by one on every period whose placements cleared it; a period that
//! falls short raises the threshold (more selective); a period with no more migrations
//! than JUSTIFY lowers both, to get chunks moving again. There is no upper bound on the
//! threshold or on JUSTIFY (the paper has none); the floors are the ones the paper
//! implies (a threshold below one access, or a negative bar, mean nothing).
//!
//! `justify-average=1` is the variant the paper reports adopting later for large
//! caches, where JUSTIFY climbed too slowly by steps of one: JUSTIFY is the running
//! (cumulative) mean of the ratio over every period that had migrations, updated after
//! each such period; the branches are unchanged (a starved period still lowers the
//! threshold, and leaves the mean alone). The paper warns it oscillates on very dynamic
//! workloads; it is not the default.
//!
//! Units: our threshold is the access count at which a chunk is placed (`count >=
//! threshold`), as in `threshold:n=N`. The paper starts at "1, migrated on a second
//! hit", so the default start here is 2 (placed on its second access).
//!
//! Rate limit: at most `max-migrations` placements per period; a miss that reaches the
//! threshold beyond that is served from the disk and keeps its count, so it is placed at
//! a later access (deferred, not dropped), unless cooling takes its count away first.
//!
//! Departures, by name (each listed beside the claims that depend on it in
//! `scenarios/sancache.toml`): the period is a number of accesses, not 15 s of time
//! (an admission policy sees no clock; scenarios pick the number of accesses their tier
//! sees in about 15 s, and a cooling period for the paper's 30 s). Counts live in a
//! bounded table of `candidates` (a full table forgets its coldest entries).
//!
//! Where it shines: a steady workload whose chunks differ in heat — the bar climbs until
//! only chunks that pay it are placed, and the threshold settles where migrations
//! become scarce. Where it fails: the bar moves by one per period, so with a large tier
//! (ratios in the hundreds) it needs hundreds of periods to get there (the reason for the
//! `average` variant), and a burst of churn raises the threshold by one per period only.

use super::mrfu::MrfuCounter;
use super::AdmissionPolicy;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How JUSTIFY moves on a period whose placements paid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JustifyRule {
    /// Figure 6: up by one on a paying period, down by one on a starved one.
    #[default]
    Step,
    /// The paper's later variant: the running mean of hits per migration.
    Average,
}

/// What the last step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LastMove {
    /// Nothing yet.
    None,
    /// Raised the threshold: the period's hits per migration fell short of JUSTIFY.
    RaisedThreshold,
    /// Raised JUSTIFY (held the threshold): the period's migrations paid.
    RaisedJustify,
    /// Lowered the threshold and JUSTIFY: no more migrations than JUSTIFY.
    Lowered,
}

/// The adaptive rule's state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThresholdState {
    /// Access count at which a chunk is placed.
    pub threshold: u32,
    /// The bar on hits per migration (Figure 6's JUSTIFY); also the number of migrations
    /// a period must exceed to be judged.
    pub justify: f64,
    /// Lowest threshold (1: every counted miss is placed).
    pub min_threshold: u32,
    /// How JUSTIFY moves.
    pub rule: JustifyRule,
    /// Sum of hits per migration over the periods that had migrations (for
    /// [`JustifyRule::Average`]).
    pub ratio_sum: f64,
    /// Number of periods that had migrations.
    pub ratio_periods: u64,
    /// The previous step's move.
    pub last: LastMove,
}

impl Default for ThresholdState {
    /// Figure 6's start: threshold 2 (the paper's "migrated on a second hit"), JUSTIFY 0,
    /// floor 1, JUSTIFY by steps.
    fn default() -> Self {
        ThresholdState {
            threshold: 2,
            justify: 0.0,
            min_threshold: 1,
            rule: JustifyRule::Step,
            ratio_sum: 0.0,
            ratio_periods: 0,
            last: LastMove::None,
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
/// observation (Figure 6; rules in the module doc). Pure.
pub fn step(s: ThresholdState, o: PeriodObservation) -> ThresholdState {
    let mut n = s;
    let migs = o.migrations as f64;
    if migs > s.justify {
        // migs > justify >= 0, so migs >= 1.
        let ratio = o.hits as f64 / migs;
        n.ratio_sum += ratio;
        n.ratio_periods += 1;
        if ratio < s.justify {
            n.threshold = s.threshold.saturating_add(1);
            n.last = LastMove::RaisedThreshold;
        } else {
            n.last = LastMove::RaisedJustify;
            if s.rule == JustifyRule::Step {
                n.justify = s.justify + 1.0;
            }
        }
        if s.rule == JustifyRule::Average {
            n.justify = n.ratio_sum / n.ratio_periods as f64;
        }
    } else {
        n.threshold = s.threshold.saturating_sub(1).max(s.min_threshold);
        if s.rule == JustifyRule::Step {
            n.justify = (s.justify - 1.0).max(0.0);
        }
        n.last = LastMove::Lowered;
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
    deferred: u64,
    history: VecDeque<ThresholdState>,
    /// Its threshold is set from outside ([`AdmissionPolicy::set_threshold`]): periods
    /// end without stepping it.
    controlled: bool,
}

impl Adaptive {
    /// Builds from `threshold` (start, default 2), `min-threshold` (1), `justify` (start,
    /// 0), `justify-average` (0: Figure 6's steps; 1: the running mean), `period`
    /// (65536 accesses), `max-migrations` per period (default unlimited), `cool-by` (1;
    /// 0: multiply by `decay`), `cool-period` (accesses between coolings, default
    /// `period`), `decay` (0.5), `candidates` (65536), `sequential` (1).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let min_threshold = p.usize_in("min-threshold", 1, 1, 1 << 20)? as u32;
        let threshold =
            p.usize_in("threshold", 2, min_threshold as usize, u32::MAX as usize)? as u32;
        let justify = p.f64_in("justify", 0.0, 0.0, 1e12)?;
        let rule = if p.usize_in("justify-average", 0, 0, 1)? == 1 {
            JustifyRule::Average
        } else {
            JustifyRule::Step
        };
        let period = p.usize_in("period", 65536, 1, usize::MAX)? as u64;
        let max_migrations = p.usize_in("max-migrations", usize::MAX, 0, usize::MAX)? as u64;
        let cool_by = p.usize_in("cool-by", 1, 0, 1 << 20)? as u32;
        let cool_period = p.usize_in("cool-period", period as usize, 1, usize::MAX)? as u64;
        let decay = p.f64_in("decay", 0.5, 0.0, 1.0)?;
        let cands = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        let seq = p.usize_in("sequential", 1, 0, 1)? == 1;
        p.finish()?;
        Ok(Adaptive {
            state: ThresholdState {
                threshold,
                justify,
                min_threshold,
                rule,
                ..ThresholdState::default()
            },
            counter: if cool_by > 0 {
                MrfuCounter::subtracting(cands, cool_period, cool_by, seq)
            } else {
                MrfuCounter::new(cands, cool_period, decay, seq)
            },
            period,
            max_migrations,
            seen: 0,
            hits: 0,
            migrations: 0,
            deferred: 0,
            history: VecDeque::new(),
            controlled: false,
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

    /// Misses that reached the threshold but were deferred by the rate limit, so far.
    pub fn deferred(&self) -> u64 {
        self.deferred
    }

    /// Ends a period: applies [`step`] to what it observed.
    fn end_period(&mut self) {
        if self.controlled {
            self.hits = 0;
            self.migrations = 0;
            return;
        }
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
    /// The controller's threshold replaces the policy's own rule from now on (its
    /// candidates' counts and its rate limit stay).
    fn set_threshold(&mut self, n: u32) -> bool {
        self.state.threshold = n.max(1);
        self.controlled = true;
        true
    }
    fn threshold(&self) -> Option<u32> {
        Some(self.state.threshold)
    }
    fn candidates(&self) -> Option<u64> {
        Some(self.counter.candidates().len() as u64)
    }
    fn access(&mut self, key: Key, resident: bool) -> bool {
        let c = self.counter.record(key, resident);
        let place = if resident {
            self.hits += 1;
            true
        } else if c >= self.state.threshold {
            if self.migrations < self.max_migrations {
                self.counter.forget(key);
                self.migrations += 1;
                true
            } else {
                self.deferred += 1;
                false
            }
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
    use proptest::prelude::*;

    fn obs(hits: u64, migrations: u64) -> PeriodObservation {
        PeriodObservation { hits, migrations }
    }

    #[test]
    fn figure6_trajectory() {
        use LastMove::*;
        let mut s = ThresholdState::default();
        let seq = [
            (obs(0, 0), (1, 0.0, Lowered)), // 0 migrations, not > 0: lower both
            (obs(50, 10), (1, 1.0, RaisedJustify)), // 10 > 0, 5/chunk >= 0
            (obs(5, 10), (2, 1.0, RaisedThreshold)), // 0.5/chunk < 1
            (obs(30, 10), (2, 2.0, RaisedJustify)), // 3 >= 1
            (obs(30, 10), (2, 3.0, RaisedJustify)), // 3 >= 2
            (obs(30, 10), (2, 4.0, RaisedJustify)), // 3 >= 3
            (obs(30, 10), (3, 4.0, RaisedThreshold)), // 3 < 4
            (obs(12, 3), (2, 3.0, Lowered)), // 3 migrations, not > 4
            (obs(40, 3), (1, 2.0, Lowered)), // 3, not > 3: lower, however good
            (obs(40, 3), (1, 3.0, RaisedJustify)), // 3 > 2, 13.3 >= 2
            (obs(0, 0), (1, 2.0, Lowered)), // floor at 1
        ];
        for (k, (o, want)) in seq.into_iter().enumerate() {
            s = step(s, o);
            assert_eq!((s.threshold, s.justify, s.last), want, "period {}", k + 1);
        }
    }

    #[test]
    fn no_cap_on_the_threshold() {
        // A chunk that never pays: the threshold rises by one every period, past any cap
        // (the old rule stopped at 16).
        let mut s = ThresholdState {
            justify: 1.0,
            ..ThresholdState::default()
        };
        for _ in 0..200 {
            s = step(s, obs(0, 100));
        }
        assert_eq!((s.threshold, s.justify), (202, 1.0));
    }

    #[test]
    fn the_bar_settles_at_what_placements_earn() {
        // Placements that earn 6 hits each, 100 migrations a period: JUSTIFY climbs by
        // one a period until it passes what placements earn (7 > 6), then the threshold
        // rises by one a period (this constant observation does not react to it).
        let mut s = ThresholdState::default();
        let mut bars = Vec::new();
        for _ in 0..10 {
            s = step(s, obs(600, 100));
            bars.push(s.justify);
        }
        assert_eq!(bars, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0, 7.0, 7.0]);
        assert_eq!(s.threshold, 5);
    }

    #[test]
    fn running_average_variant() {
        let mut s = ThresholdState {
            rule: JustifyRule::Average,
            ..ThresholdState::default()
        };
        s = step(s, obs(40, 10)); // ratio 4 >= 0; mean 4
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (2, 4.0, LastMove::RaisedJustify)
        );
        s = step(s, obs(20, 10)); // ratio 2 < 4: raise; mean 3
        assert_eq!((s.threshold, s.justify), (3, 3.0));
        s = step(s, obs(90, 10)); // ratio 9 >= 3; mean 5
        assert_eq!((s.threshold, s.justify), (3, 5.0));
        s = step(s, obs(90, 5)); // 5 migrations, not > 5: lower; mean kept
        assert_eq!(
            (s.threshold, s.justify, s.last),
            (2, 5.0, LastMove::Lowered)
        );
    }

    #[test]
    fn the_running_policy_follows_step() {
        let mut a = Adaptive::from_params(
            &Params::parse("adaptive", "period=10,sequential=0,cool-by=0,decay=1").unwrap(),
        )
        .unwrap();
        let mut placed = Vec::new();
        // Period 1 (threshold 2): block 1 placed on its 2nd miss, 8 one-off misses:
        // 0 hits for 1 migration; 1 > 0 and 0 >= 0: JUSTIFY 1.
        placed.push(a.access(1, false));
        placed.push(a.access(1, false));
        for k in 0..8 {
            assert!(!a.access(1_000 + 2 * k, false));
        }
        // Period 2: block 2 placed on its 2nd miss, then 8 hits: 1 migration, not > 1:
        // lower both (threshold 1, JUSTIFY 0).
        placed.push(a.access(2, false));
        placed.push(a.access(2, false));
        for _ in 0..8 {
            a.access(2, true);
        }
        // Period 3 (threshold 1): block 3 placed on its first miss, 9 hits: JUSTIFY 1.
        placed.push(a.access(3, false));
        for _ in 0..9 {
            a.access(3, true);
        }
        // Period 4: 3 placements, 7 hits: 3 > 1, 2.3 >= 1: JUSTIFY 2.
        for k in 4..7 {
            placed.push(a.access(k, false));
        }
        for _ in 0..7 {
            a.access(3, true);
        }
        // Period 5: 4 placements, 6 hits: 4 > 2, 1.5 < 2: threshold 2.
        for k in 7..11 {
            placed.push(a.access(k, false));
        }
        for _ in 0..6 {
            a.access(3, true);
        }
        assert_eq!(
            placed,
            [false, true, false, true, true, true, true, true, true, true, true, true]
        );
        let trajectory: Vec<(u32, f64, LastMove)> = a
            .history()
            .map(|s| (s.threshold, s.justify, s.last))
            .collect();
        assert_eq!(
            trajectory,
            [
                (2, 1.0, LastMove::RaisedJustify),
                (1, 0.0, LastMove::Lowered),
                (1, 1.0, LastMove::RaisedJustify),
                (1, 2.0, LastMove::RaisedJustify),
                (2, 2.0, LastMove::RaisedThreshold),
            ]
        );
        assert_eq!(a.name(), "adaptive(threshold=2,justify=2)");
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
        // A block seen every 4th access: cooled every 4 accesses it never passes 1;
        // cooled every 8 (cool-period) its count goes 1, 2, (cooled) 2, 3: placed at its
        // 4th access.
        let mut c = build_admission(
            "adaptive:threshold=3,min-threshold=3,period=4,cool-period=8,sequential=0,cool-by=1",
        )
        .unwrap();
        let mut when = None;
        for k in 0..40u64 {
            let key = if k % 4 == 0 { 7 } else { 1000 + 3 * k };
            if c.access(key, false) && key == 7 {
                when = Some(k / 4 + 1);
                break;
            }
        }
        assert_eq!(when, Some(4));
    }

    #[test]
    fn rate_limit_defers_placements() {
        // Threshold 1, at most 5 placements per period of 100 accesses, 300 distinct
        // misses (the indices placed are listed): period 1 places 5 (0 hits per migration clears the bar 0: JUSTIFY 1),
        // period 2 places 5 (0 < 1: threshold 2), period 3 places none (no key is seen
        // twice).
        let mut a = Adaptive::from_params(
            &Params::parse(
                "adaptive",
                "threshold=1,max-migrations=5,period=100,sequential=0",
            )
            .unwrap(),
        )
        .unwrap();
        let placed: Vec<u64> = (0..300u64).filter(|&i| a.access(i * 3, false)).collect();
        assert_eq!(placed, [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]);
        assert_eq!(a.deferred(), 190);
        // A deferred block keeps its count: placed at its next miss once the limit allows.
        let mut b = Adaptive::from_params(
            &Params::parse(
                "adaptive",
                "max-migrations=1,period=4,sequential=0,cool-by=0,decay=1",
            )
            .unwrap(),
        )
        .unwrap();
        assert!(!b.access(10, false));
        assert!(b.access(10, false)); // count 2: placed
        assert!(!b.access(20, false));
        assert!(!b.access(20, false)); // count 2, deferred; period ends (JUSTIFY 1)
        assert_eq!(b.deferred(), 1);
        assert!(b.access(20, false)); // count 3 >= 2, new period: placed
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Figure 6's invariants on any sequence of periods: the threshold stays at or
        /// above its floor and moves by at most one; JUSTIFY stays non-negative and (by
        /// steps) moves by at most one; exactly the published branch is taken.
        #[test]
        fn figure6_invariants(
            start in 1u32..40,
            periods in prop::collection::vec((0u64..500, 0u64..60), 1..120),
        ) {
            let mut s = ThresholdState { threshold: start, ..ThresholdState::default() };
            for (hits, migrations) in periods {
                let n = step(s, obs(hits, migrations));
                prop_assert!(n.threshold >= n.min_threshold);
                prop_assert!(n.justify >= 0.0);
                prop_assert!(n.threshold.abs_diff(s.threshold) <= 1);
                prop_assert!((n.justify - s.justify).abs() <= 1.0);
                let judged = migrations as f64 > s.justify;
                if !judged {
                    prop_assert_eq!(n.threshold, s.threshold.saturating_sub(1).max(1));
                    prop_assert_eq!(n.justify, (s.justify - 1.0).max(0.0));
                } else if (hits as f64) < s.justify * migrations as f64 {
                    prop_assert_eq!(n.threshold, s.threshold + 1);
                    prop_assert_eq!(n.justify, s.justify);
                } else {
                    prop_assert_eq!(n.threshold, s.threshold);
                    prop_assert_eq!(n.justify, s.justify + 1.0);
                }
                s = n;
            }
        }

        /// The average variant keeps JUSTIFY at the mean ratio of the judged periods.
        #[test]
        fn average_is_the_mean_of_judged_ratios(
            periods in prop::collection::vec((0u64..500, 0u64..60), 1..80),
        ) {
            let mut s = ThresholdState { rule: JustifyRule::Average, ..ThresholdState::default() };
            let mut ratios = Vec::new();
            for (hits, migrations) in periods {
                if migrations as f64 > s.justify {
                    ratios.push(hits as f64 / migrations as f64);
                }
                s = step(s, obs(hits, migrations));
                if !ratios.is_empty() {
                    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
                    prop_assert!((s.justify - mean).abs() < 1e-9);
                } else {
                    prop_assert_eq!(s.justify, 0.0);
                }
                prop_assert!(s.threshold >= 1);
            }
        }
    }
}
