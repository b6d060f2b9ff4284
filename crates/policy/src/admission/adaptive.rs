//! SANCACHE's adaptive threshold: MRFU placement whose migration threshold follows the
//! paper's Figure 6 rule, with a migration rate limit that defers placements.
//!
//! Counting is [`super::mrfu`]'s (sequential filter, cooling by subtraction: every
//! `cool-s` seconds, default 15 as in the paper's Fig. 9-10 evaluation, each candidate's
//! count drops by `cool-by`, default 1; `cool-by=0` turns cooling off, which is MFU
//! counting under the same rule). A block is placed when its count reaches the threshold.
//! At the end of every period (`period-s`, default 15 s: "every 15 seconds in the
//! following evaluations") the rule looks at the period's hits on placed blocks
//! (`Δhits`) and its migrations (`Δmigs`). Periods are of the owner's clock
//! ([`AdmissionPolicy::tick`]); an owner without a clock gives `period=N` accesses
//! instead (and then cooling is every `cool-period` accesses, default `period`). Every
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
//! a later access (deferred, not dropped), unless cooling takes its count away first. The
//! owner's own limit (a migration that finds no room) hands the placement back with
//! [`AdmissionPolicy::deferred`], with the same effect.
//!
//! Under a controller ([`AdmissionPolicy::set_threshold`]) the threshold is the
//! controller's (which runs the same rule) and the policy's own rule stops; the counts
//! stay.
//!
//! Departures, by name (each listed beside the claims that depend on it in
//! `scenarios/sancache.toml`): counts live in a bounded table of `candidates` (a full
//! table forgets its coldest entries).
//!
//! Where it shines: a steady workload whose chunks differ in heat — the bar climbs until
//! only chunks that pay it are placed, and the threshold settles where migrations
//! become scarce. Where it fails: the bar moves by one per period, so with a large tier
//! (ratios in the hundreds) it needs hundreds of periods to get there (the reason for the
//! `average` variant), and a burst of churn raises the threshold by one per period only.

use super::mrfu::{cooling_from, Every, MrfuCounter};
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
    period: Every,
    /// With a period of time: when the current period ends (`None` before the first tick).
    period_end: Option<f64>,
    max_migrations: u64,
    seen: u64,
    hits: u64,
    migrations: u64,
    deferred: u64,
    /// The threshold is set from outside; the rule does not run.
    controlled: bool,
    history: VecDeque<ThresholdState>,
}

impl Adaptive {
    /// Builds from `threshold` (start, default 2), `min-threshold` (1), `justify` (start,
    /// 0), `justify-average` (0: Figure 6's steps; 1: the running mean), the period
    /// (`period-s`, default 15 s, or `period` accesses), `max-migrations` per period
    /// (default unlimited), the cooling (`cool-s`, default 15 s, or `cool-period`
    /// accesses, default `period` when that is given; `cool-by`, default 1, 0 for none,
    /// or `decay`), `candidates` (65536), `sequential` (1).
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let bad = |key: &str, message: &str| PolicyError::BadParam {
            policy: "adaptive".into(),
            key: key.into(),
            message: message.into(),
        };
        let min_threshold = p.usize_in("min-threshold", 1, 1, 1 << 20)? as u32;
        let threshold =
            p.usize_in("threshold", 2, min_threshold as usize, u32::MAX as usize)? as u32;
        let justify = p.f64_in("justify", 0.0, 0.0, 1e12)?;
        let rule = if p.usize_in("justify-average", 0, 0, 1)? == 1 {
            JustifyRule::Average
        } else {
            JustifyRule::Step
        };
        if p.has("period") && p.has("period-s") {
            return Err(bad(
                "period-s",
                "give `period-s` (seconds) or `period` (accesses), not both",
            ));
        }
        let period = if p.has("period") {
            Every::Accesses(p.usize_in("period", 65536, 1, usize::MAX)? as u64)
        } else {
            Every::Seconds(p.f64_in("period-s", 15.0, 1e-6, 1e9)?)
        };
        let max_migrations = p.usize_in("max-migrations", usize::MAX, 0, usize::MAX)? as u64;
        let cands = p.usize_in("candidates", 65536, 1, 1 << 30)?;
        let (candidates, mut cool_every) = cooling_from(p, "adaptive", cands, "cool-period")?;
        if let (Every::Accesses(n), false, false) = (period, p.has("cool-period"), p.has("cool-s"))
        {
            cool_every = Every::Accesses(n);
        }
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
            counter: MrfuCounter::with(candidates, cool_every, seq),
            period,
            period_end: None,
            max_migrations,
            seen: 0,
            hits: 0,
            migrations: 0,
            deferred: 0,
            controlled: false,
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

    /// Misses that reached the threshold but were deferred by the rate limit, so far.
    pub fn deferred_count(&self) -> u64 {
        self.deferred
    }

    /// Ends a period: applies [`step`] to what it observed (unless a controller sets the
    /// threshold).
    fn end_period(&mut self) {
        if !self.controlled {
            self.state = step(
                self.state,
                PeriodObservation {
                    hits: self.hits,
                    migrations: self.migrations,
                },
            );
        }
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
        if let Every::Accesses(n) = self.period {
            if self.seen.is_multiple_of(n) {
                self.end_period();
            }
        }
        place
    }
    fn tick(&mut self, now: f64) {
        self.counter.tick(now);
        let Every::Seconds(p) = self.period else {
            return;
        };
        if !now.is_finite() {
            return;
        }
        let mut end = *self.period_end.get_or_insert(now + p);
        // Periods with no access end too (each a period of no migrations); a clock that
        // jumps far ahead ends at most 2^16 of them.
        let mut k = 0;
        while now >= end && k < 1 << 16 {
            self.end_period();
            end += p;
            k += 1;
        }
        if now >= end {
            end = now + p;
        }
        self.period_end = Some(end);
    }
    fn deferred(&mut self, key: Key) {
        self.migrations = self.migrations.saturating_sub(1);
        self.deferred += 1;
        self.counter.restore(key, self.state.threshold);
    }
}

#[cfg(test)]
mod tests;
