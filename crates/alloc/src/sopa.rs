//! SOPA's policy decision (selecting the optimal policy adaptively): replay a window of
//! recorded accesses through every candidate policy and pick the cheapest.
//!
//! Cost of a replay: `C_all = C_hit·N_hit + C_migration·N_migration + C_direct·N_direct`,
//! where, for the window replayed from an empty cache of the partition's capacity,
//! * `N_hit` — accesses found in the cache;
//! * `N_migration` — misses whose block was *placed* in the cache (read from storage and
//!   written into the cache);
//! * `N_direct` — misses served directly from storage and not placed (the admission rule
//!   said no, or the capacity is zero).
//!
//! [`Costs`] are configurable; the defaults model a cache 10× faster than storage.
//! A candidate is any policy spec string of the `policy` crate (`"lru"`,
//! `"arc"`, `"lirs:..."`), optionally with an admission rule, so every registered policy
//! is a candidate without changes here.
//!
//! The decision process ([`Decider`]): one *round* per window; a decision is made when two
//! consecutive rounds pick the same candidate; after a decision, [`Decider::observe`]
//! watches the live hit ratio and starts a new decision when it falls more than
//! `retrigger_drop` below the decided candidate's replayed hit ratio. Pruning: each call
//! of [`Decider::round`] or [`Decider::observe`] is one period of time, counted to the
//! candidate that was running during it (the last decided one); once `usage_limit`
//! decisions have been made, the candidate with the lowest usage ratio — the share of
//! the counted time it was active (ties drop the later one) — is dropped, never the one
//! running; the counts restart, and at least one candidate always remains.

use crate::AllocError;
use policy::admission::AdmissionPolicy;
use policy::{Access, BlockCache};
use std::sync::Arc;

/// Unit costs of the three outcomes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// Cost of a hit.
    pub hit: f64,
    /// Cost of a miss that is placed in the cache (storage read + cache write).
    pub migration: f64,
    /// Cost of a miss served from storage without placement.
    pub direct: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            hit: 1.0,
            migration: 11.0,
            direct: 10.0,
        }
    }
}

/// Builds a fresh admission rule for one replay.
pub type AdmissionFactory = Arc<dyn Fn() -> Box<dyn AdmissionPolicy> + Send + Sync>;

/// A candidate: a policy spec and an optional admission rule.
#[derive(Clone)]
pub struct Candidate {
    /// Eviction policy spec (`name` or `name:key=value,...`).
    pub spec: String,
    /// Admission rule; demand placement without one.
    pub admission: Option<AdmissionFactory>,
}

impl Candidate {
    /// A candidate with demand placement.
    pub fn policy(spec: &str) -> Self {
        Candidate {
            spec: spec.to_string(),
            admission: None,
        }
    }
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}",
            self.spec,
            if self.admission.is_some() {
                "+admission"
            } else {
                ""
            }
        )
    }
}

/// The outcome of one replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// Hits.
    pub hits: u64,
    /// Misses placed.
    pub migrations: u64,
    /// Misses not placed.
    pub directs: u64,
    /// `C_all`.
    pub cost: f64,
}

