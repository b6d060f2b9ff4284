//! Learning automata for end-to-end QoS (coordinated resource controllers, the paper in
//! `003_…`): each controller divides one resource (a host's link to its storage, or a
//! storage server's disk) between its workloads by a *linear reward-penalty* (L_R-P)
//! automaton over a discrete set of proportion vectors, and controllers at different
//! levels learn in turn by passing a token between the levels.
//!
//! * **Deviance from target** ([`dft`]), per application in its own metric: the relative
//!   distance of the measured metric from the SLO, positive when the application does
//!   better than its target and negative when it falls short; a best-effort application
//!   always reports 0 ([`Goal::BestEffort`]).
//! * **Error** of a controller ([`error`]): the sum of the squared dfts of the
//!   applications whose I/O it schedules (eq. 3). Doing better than the target counts as
//!   error too: what a priority application does not need is left to the others.
//! * **Feedback from the benefit of the last move** ([`feedback`]). An iteration measures
//!   the error with the current action in force (`e_before`), takes an action, waits an
//!   interval and measures again (`e_after`); the answer `f(k)` lies in `[0, 1]`, 0 the
//!   most positive and 1 the most negative, graded by how much the move helped:
//!   `f = e_after / (e_before + e_after)`. A move that removes all error gets 0, one that
//!   spoils a configuration on target gets 1, one that changes nothing gets 1/2 (and two
//!   errors of 0 give 1/2: nothing was learned). The ratio has no scale of its own, so no
//!   constant of ours sets what counts as a small error.
//! * **Update** of the chosen action `i` of `r`, reward rate `α`, penalty rate `β` (eqs. 1
//!   and 2):
//!   ```text
//!   p_i += α (1 − f) (1 − p_i) − β f p_i
//!   p_j += β f (1 / (r − 1) − p_j) − α (1 − f) p_j      for j ≠ i
//!   ```
//!   which keeps `Σ p = 1`.
//! * **Coordination** ([`Learners`]): each controller has a level (hosts, storage
//!   servers). With a token, only the controllers of the level holding it learn; the
//!   others hold their most probable action. A turn starts with one interval in which
//!   every controller holds its most probable action (the holders "first measure the
//!   current error"), then the holders take `turn` actions, each learned from the benefit
//!   over the interval before; then the token passes to the next level. Without a token
//!   every controller explores and learns at every interval from the same intervals. The
//!   actions a level holds when it does not learn are its most probable ones, ties going
//!   to the most even split (before anything is learned: equal shares).
//!
//! Randomness comes from the caller's [`rand::Rng`], so a run is reproducible from its
//! seed.

use crate::AllocError;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// What an application's SLO asks of its metric.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Goal {
    /// At least this much of a metric where more is better (throughput, IOPS, MB/s).
    AtLeast(f64),
    /// At most this much of a metric where less is better (latency).
    AtMost(f64),
    /// No SLO: its dft is always 0.
    BestEffort,
}

/// Deviance from target of `observed` against `goal`: `(observed − t) / t` for
/// [`Goal::AtLeast`], `(t − observed) / t` for [`Goal::AtMost`] (so above 0 is better than
/// the target either way), 0 for best effort, a non-positive target, or a measurement
/// that is not a number.
pub fn dft(goal: Goal, observed: f64) -> f64 {
    if !observed.is_finite() {
        return 0.0;
    }
    match goal {
        Goal::AtLeast(t) if t > 0.0 => (observed - t) / t,
        Goal::AtMost(t) if t > 0.0 => (t - observed) / t,
        _ => 0.0,
    }
}

/// A controller's error: the sum of its applications' squared deviances.
pub fn error(dfts: &[f64]) -> f64 {
    dfts.iter().map(|d| d * d).sum()
}

