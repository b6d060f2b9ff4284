//! SANCACHE's adaptive threshold: MRFU placement whose threshold follows the measured
//! benefit of placements, with a migration rate limit.
//!
//! Every `period` accesses the rule compares the period's benefit/cost ratio, hits on
//! placed blocks per migration (placement), with `JUSTIFY`, through the pure step function
//! [`step`] (reused by `alloc` for the fast tier):
//!
//! 1. ratio below JUSTIFY: placements did not pay — raise the threshold by one;
//! 2. ratio at or above JUSTIFY right after a raise that improved the ratio: being pickier
//!    paid — raise JUSTIFY by `justify_step`, asking more of the next placements;
//! 3. otherwise (the ratio is good and nothing was just raised, or no placement happened):
//!    lower both the threshold and JUSTIFY by one step towards their minimums, to let more
//!    blocks in.
//!
//! Bounds keep the threshold in `[min_threshold, max_threshold]` and JUSTIFY in
//! `[min_justify, max_justify]`. The rate limit places at most `max_migrations` blocks per
//! period; further qualifying misses are bypassed (and keep their counts).

use super::mrfu::MrfuCounter;
use super::AdmissionPolicy;
use crate::params::Params;
use crate::policy::Key;
use crate::PolicyError;
use serde::{Deserialize, Serialize};

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

/// One period's observation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeriodObservation {
    /// Hits on placed blocks during the period.
    pub hits: u64,
    /// Placements (migrations) during the period.
    pub migrations: u64,
}

/// The adaptive rule, one period: returns the next state.
pub fn step(s: ThresholdState, o: PeriodObservation) -> ThresholdState {
    let mut n = s;
    let ratio = if o.migrations == 0 {
        f64::INFINITY
    } else {
        o.hits as f64 / o.migrations as f64
    };
    if o.migrations > 0 && ratio < s.justify {
        n.threshold = (s.threshold + 1).min(s.max_threshold);
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
    history: Vec<ThresholdState>,
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
            history: Vec::new(),
        })
    }

    /// The current state.
    pub fn state(&self) -> ThresholdState {
        self.state
    }

    /// The state after each completed period, oldest first (bounded to the last 1024).
    pub fn history(&self) -> &[ThresholdState] {
        &self.history
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
        self.seen += 1;
        if self.seen.is_multiple_of(self.period) {
            self.state = step(
                self.state,
                PeriodObservation {
                    hits: self.hits,
                    migrations: self.migrations,
                },
            );
            if self.history.len() == 1024 {
                self.history.remove(0);
            }
            self.history.push(self.state);
            self.hits = 0;
            self.migrations = 0;
        }
        let c = self.counter.record(key, resident);
        if resident {
            self.hits += 1;
            return true;
        }
        if c >= self.state.threshold && self.migrations < self.max_migrations {
            self.counter.forget(key);
            self.migrations += 1;
            return true;
        }
        false
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
    fn rate_limit_caps_placements() {
        let mut a = build_admission(
            "adaptive:threshold=1,min-threshold=1,max-migrations=5,period=1000,sequential=0",
        )
        .unwrap();
        let placed: u32 = (0..100u64).map(|k| a.access(k * 3, false) as u32).sum();
        assert_eq!(placed, 5);
    }
}
