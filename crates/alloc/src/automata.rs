//! Learning automata for end-to-end QoS (coordinated resource controllers): each
//! controller divides one resource (a host's or a storage server's bandwidth) between its
//! workloads by a *linear reward-penalty* (L_R-P) automaton over a discrete set of
//! proportion vectors; controllers at different levels learn in turn by passing a token.
//!
//! Feedback: each application's deviance from target `dft = (observed − target) / target`
//! (0 on target; a best-effort application always reports 0, see [`dft`]); the error of an
//! interval is `e(k) = Σ dft²`. The environment's answer is *graded* (an S-model
//! environment), not a binary reward: `f(k) = e(k) / (e(k) + τ)` in `[0, 1)`, 0 when every
//! target is met exactly and approaching 1 as the error grows, with `τ` the error at which
//! the answer is half penalty (the automaton's `tolerance`). Updates for the chosen action
//! `i` of `r`, with reward rate `α` and penalty rate `β`:
//! ```text
//! p_i += α (1 − f) (1 − p_i) − β f p_i
//! p_j += −α (1 − f) p_j + β f (1 / (r − 1) − p_j)      for j ≠ i
//! ```
//! which keeps `Σ p = 1`; `f = 0` is the full L_R-P reward, `f = 1` the full penalty. An
//! action close to the targets is rewarded nearly fully, one far from them is penalised,
//! and one in between is graded, so the probabilities concentrate on the actions that
//! come closest to the targets. Coordination ([`Coordinator`]): only the token holder explores (samples
//! its action from its probabilities and learns); the others play their most probable
//! action; the token moves on after `turn` intervals, so one controller's learning does
//! not see another's exploration as noise. Randomness comes from the caller's
//! [`rand::Rng`], so a run is reproducible from its seed.

use crate::AllocError;
use rand::Rng;

/// Deviance from target; 0 for a best-effort application or a non-positive target.
pub fn dft(observed: f64, target: f64, best_effort: bool) -> f64 {
    if best_effort || target <= 0.0 {
        0.0
    } else {
        (observed - target) / target
    }
}

/// The error of an interval: the sum of squared deviances.
pub fn error(dfts: &[f64]) -> f64 {
    dfts.iter().map(|d| d * d).sum()
}

/// One controller's L_R-P automaton.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Automaton {
    actions: Vec<Vec<f64>>,
    p: Vec<f64>,
    alpha: f64,
    beta: f64,
    tolerance: f64,
    current: usize,
}

impl Automaton {
    /// An automaton over `actions` (each a proportion vector), uniform to start, with
    /// reward rate `alpha` and penalty rate `beta` in `(0, 1)` and `tolerance` `τ` of the
    /// graded feedback (the error answered with half penalty; above 0).
    pub fn new(
        actions: Vec<Vec<f64>>,
        alpha: f64,
        beta: f64,
        tolerance: f64,
    ) -> Result<Self, AllocError> {
        if actions.is_empty() {
            return Err(AllocError::BadInput(
                "an automaton needs at least one action".into(),
            ));
        }
        if !(alpha > 0.0 && alpha < 1.0 && (0.0..1.0).contains(&beta)) {
            return Err(AllocError::BadInput(format!(
                "alpha {alpha} and beta {beta} must lie in (0, 1)"
            )));
        }
        let r = actions.len();
        Ok(Automaton {
            actions,
            p: vec![1.0 / r as f64; r],
            alpha,
            beta,
            tolerance: tolerance.max(f64::MIN_POSITIVE),
            current: 0,
        })
    }

    /// Proportions for two workloads in steps of `1 / n`: `[k/n, 1 − k/n]` for `k = 1..n`.
    pub fn two_way_actions(n: usize) -> Vec<Vec<f64>> {
        (1..n)
            .map(|k| vec![k as f64 / n as f64, 1.0 - k as f64 / n as f64])
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

    /// The current action's proportions.
    pub fn proportions(&self) -> &[f64] {
        &self.actions[self.current]
    }

    /// The most probable action (lowest index on ties).
    pub fn best(&self) -> usize {
        let mut b = 0;
        for i in 1..self.p.len() {
            if self.p[i] > self.p[b] {
                b = i;
            }
        }
        b
    }

    /// The action probabilities.
    pub fn probabilities(&self) -> &[f64] {
        &self.p
    }

    /// The graded answer `f(k)` to an error: `e / (e + τ)`.
    pub fn feedback(&self, err: f64) -> f64 {
        let e = if err.is_finite() {
            err.max(0.0)
        } else {
            f64::MAX
        };
        e / (e + self.tolerance)
    }

    /// Learns from the error the current action produced; returns whether the answer was
    /// more reward than penalty (`f < 1/2`).
    pub fn learn(&mut self, err: f64) -> bool {
        let f = self.feedback(err);
        let (i, r) = (self.current, self.p.len());
        if r == 1 {
            return f < 0.5;
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
        f < 0.5
    }
}

/// Controllers that learn in turn, passing a token.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Coordinator {
    /// The controllers, in token order.
    pub controllers: Vec<Automaton>,
    token: usize,
    turn: u32,
    in_turn: u32,
}

impl Coordinator {
    /// Controllers passing the token every `turn` intervals (at least 1).
    pub fn new(controllers: Vec<Automaton>, turn: u32) -> Self {
        Coordinator {
            controllers,
            token: 0,
            turn: turn.max(1),
            in_turn: 0,
        }
    }