/// The answer `f(k)` in `[0, 1]` to a move that took the error from `before` to `after`:
/// `after / (before + after)` (0: all error removed; 1: a configuration on target spoiled;
/// 1/2: no change, or no error on either side). Negative or non-finite errors count as
/// the worst (`f64::MAX`).
pub fn feedback(before: f64, after: f64) -> f64 {
    let clean = |e: f64| {
        if e.is_finite() && e >= 0.0 {
            e
        } else {
            f64::MAX
        }
    };
    let (b, a) = (clean(before), clean(after));
    if a + b <= 0.0 {
        return 0.5;
    }
    // Halved first so that two errors of f64::MAX do not overflow.
    (a / 2.0) / (a / 2.0 + b / 2.0)
}

/// One controller's L_R-P automaton.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Automaton {
    actions: Vec<Vec<f64>>,
    p: Vec<f64>,
    alpha: f64,
    beta: f64,
    current: usize,
}

impl Automaton {
    /// An automaton over `actions` (each a proportion vector), uniform to start, with
    /// reward rate `alpha` in `(0, 1)` and penalty rate `beta` in `[0, 1)`. Its current
    /// action is the most even split.
    pub fn new(actions: Vec<Vec<f64>>, alpha: f64, beta: f64) -> Result<Self, AllocError> {
        if actions.is_empty() {
            return Err(AllocError::BadInput(
                "an automaton needs at least one action".into(),
            ));
        }
        if !(alpha > 0.0 && alpha < 1.0 && (0.0..1.0).contains(&beta)) {
            return Err(AllocError::BadInput(format!(
                "alpha {alpha} must lie in (0, 1) and beta {beta} in [0, 1)"
            )));
        }
        let r = actions.len();
        let mut a = Automaton {
            actions,
            p: vec![1.0 / r as f64; r],
            alpha,
            beta,
            current: 0,
        };
        a.exploit();
        Ok(a)
    }

    /// The paper's actions for two workloads: 10/90, 30/70, 50/50, 70/30, 90/10.
    pub fn paper_actions() -> Vec<Vec<f64>> {
        [0.1, 0.3, 0.5, 0.7, 0.9]
            .iter()
            .map(|&x| vec![x, 1.0 - x])
            .collect()
    }

    /// Samples an action from the probabilities and makes it current.
    pub fn choose<R: Rng + ?Sized>(&mut self, rng: &mut R) -> usize {
        let x: f64 = rng.gen();
        let mut acc = 0.0;
        self.current = self.p.len() - 1;
        for (i, &q) in self.p.iter().enumerate() {
            acc += q;
            if x < acc {
                self.current = i;
                break;
            }
        }
        self.current
    }

    /// Makes the most probable action current (no exploration).
    pub fn exploit(&mut self) -> usize {
        self.current = self.best();
        self.current
    }

    /// The current action.
    pub fn current(&self) -> usize {
        self.current
    }

    /// The current action's proportions.
    pub fn proportions(&self) -> &[f64] {
        &self.actions[self.current]
    }

    /// The actions' proportion vectors.
    pub fn actions(&self) -> &[Vec<f64>] {
        &self.actions
    }

    /// The most probable action; among equally probable ones, the most even split (the
    /// least squared distance from equal shares), then the lowest index.
    pub fn best(&self) -> usize {
        let unevenness = |a: &[f64]| {
            let even = 1.0 / a.len().max(1) as f64;
            a.iter().map(|x| (x - even) * (x - even)).sum::<f64>()
        };
        let mut b = 0;
        for i in 1..self.p.len() {
            let (pi, pb) = (self.p[i], self.p[b]);
            let tie = (pi - pb).abs() <= 1e-12;
            if (!tie && pi > pb)
                || (tie && unevenness(&self.actions[i]) < unevenness(&self.actions[b]) - 1e-12)
            {
                b = i;
            }
        }
        b
    }

    /// The action probabilities.
    pub fn probabilities(&self) -> &[f64] {
        &self.p
    }

    /// Updates the probabilities from the answer `f` (clamped to `[0, 1]`) to the
    /// current action (eqs. 1 and 2).
    pub fn learn(&mut self, f: f64) {
        let f = if f.is_nan() { 0.5 } else { f.clamp(0.0, 1.0) };
        let (i, r) = (self.current, self.p.len());
        if r == 1 {
            return;
        }
        let (a, b) = (self.alpha * (1.0 - f), self.beta * f);
        let share = 1.0 / (r - 1) as f64;
        for (j, q) in self.p.iter_mut().enumerate() {
            *q = if j == i {
                *q + a * (1.0 - *q) - b * *q
            } else {
                *q - a * *q + b * (share - *q)
            };
        }
        // Guard against rounding drift.
        let sum: f64 = self.p.iter().sum();
        self.p.iter_mut().for_each(|q| *q /= sum);
    }
}