impl Replay {
    /// Hits per access.
    pub fn hit_ratio(&self) -> f64 {
        let n = self.hits + self.migrations + self.directs;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// Replays `window` through `c` in a cache of `capacity` blocks.
pub fn replay(
    c: &Candidate,
    window: &[u64],
    capacity: usize,
    costs: &Costs,
) -> Result<Replay, AllocError> {
    let policy = policy::build(&c.spec).map_err(|e| AllocError::Policy(e.to_string()))?;
    let mut cache = BlockCache::new(capacity, policy);
    if let Some(f) = &c.admission {
        cache = cache.with_admission(f());
    }
    let mut r = Replay {
        hits: 0,
        migrations: 0,
        directs: 0,
        cost: 0.0,
    };
    for &k in window {
        match cache.access(k, |_, _| {}) {
            Access::Hit(_) => r.hits += 1,
            Access::Inserted(_) => r.migrations += 1,
            Access::Bypassed => r.directs += 1,
        }
    }
    r.cost = costs.hit * r.hits as f64
        + costs.migration * r.migrations as f64
        + costs.direct * r.directs as f64;
    Ok(r)
}

/// What one round found.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    /// Replays in candidate order.
    pub replays: Vec<Replay>,
    /// Index (into the current candidates) of the cheapest; ties go to the lower index.
    pub pick: usize,
    /// The decided candidate's spec, if this round completed a decision.
    pub decided: Option<String>,
}

/// SOPA's multi-round decision with re-triggering and pruning.
#[derive(Clone, Debug)]
pub struct Decider {
    candidates: Vec<Candidate>,
    capacity: usize,
    costs: Costs,
    /// Absolute hit-ratio drop that starts a new decision.
    pub retrigger_drop: f64,
    /// Decisions after which the least-used candidate is dropped.
    pub usage_limit: u64,
    active_time: Vec<u64>,
    running: Option<usize>,
    decisions: u64,
    last_pick: Option<usize>,
    decided: Option<(usize, f64)>,
}

impl Decider {
    /// A decider over `candidates` for a partition of `capacity` blocks.
    pub fn new(
        candidates: Vec<Candidate>,
        capacity: usize,
        costs: Costs,
    ) -> Result<Self, AllocError> {
        if candidates.is_empty() {
            return Err(AllocError::BadInput(
                "SOPA needs at least one candidate".into(),
            ));
        }
        for c in &candidates {
            policy::build(&c.spec).map_err(|e| AllocError::Policy(e.to_string()))?;
        }
        let n = candidates.len();
        Ok(Decider {
            candidates,
            capacity,
            costs,
            retrigger_drop: 0.1,
            usage_limit: 10,
            active_time: vec![0; n],
            running: None,
            decisions: 0,
            last_pick: None,
            decided: None,
        })
    }

    /// The current candidates.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// The decided policy, if a decision stands.
    pub fn decided(&self) -> Option<&str> {
        self.decided.map(|(i, _)| self.candidates[i].spec.as_str())
    }

    /// Whether a decision is in progress (rounds are wanted).
    pub fn deciding(&self) -> bool {
        self.decided.is_none()
    }

    /// The usage ratio of each candidate: the share of the counted periods it was running.
    pub fn usage_ratios(&self) -> Vec<f64> {
        let total: u64 = self.active_time.iter().sum();
        self.active_time
            .iter()
            .map(|&t| {
                if total == 0 {
                    0.0
                } else {
                    t as f64 / total as f64
                }
            })
            .collect()
    }

    /// Runs one round on `window`.
    pub fn round(&mut self, window: &[u64]) -> Result<Round, AllocError> {
        if let Some(r) = self.running {
            self.active_time[r] += 1;
        }
        let replays = self
            .candidates
            .iter()
            .map(|c| replay(c, window, self.capacity, &self.costs))
            .collect::<Result<Vec<_>, _>>()?;
        let mut pick = 0;
        for (i, r) in replays.iter().enumerate() {
            if r.cost < replays[pick].cost {
                pick = i;
            }
        }
        let mut decided = None;
        if self.last_pick == Some(pick) {
            self.decided = Some((pick, replays[pick].hit_ratio()));
            decided = Some(self.candidates[pick].spec.clone());
            self.running = Some(pick);
            self.decisions += 1;
            self.last_pick = None;
            self.prune();
        } else {
            self.last_pick = Some(pick);
        }
        Ok(Round {
            replays,
            pick,
            decided,
        })
    }

    /// Reports the live hit ratio; returns true if it restarted the decision.
    pub fn observe(&mut self, hit_ratio: f64) -> bool {
        if let Some(r) = self.running {
            self.active_time[r] += 1;
        }
        match self.decided {
            Some((_, h)) if hit_ratio < h - self.retrigger_drop => {
                self.decided = None;
                self.last_pick = None;
                true
            }
            _ => false,
        }
    }

    fn prune(&mut self) {
        if self.decisions < self.usage_limit || self.candidates.len() <= 1 {
            return;
        }
        let Some(worst) = (0..self.active_time.len())
            .filter(|&i| Some(i) != self.running)
            .min_by_key(|&i| (self.active_time[i], std::cmp::Reverse(i)))
        else {
            return;
        };
        let shift = |d: usize| if d > worst { d - 1 } else { d };
        if let Some((d, h)) = self.decided {
            self.decided = Some((shift(d), h));
        }
        self.running = self.running.map(shift);
        self.candidates.remove(worst);
        self.active_time = vec![0; self.candidates.len()];
        self.decisions = 0;
    }
}

#[cfg(test)]
mod tests;