    /// Which controller holds the token.
    pub fn holder(&self) -> usize {
        self.token
    }

    /// Chooses every controller's action for the next interval: the holder explores, the
    /// others exploit. Returns the chosen action indices.
    pub fn choose<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Vec<usize> {
        let t = self.token;
        self.controllers
            .iter_mut()
            .enumerate()
            .map(|(i, c)| if i == t { c.choose(rng) } else { c.exploit() })
            .collect()
    }

    /// Feeds the interval's deviances to the holder, then moves the token if its turn is over.
    pub fn feedback(&mut self, dfts: &[f64]) -> bool {
        let rewarded = self.controllers[self.token].learn(error(dfts));
        self.in_turn += 1;
        if self.in_turn >= self.turn {
            self.in_turn = 0;
            self.token = (self.token + 1) % self.controllers.len();
        }
        rewarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn dft_and_error() {
        assert_eq!(dft(30.0, 40.0, false), -0.25);
        assert_eq!(dft(30.0, 40.0, true), 0.0);
        assert!((error(&[-0.25, 0.5]) - 0.3125).abs() < 1e-12);
    }

    #[test]
    fn the_feedback_is_graded_and_keeps_probabilities_summing_to_one() {
        let mut a = Automaton::new(Automaton::two_way_actions(4), 0.2, 0.1, 0.1).unwrap();
        assert_eq!(a.feedback(0.0), 0.0);
        assert!((a.feedback(0.1) - 0.5).abs() < 1e-12);
        assert!(a.feedback(10.0) > 0.99);
        a.exploit();
        let before = a.probabilities()[0];
        // A small error is mostly reward, a large one mostly penalty.
        assert!(a.learn(0.01));
        let after_small = a.probabilities()[0];
        assert!(after_small > before);
        assert!(!a.learn(5.0));
        assert!(a.probabilities()[0] < after_small);
        assert!((a.probabilities().iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn converges_to_the_share_that_meets_targets() {
        // Linear plant: throughput_j = gain_j * share_j; targets met exactly at 60/40.
        let (gain, target) = ([50.0, 125.0], [30.0, 50.0]);
        let mut a = Automaton::new(Automaton::two_way_actions(10), 0.1, 0.01, 1e-6).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..3000 {
            a.choose(&mut rng);
            let share = a.proportions().to_vec();
            let d: Vec<f64> = (0..2)
                .map(|j| dft(gain[j] * share[j], target[j], false))
                .collect();
            a.learn(error(&d));
        }
        assert_eq!(a.best(), 5, "{:?}", a.probabilities()); // [0.6, 0.4]
        assert!(a.probabilities()[5] > 0.9, "{:?}", a.probabilities());
    }

    #[test]
    fn coordinated_controllers_meet_end_to_end_targets() {
        // Two apps through a host (100 MB/s) then a storage server (80 MB/s); end-to-end
        // throughput is the smaller of the two shares; app 1 is best effort.
        let mk = || Automaton::new(Automaton::two_way_actions(10), 0.1, 0.01, 1e-6).unwrap();
        let mut c = Coordinator::new(vec![mk(), mk()], 50);
        let mut rng = StdRng::seed_from_u64(11);
        let plant = |c: &Coordinator| {
            let (h, s) = (
                c.controllers[0].proportions(),
                c.controllers[1].proportions(),
            );
            let app0 = (100.0 * h[0]).min(80.0 * s[0]);
            vec![dft(app0, 40.0, false), dft(0.0, 0.0, true)]
        };
        for _ in 0..8000 {
            c.choose(&mut rng);
            let d = plant(&c);
            c.feedback(&d);
        }
        c.controllers.iter_mut().for_each(|a| {
            a.exploit();
        });
        // Host share 0.4 gives exactly 40 (storage 0.5 gives 40 too): any pair whose
        // minimum is 40 meets the target; the learned pair must.
        let d = plant(&c);
        assert!(
            error(&d) < 1e-9,
            "{d:?} {:?} {:?}",
            c.controllers[0].probabilities(),
            c.controllers[1].probabilities()
        );
    }
}