/// How the controllers take turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Coordination {
    /// A token passed between the levels: the holding level learns for one measuring
    /// interval plus `turn` actions, the others hold their most probable actions.
    Token {
        /// Actions a level takes per turn (at least 1).
        turn: u32,
    },
    /// Every controller explores and learns at every interval.
    None,
}

/// A set of controllers at one or more levels, learning in turn or all at once (see the
/// module doc).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Learners {
    /// The controllers.
    pub controllers: Vec<Automaton>,
    level: Vec<usize>,
    coordination: Coordination,
    /// Each controller's error in the interval before the last (the baseline its move is
    /// judged against).
    before: Vec<Option<f64>>,
    /// Whether each controller took an exploring action for the interval just measured.
    explored: Vec<bool>,
    token: usize,
    in_turn: u32,
    started: bool,
}

impl Learners {
    /// Controllers with their levels (any numbers; the token visits them in ascending
    /// order, starting with the smallest).
    pub fn new(
        controllers: Vec<Automaton>,
        levels: Vec<usize>,
        coordination: Coordination,
    ) -> Result<Self, AllocError> {
        if controllers.len() != levels.len() {
            return Err(AllocError::BadInput(format!(
                "{} controllers with {} levels",
                controllers.len(),
                levels.len()
            )));
        }
        let coordination = match coordination {
            Coordination::Token { turn } => Coordination::Token { turn: turn.max(1) },
            c => c,
        };
        let n = controllers.len();
        let token = levels.iter().copied().min().unwrap_or(0);
        Ok(Learners {
            controllers,
            level: levels,
            coordination,
            before: vec![None; n],
            explored: vec![false; n],
            token,
            in_turn: 0,
            started: false,
        })
    }

    /// The level holding the token (the one that learns), or `None` without a token.
    pub fn holder(&self) -> Option<usize> {
        matches!(self.coordination, Coordination::Token { .. }).then_some(self.token)
    }

    /// Whether controller `c` is exploring in the interval now under way.
    pub fn exploring(&self, c: usize) -> bool {
        self.explored.get(c).copied().unwrap_or(false)
    }

    /// One iteration: `errors` (one per controller) were measured over the interval just
    /// ended; each controller that moved for it learns from the benefit of its move, then
    /// every controller's action for the next interval is chosen. Returns the actions.
    pub fn step<R: Rng + ?Sized>(&mut self, errors: &[f64], rng: &mut R) -> Vec<usize> {
        for (c, a) in self.controllers.iter_mut().enumerate() {
            let now = errors.get(c).copied().unwrap_or(0.0);
            if self.explored[c] {
                if let Some(b) = self.before[c] {
                    a.learn(feedback(b, now));
                }
            }
            self.before[c] = Some(now);
        }
        let explore: Vec<bool> = match self.coordination {
            Coordination::None => vec![self.started; self.controllers.len()],
            Coordination::Token { turn } => {
                if self.started {
                    self.in_turn += 1;
                    if self.in_turn > turn {
                        self.in_turn = 0;
                        self.token = self.next_level();
                    }
                }
                self.level
                    .iter()
                    .map(|&l| l == self.token && self.in_turn > 0)
                    .collect()
            }
        };
        self.started = true;
        self.explored = explore;
        self.controllers
            .iter_mut()
            .zip(&self.explored)
            .map(|(a, &x)| if x { a.choose(rng) } else { a.exploit() })
            .collect()
    }

    /// The level after the token's, wrapping to the smallest.
    fn next_level(&self) -> usize {
        let above = self.level.iter().copied().filter(|&l| l > self.token).min();
        above.unwrap_or_else(|| self.level.iter().copied().min().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests;
