//! Learning automata for end-to-end QoS (coordinated resource controllers): each
//! controller divides one resource (a host's or a storage server's bandwidth) between its
//! workloads by a *linear reward-penalty* (L_R-P) automaton over a discrete set of
//! proportion vectors; controllers at different levels learn in turn by passing a token.
//!
//! Feedback: each application's deviance from target `dft = (observed − target) / target`
//! (0 on target; a best-effort application always reports 0, see [`dft`]); the error of an
//! interval is `Σ dft²`. The environment's answer is *reward* when the error is within
//! `tolerance` or below the running reference (an exponential average of recent errors,
//! weight 0.2), *penalty* otherwise, so actions better than the recent average gain
//! probability. Updates for the chosen action `i` of `r`:
//! ```text
//! reward:  p_i += α (1 − p_i),            p_j *= (1 − α)
//! penalty: p_i *= (1 − β),                p_j = β / (r − 1) + (1 − β) p_j
//! ```
//! With `β` well below `α` (L_R-εP) the probabilities concentrate on the action that meets
//! the targets. Coordination ([`Coordinator`]): only the token holder explores (samples
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
    reference: Option<f64>,
    current: usize,
}

impl Automaton {
    /// An automaton over `actions` (each a proportion vector), uniform to start, with
    /// reward rate `alpha` and penalty rate `beta` in `(0, 1)` and an error `tolerance`.
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
            tolerance,
            reference: None,
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

    /// Learns from the error the current action produced; returns whether it was rewarded.
    pub fn learn(&mut self, err: f64) -> bool {
        let reward = err <= self.tolerance || self.reference.is_some_and(|r| err < r);
        self.reference = Some(self.reference.map_or(err, |r| 0.8 * r + 0.2 * err));
        let (i, r) = (self.current, self.p.len());
        if r == 1 {
            return reward;
        }
        if reward {
            for (j, q) in self.p.iter_mut().enumerate() {
                *q = if j == i {
                    *q + self.alpha * (1.0 - *q)
                } else {
                    *q * (1.0 - self.alpha)
                };
            }
        } else {
            for (j, q) in self.p.iter_mut().enumerate() {
                *q = if j == i {
                    *q * (1.0 - self.beta)
                } else {
                    self.beta / (r - 1) as f64 + (1.0 - self.beta) * *q
                };
            }
        }
        reward
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
