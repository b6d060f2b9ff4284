//! SOPA's online policy choice (Wang et al.), decided from curves instead of replays.
//!
//! SOPA replays a window of recorded accesses through every candidate policy and keeps the
//! cheapest, `C_all = C_hit·N_hit + C_migration·N_migration` (demand placement: every miss
//! is placed). The nodes and the simulator already measure each candidate's hit-ratio curve
//! online (SHARDS for LRU, phantom caches for the rest), which is that replay done
//! continuously; so each interval the cost per request of candidate `p` at the tenant's
//! size `s` is `C_hit·H_p(s) + C_migration·(1 − H_p(s))`. The rest is SOPA's process:
//! a decision when two consecutive intervals pick the same candidate; a new decision when
//! the live hit ratio falls more than `retrigger_drop` below the decided candidate's
//! prediction; after `usage_limit` decisions the candidate with the lowest usage ratio —
//! the share of intervals it was the active policy — is dropped (never the active one).
//! A switch moves no block: the cache reconstructs the new policy from its LRU history.

use crate::observe::TenantObservation;
use crate::scheme::PolicyChoice;
use serde::{Deserialize, Serialize};

/// One partition's decision state (plain data, persisted between intervals).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChoiceState {
    /// The policy in use.
    pub active: Option<String>,
    /// The remaining candidates.
    pub candidates: Vec<String>,
    /// Intervals each candidate was active (usage), aligned with `candidates`.
    pub active_intervals: Vec<u64>,
    /// Intervals counted in `active_intervals`.
    pub intervals: u64,
    /// Decisions since the last pruning.
    pub decisions: u64,
    /// Last interval's pick while deciding.
    pub last_pick: Option<String>,
    /// The standing decision and the hit ratio it predicted.
    pub decided: Option<(String, f64)>,
}

impl ChoiceState {
    /// Takes one interval's observation at the partition's `size` (blocks of both levels)
    /// and returns the policy to run next and why.
    pub fn step(
        &mut self,
        cfg: &PolicyChoice,
        obs: &TenantObservation,
        size: f64,
    ) -> (String, String) {
        if self.candidates.is_empty() {
            self.candidates = cfg.candidates.clone();
            self.active_intervals = vec![0; self.candidates.len()];
        }
        let default = self
            .candidates
            .first()
            .cloned()
            .unwrap_or_else(|| "lru".into());
        let active = self.active.clone().unwrap_or(default);
        if let Some(k) = self.candidates.iter().position(|c| *c == active) {
            self.active_intervals[k] += 1;
            self.intervals += 1;
        }
        let costs: Vec<(usize, f64, f64)> = self
            .candidates
            .iter()
            .enumerate()
            .filter_map(|(k, c)| {
                let h = obs.curve(c)?.hit_ratio(size);
                Some((k, cfg.hit_cost * h + cfg.migration_cost * (1.0 - h), h))
            })
            .collect();
        let Some(&(best, best_cost, best_hit)) = costs
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
        else {
            self.active = Some(active.clone());
            return (active, "no candidate curve observed yet".into());
        };
        let pick = self.candidates[best].clone();
        if let Some((d, h)) = &self.decided {
            let live = obs.combined_hit_ratio();
            if obs.l1.lookups > 0 && live < h - cfg.retrigger_drop {
                let why = format!(
                    "hit ratio {live:.3} fell below {d}'s predicted {h:.3}: deciding again"
                );
                self.decided = None;
                self.last_pick = Some(pick);
                return (active, why);
            }
            return (active.clone(), format!("SOPA decided {active}"));
        }
        if self.last_pick.as_deref() == Some(pick.as_str()) {
            self.decided = Some((pick.clone(), best_hit));
            self.active = Some(pick.clone());
            self.last_pick = None;
            self.decisions += 1;
            self.prune(cfg.usage_limit);
            let why =
                format!("SOPA: {pick} cheapest twice in a row (cost {best_cost:.3} per request)");
            (pick, why)
        } else {
            self.last_pick = Some(pick.clone());
            self.active = Some(active.clone());
            (
                active,
                format!("SOPA deciding: {pick} cheapest this interval"),
            )
        }
    }

    fn prune(&mut self, limit: u64) {
        if self.decisions < limit || self.candidates.len() <= 1 || self.intervals == 0 {
            return;
        }
        let active = self.active.clone();
        let worst = (0..self.candidates.len())
            .filter(|&k| Some(&self.candidates[k]) != active.as_ref())
            .min_by_key(|&k| (self.active_intervals[k], std::cmp::Reverse(k)));
        if let Some(w) = worst {
            self.candidates.remove(w);
            self.active_intervals = vec![0; self.candidates.len()];
            self.intervals = 0;
            self.decisions = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{LevelCount, PolicyCurve};
    use mrc::HitRatioCurve;

    fn obs(lru: f64, arc: f64, live: f64) -> TenantObservation {
        let c = |h: f64| HitRatioCurve::from_pairs([(0, 1.0), (100, 1.0 - h)]).unwrap();
        TenantObservation {
            l1: LevelCount {
                lookups: 1000,
                hits: (live * 1000.0) as u64,
            },
            curves: vec![
                PolicyCurve {
                    policy: "lru".into(),
                    curve: c(lru),
                },
                PolicyCurve {
                    policy: "arc".into(),
                    curve: c(arc),
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn decides_after_two_agreeing_intervals_and_retriggers_on_a_drop() {
        let cfg = PolicyChoice {
            candidates: vec!["lru".into(), "arc".into()],
            ..Default::default()
        };
        let mut s = ChoiceState::default();
        // ARC is better at size 100: first interval only notes it.
        assert_eq!(s.step(&cfg, &obs(0.3, 0.5, 0.3), 100.0).0, "lru");
        assert_eq!(s.step(&cfg, &obs(0.3, 0.5, 0.3), 100.0).0, "arc");
        assert_eq!(s.decided.as_ref().unwrap().0, "arc");
        // It stays while the live hit ratio holds (0.45 is within 0.1 of 0.5).
        assert_eq!(s.step(&cfg, &obs(0.6, 0.5, 0.45), 100.0).0, "arc");
        // A drop to 0.2 starts a new decision; two intervals later LRU wins.
        let (p, why) = s.step(&cfg, &obs(0.6, 0.2, 0.2), 100.0);
        assert_eq!(p, "arc");
        assert!(why.contains("deciding again"), "{why}");
        assert_eq!(s.step(&cfg, &obs(0.6, 0.2, 0.2), 100.0).0, "lru");
    }

    #[test]
    fn the_least_used_candidate_is_dropped_but_never_the_active_one() {
        let cfg = PolicyChoice {
            candidates: vec!["lru".into(), "arc".into(), "lirs".into()],
            usage_limit: 1,
            ..Default::default()
        };
        let mut s = ChoiceState::default();
        s.step(&cfg, &obs(0.3, 0.5, 0.3), 100.0);
        s.step(&cfg, &obs(0.3, 0.5, 0.3), 100.0);
        // lru was active one interval, lirs never: lirs goes.
        assert_eq!(s.candidates, vec!["lru".to_string(), "arc".to_string()]);
    }
}
