//! Do no harm: the guarantee the `lachesis` scheme keeps for every tenant with a
//! degradation, mean-latency or tail-latency SLO, on evidence rather than on its model.
//!
//! A degradation SLO is defined against the tenant's latency at a fair share, so the fair
//! point meets it by definition and is always a safe place to fall back to; and a latency
//! SLO is not made worse by a plan that gives the tenant what the fair scheme would. So
//! the guard holds each such tenant at its fair share (the sizes *and* the fair scheme's
//! eviction policy) until the evidence says the model may plan it elsewhere, and puts it
//! back there as soon as a move is measured to hurt it:
//!
//! 1. **A reference, measured.** While the tenant and every other tenant on its nodes hold
//!    their fair shares there, and the tenant runs the fair scheme's policy, its measured
//!    latency (of its reads, where writes are observed apart) is a sample of what the fair
//!    scheme gives it now. Holding more than fair (its neighbours at fair), the sample is
//!    carried to the fair point by the model's ratio `latency(fair) / latency(held)`,
//!    which can only make it laxer. The reference is the mean of the last
//!    [`REFERENCE_SAMPLES`] samples, and the samples' spread `(max − min) / mean` is the
//!    noise of a measurement: a difference within it is no evidence of harm. Until there
//!    are that many samples, and while the newest still falls below the others by more
//!    than the SLO's tolerance (its degradation; none for a latency SLO), as it does
//!    while caches warm, the tenant is *unreferenced*: every tenant on its nodes is held
//!    at its fair share, so that the samples are taken.
//! 2. **A curve that has earned trust.** The model plans with the hit-ratio curve; each
//!    interval the hit ratio it predicted at the sizes held is compared with the measured
//!    one. A curve that promised more hits than were measured by more than
//!    [`HIT_RATIO_TOLERANCE`] loses its trust (one that promised fewer errs on the
//!    tenant's side); after [`TRUSTED_INTERVALS`] intervals in a row without such a miss
//!    it has it back. A young curve, an optimistic one, or one the workload has moved
//!    away from keeps the tenant at its fair share (its neighbours are free).
//! 3. **Harm undone.** The tenant was moved when it was below its fair share at some
//!    level, on another policy than the fair scheme's, or beside neighbours that were not
//!    at theirs. If its measured latency then exceeds what its SLO allows against the
//!    reference — `(1 + degradation) · reference · (1 + spread)`, or for a latency SLO
//!    or a tail SLO the larger of its number and `reference · (1 + spread)` (samples,
//!    reference and measurement then being the interval's quantile the SLO names, not
//!    its mean) — the move harmed it,
//!    whatever the model said. One interval's noise can hide a harm that lasts, so the
//!    intervals since the move (the last [`MOVED_SAMPLES`], from [`REFERENCE_SAMPLES`]
//!    on) are also weighed together: their mean against the same bound with the noise of
//!    a mean of `k` intervals, `spread / √k`, in place of the spread. Either way, from the next plan on, every tenant on its nodes heads
//!    back to its fair share, past the hysteresis threshold, for a penalty that doubles
//!    with each harm ([`BASE_PENALTY`] intervals, at most [`MAX_PENALTY`]); its curve
//!    must earn trust again afterwards. The way back keeps the per-interval move limit
//!    and the write-back budget: shrinking a tenant that holds much dirty data at once
//!    floods the disk with its write-backs, which hurts whoever shares it far more than
//!    the move being undone (a run that skipped them saw 9-second intervals). So a held
//!    tenant is never shrunk below its fair share, and grows back to it as fast as its
//!    neighbours' space drains.
//!
//! What the guard does not promise: it acts on what was measured, so the interval in
//! which a move first hurts is a miss before the guard sees it, and a workload that
//! changes between two intervals can look like harm (the tenant then spends a penalty at
//! fair share, which costs efficiency, not its SLO). Tenants with IOPS or bandwidth SLOs,
//! and tenants without an SLO, are not guarded.
//!
//! Plain data ([`GuardState`], in each tenant's controller state); the decision is
//! [`step`], a pure function of the state, what was held, the fair point and what was
//! measured. The controller turns verdicts into floors and node fallbacks.

use crate::model::LatencyModel;
use crate::observe::TenantObservation;
use serde::{Deserialize, Serialize};

/// Intervals in a row the curve must predict the measured hit ratio before the floor is
/// lifted.
pub const TRUSTED_INTERVALS: u32 = 3;

/// Absolute difference between the predicted and the measured hit ratio (both levels)
/// within which an interval counts towards trust.
pub const HIT_RATIO_TOLERANCE: f64 = 0.05;

/// Intervals a tenant stays at its fair share after its first measured harm.
pub const BASE_PENALTY: u32 = 4;

/// The longest penalty (intervals).
pub const MAX_PENALTY: u32 = 64;

/// Samples of the latency at fair share the reference is the least of.
pub const REFERENCE_SAMPLES: usize = 4;

/// What the guard remembers of one tenant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardState {
    /// Its latency at its fair share, as measured (ms): the mean of `samples`; `None`
    /// before any interval at fair share or above with requests.
    pub reference_ms: Option<f64>,
    /// The last [`REFERENCE_SAMPLES`] samples of its latency at fair share (ms).
    #[serde(default)]
    pub samples: Vec<f64>,
    /// Intervals in a row its curve predicted its hit ratio within the tolerance.
    pub trusted: u32,
    /// Intervals it is still held at its fair share for a measured harm.
    pub penalty: u32,
    /// Harms measured so far (each doubles the next penalty).
    pub harms: u32,
    /// Its latency in the intervals since it was last at its fair share beside neighbours
    /// at theirs (ms; the last [`MOVED_SAMPLES`]): the evidence one interval alone is too
    /// noisy to give.
    #[serde(default)]
    pub moved: Vec<f64>,
}

/// Intervals of latency measured away from the fair point that the guard weighs together.
pub const MOVED_SAMPLES: usize = 16;

/// What the guard decided for one tenant this interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No floor: the model plans the tenant freely.
    Free,
    /// Held at its fair share: its curve has not earned trust.
    Unproven,
    /// Its nodes at fair share for every tenant on them: its latency at fair share has
    /// not been measured (or is still falling as caches warm).
    Unreferenced,
    /// Its nodes at fair share for a measured harm (`intervals` left).
    Penalised {
        /// Intervals of the penalty left after this one.
        intervals: u32,
    },
    /// Harmed last interval: its nodes head back to fair share from the next plan.
    Reverted,
}

impl Verdict {
    /// Why the tenant is held at its fair share, in words (`None` when free).
    pub fn why(self) -> Option<String> {
        Some(match self {
            Verdict::Free => return None,
            Verdict::Unproven => format!(
                "its curve has not yet predicted its hit ratio within {:.0} points \
                 {TRUSTED_INTERVALS} intervals in a row",
                HIT_RATIO_TOLERANCE * 100.0
            ),
            Verdict::Unreferenced => "its latency at fair share is not yet measured \
                 (or still falling as caches warm)"
                .to_string(),
            Verdict::Penalised { intervals } => {
                format!("a move was measured to miss its SLO ({intervals} more intervals)")
            }
            Verdict::Reverted => "the last move was measured to miss its SLO".to_string(),
        })
    }

    /// Whether the tenant is floored at its fair share.
    pub fn floored(self) -> bool {
        self != Verdict::Free
    }

    /// Whether the tenant's nodes fall back to fair share for every tenant on them.
    pub fn falls_back(self) -> bool {
        matches!(
            self,
            Verdict::Unreferenced | Verdict::Penalised { .. } | Verdict::Reverted
        )
    }
}

/// The sizes a tenant held and its fair point, both as `(level 1, level 2 per server)`.
pub struct Held<'a> {
    /// Held last interval.
    pub held: (u64, &'a [u64]),
    /// Its fair share.
    pub fair: (u64, &'a [u64]),
    /// It ran the fair scheme's eviction policy.
    pub fair_policy: bool,
    /// Every other tenant on its nodes held its fair share there too: a measurement then
    /// is one of what the fair scheme gives it.
    pub neighbours_at_fair: bool,
}

impl Held<'_> {
    /// At least the fair share at both levels, on the fair scheme's policy.
    fn at_or_above_fair(&self) -> bool {
        self.fair_policy
            && self.held.0 >= self.fair.0
            && self.held.1.len() == self.fair.1.len()
            && self.held.1.iter().zip(self.fair.1).all(|(h, f)| h >= f)
    }
}

/// The SLOs the guard keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Mean latency within `1 +` this of the measured fair-share reference.
    Degradation(f64),
    /// Mean latency within this many milliseconds.
    LatencyMs(f64),
    /// The `quantile` of an interval's latencies within `ms` milliseconds: the guard's
    /// samples and measurements are that quantile, not the mean.
    Tail {
        /// 0.95, 0.99 or 0.999.
        quantile: f64,
        /// The bound.
        ms: f64,
    },
}

impl Limit {
    /// The limit of an SLO the guard keeps; `None` for IOPS and bandwidth SLOs.
    pub fn of(slo: &crate::topology::Slo) -> Option<Limit> {
        use crate::topology::Slo;
        match *slo {
            Slo::Degradation(x) => Some(Limit::Degradation(x)),
            Slo::LatencyMs(ms) => Some(Limit::LatencyMs(ms)),
            Slo::Iops(_) | Slo::Mbps(_) => None,
            Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
                let (quantile, ms) = slo.tail()?;
                Some(Limit::Tail { quantile, ms })
            }
        }
    }
}

/// One interval of the guard for a tenant with the SLO `limit`: updates
/// `st` from what was measured at `sizes` (`None` for `sizes`: nothing held yet, as before
/// the first plan) and returns whether the tenant is floored at its fair share.
pub fn step(
    st: &mut GuardState,
    limit: Limit,
    model: &LatencyModel,
    sizes: Option<Held<'_>>,
    o: &TenantObservation,
) -> Verdict {
    let measured = measured_ms(o, limit);
    let mut harmed = false;
    if let (Some(h), Some(m)) = (&sizes, measured) {
        let n = h.held.1.len().max(1) as f64;
        let lat = |c1: u64, x: &[u64]| -> f64 {
            if x.is_empty() {
                return model.latency(c1 as f64, 0.0);
            }
            x.iter()
                .map(|&v| model.latency(c1 as f64, n * v as f64))
                .sum::<f64>()
                / n
        };
        // What the SLO allows against the reference when a measurement's noise is
        // `noise` (relative): one interval's is the reference samples' spread, a mean of
        // k intervals' about that over √k.
        let allowed_with = |noise: f64| {
            st.reference_ms.map(|r| {
                let beyond_noise = r * (1.0 + noise);
                match limit {
                    Limit::Degradation(x) => (1.0 + x) * beyond_noise,
                    Limit::LatencyMs(t) | Limit::Tail { ms: t, .. } => t.max(beyond_noise),
                }
            })
        };
        let noise = spread(&st.samples);
        let allowed = allowed_with(noise);
        if h.at_or_above_fair() && h.neighbours_at_fair {
            let (at_fair, at_held) = (lat(h.fair.0, h.fair.1), lat(h.held.0, h.held.1));
            let carry = if at_held > 0.0 && at_fair.is_finite() {
                (at_fair / at_held).max(1.0)
            } else {
                1.0
            };
            if st.samples.len() == REFERENCE_SAMPLES {
                st.samples.remove(0);
            }
            st.samples.push(m * carry);
            st.reference_ms = Some(st.samples.iter().sum::<f64>() / st.samples.len() as f64);
            st.moved.clear();
        } else {
            if st.moved.len() == MOVED_SAMPLES {
                st.moved.remove(0);
            }
            st.moved.push(m);
            // One interval beyond the noise, or the intervals since the move together
            // beyond the noise of their mean: a harm that hides in one interval's noise
            // shows in many.
            let k = st.moved.len();
            let mean = st.moved.iter().sum::<f64>() / k as f64;
            let accumulated = k >= REFERENCE_SAMPLES
                && allowed_with(noise / (k as f64).sqrt()).is_some_and(|a| mean > a);
            harmed = allowed.is_some_and(|a| m > a) || accumulated;
        }
        // Trust: the curve's hit ratio at the sizes held against the measured one.
        let predicted = {
            let total: u64 = h.held.1.iter().sum();
            model.hit_ratios(h.held.0 as f64, total as f64).1
        };
        let seen = o.combined_hit_ratio();
        if o.l1.lookups > 0 && predicted - seen <= HIT_RATIO_TOLERANCE {
            st.trusted = st.trusted.saturating_add(1);
        } else {
            st.trusted = 0;
        }
    }
    if harmed {
        st.moved.clear();
        st.harms = st.harms.saturating_add(1);
        let doubling = 1u32.checked_shl(st.harms - 1).unwrap_or(u32::MAX);
        st.penalty = BASE_PENALTY.saturating_mul(doubling).min(MAX_PENALTY);
        st.trusted = 0;
        return Verdict::Reverted;
    }
    if st.penalty > 0 {
        st.penalty -= 1;
        return Verdict::Penalised {
            intervals: st.penalty,
        };
    }
    let tolerance = match limit {
        Limit::Degradation(x) => x,
        Limit::LatencyMs(_) | Limit::Tail { .. } => 0.0,
    };
    if !settled(&st.samples, tolerance) {
        return Verdict::Unreferenced;
    }
    if st.trusted < TRUSTED_INTERVALS {
        return Verdict::Unproven;
    }
    Verdict::Free
}

/// The relative spread of the samples, `(max − min) / mean`: how far apart intervals at
/// the same fair share measure. A difference within it is not evidence of harm.
fn spread(samples: &[f64]) -> f64 {
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    let (lo, hi) = samples
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    if mean > 0.0 && hi >= lo {
        (hi - lo) / mean
    } else {
        0.0
    }
}

/// Whether the samples of the latency at fair share make a reference: there are
/// [`REFERENCE_SAMPLES`] of them and the newest is no longer falling below the others by
/// more than the SLO's own tolerance `x` (caches still warming make every sample better
/// than the last, and the reference would lag what a fair share gives by the time the
/// floor is lifted).
fn settled(samples: &[f64], x: f64) -> bool {
    let Some((&last, earlier)) = samples.split_last() else {
        return false;
    };
    let least = earlier.iter().copied().fold(f64::INFINITY, f64::min);
    samples.len() >= REFERENCE_SAMPLES && last >= (1.0 - x) * least
}

/// The latency the guard judges: of the tenant's reads where writes are observed apart
/// (what its sizes change), else of all its requests; `None` without requests.
fn measured_ms(o: &TenantObservation, limit: Limit) -> Option<f64> {
    if o.requests == 0 {
        return None;
    }
    if let Limit::Tail { quantile, .. } = limit {
        let m = o.latency_quantiles.and_then(|q| q.at(quantile));
        let m = m.or_else(|| ((quantile - 0.99).abs() < 1e-9).then_some(o.p99_latency_ms))?;
        return (m.is_finite() && m > 0.0).then_some(m);
    }
    let m = match o.read_latency_ms {
        Some(r) if o.requests > o.writes => r,
        _ => o.mean_latency_ms,
    };
    (m.is_finite() && m > 0.0).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::LevelCount;
    use crate::topology::{Levels, ServiceTimes};
    use mrc::HitRatioCurve;

    fn model() -> LatencyModel {
        LatencyModel {
            // Miss ratio 1 at 0 blocks, 0.5 at 100, 0 at 200.
            curve: HitRatioCurve::from_pairs([(0, 1.0), (100, 0.5), (200, 0.0)]).unwrap(),
            service: ServiceTimes {
                l1_hit_ms: 0.1,
                l2_hit_ms: 0.5,
                miss_ms: 10.0,
            },
            levels: Levels::Exclusive,
            writes: None,
        }
    }

    fn obs(latency: f64, hit_ratio: f64) -> TenantObservation {
        TenantObservation {
            requests: 1000,
            l1: LevelCount {
                lookups: 1000,
                hits: (hit_ratio * 1000.0) as u64,
            },
            mean_latency_ms: latency,
            ..Default::default()
        }
    }

    fn held<'a>(held: (u64, &'a [u64]), fair: (u64, &'a [u64])) -> Held<'a> {
        Held {
            held,
            fair,
            fair_policy: true,
            neighbours_at_fair: true,
        }
    }

    fn proven(samples: &[f64]) -> GuardState {
        GuardState {
            reference_ms: Some(samples.iter().sum::<f64>() / samples.len() as f64),
            samples: samples.to_vec(),
            trusted: TRUSTED_INTERVALS,
            ..Default::default()
        }
    }

    const DEG: Limit = Limit::Degradation(0.05);

    /// One step of the guard at `h` (over [`model`]) with `ms` measured and `hit` of the
    /// lookups hitting.
    fn judge(st: &mut GuardState, lim: Limit, h: Held, ms: f64, hit: f64) -> Verdict {
        step(st, lim, &model(), Some(h), &obs(ms, hit))
    }

    #[test]
    fn unreferenced_until_settled_then_unproven_until_the_curve_predicts() {
        let (m, mut st) = (model(), GuardState::default());
        let fair = [50u64];
        // 50 + 50 blocks: the curve predicts a hit ratio of 0.5.
        assert_eq!(
            step(&mut st, DEG, &m, None, &obs(5.0, 0.5)),
            Verdict::Unreferenced
        );
        // Latency at fair share falling as the cache warms: not settled.
        for ms in [8.0, 6.0, 5.0, 4.0] {
            let v = judge(&mut st, DEG, held((50, &fair), (50, &fair)), ms, 0.5);
            assert_eq!(v, Verdict::Unreferenced, "{ms}");
        }
        let v = judge(&mut st, DEG, held((50, &fair), (50, &fair)), 4.1, 0.5);
        assert_eq!(v, Verdict::Free);
        assert_eq!(st.samples, vec![6.0, 5.0, 4.0, 4.1]);
        // A curve that promises more hits than were measured loses its trust; one that
        // promises fewer keeps it (it errs on the tenant's side).
        let v = judge(&mut st, DEG, held((50, &fair), (50, &fair)), 4.0, 0.7);
        assert_eq!(v, Verdict::Free);
        let v = judge(&mut st, DEG, held((50, &fair), (50, &fair)), 4.0, 0.3);
        assert_eq!(v, Verdict::Unproven);
        assert_eq!(st.trusted, 0);
    }

    #[test]
    fn a_measured_harm_reverts_at_once_and_penalties_double() {
        let mut st = proven(&[2.0; REFERENCE_SAMPLES]);
        let (small, fair) = ([10u64], [50u64]);
        // 2.09 ms is within 5 % of the 2 ms reference: free.
        let v = judge(&mut st, DEG, held((10, &small), (50, &fair)), 2.09, 0.1);
        assert_eq!(v, Verdict::Free);
        // 2.2 ms is not: reverted, its nodes back at fair share, four intervals of penalty.
        let v = judge(&mut st, DEG, held((10, &small), (50, &fair)), 2.2, 0.1);
        assert_eq!(v, Verdict::Reverted);
        assert!(v.falls_back());
        assert_eq!((st.penalty, st.harms, st.trusted), (BASE_PENALTY, 1, 0));
        for left in (0..BASE_PENALTY).rev() {
            let v = judge(&mut st, DEG, held((50, &fair), (50, &fair)), 2.0, 0.5);
            assert_eq!(v, Verdict::Penalised { intervals: left });
        }
        // Trust was earned again during the penalty; a second harm doubles it.
        let v = judge(&mut st, DEG, held((10, &small), (50, &fair)), 3.0, 0.1);
        assert_eq!(v, Verdict::Reverted);
        assert_eq!(st.penalty, 2 * BASE_PENALTY);
    }

    #[test]
    fn a_difference_within_the_noise_at_fair_share_is_no_evidence() {
        // Samples 10 to 13 ms: a spread of 3 / 11.5 of the mean.
        let mut st = proven(&[10.0, 11.0, 12.0, 13.0]);
        let (small, fair) = ([10u64], [50u64]);
        let v = judge(&mut st, DEG, held((10, &small), (50, &fair)), 14.0, 0.1);
        assert_eq!(v, Verdict::Free);
        let v = judge(&mut st, DEG, held((10, &small), (50, &fair)), 16.0, 0.1);
        assert_eq!(v, Verdict::Reverted);
    }

    #[test]
    fn a_lasting_harm_within_one_intervals_noise_shows_in_the_mean_of_several() {
        // Samples 5 to 15 ms: a spread of 1.0, so one interval must pass 21 ms to count.
        let mut st = proven(&[5.0, 8.0, 12.0, 15.0]);
        let (small, fair) = ([10u64], [50u64]);
        let moved = || held((10, &small), (50, &fair));
        // 18 ms, interval after interval: each within one interval's noise, but their
        // mean is 1.8 times the reference; from the fourth on, the bound is
        // 1.05 · 10 · (1 + 1/√4) = 15.75 ms.
        for _ in 1..REFERENCE_SAMPLES {
            assert_eq!(judge(&mut st, DEG, moved(), 18.0, 0.1), Verdict::Free);
        }
        assert_eq!(judge(&mut st, DEG, moved(), 18.0, 0.1), Verdict::Reverted);
        assert!(st.moved.is_empty());
        // Moved intervals whose mean stays within that bound are no evidence.
        let mut st = proven(&[5.0, 8.0, 12.0, 15.0]);
        for ms in [14.0, 6.0, 15.0, 7.0, 14.0, 6.0, 15.0, 7.0] {
            assert_eq!(judge(&mut st, DEG, moved(), ms, 0.1), Verdict::Free);
        }
        assert_eq!(st.moved.len(), 8);
        // A return to the fair point starts the count afresh.
        judge(&mut st, DEG, held((50, &fair), (50, &fair)), 10.0, 0.1);
        assert!(st.moved.is_empty());
    }

    #[test]
    fn a_neighbours_move_that_hurts_a_tenant_at_fair_share_falls_back_too() {
        let mut st = proven(&[2.0; REFERENCE_SAMPLES]);
        let fair = [50u64];
        let mut h = held((50, &fair), (50, &fair));
        h.neighbours_at_fair = false;
        let v = judge(&mut st, DEG, h, 3.0, 0.5);
        assert_eq!(v, Verdict::Reverted);
        assert!(v.falls_back());
        // Its latency then is no sample of fair share's.
        assert_eq!(st.samples, vec![2.0; REFERENCE_SAMPLES]);
    }

    #[test]
    fn another_policy_than_fairs_is_a_move_the_guard_judges() {
        let mut st = proven(&[2.0; REFERENCE_SAMPLES]);
        let fair = [50u64];
        let mut h = held((50, &fair), (50, &fair));
        h.fair_policy = false;
        let v = judge(&mut st, DEG, h, 3.0, 0.5);
        assert_eq!(v, Verdict::Reverted);
        assert_eq!(st.samples, vec![2.0; REFERENCE_SAMPLES]);
    }

    #[test]
    fn a_latency_slo_is_harmed_only_past_both_its_number_and_fair_shares() {
        let (small, fair) = ([10u64], [50u64]);
        let below = || held((10, &small), (50, &fair));
        let lim = Limit::LatencyMs(2.0);
        let mut st = proven(&[1.0; REFERENCE_SAMPLES]);
        assert_eq!(judge(&mut st, lim, below(), 1.9, 0.1), Verdict::Free);
        assert_eq!(judge(&mut st, lim, below(), 2.1, 0.1), Verdict::Reverted);
        // Fair share gives 3 ms: a move that keeps it at 2.5 ms does it no harm.
        let mut st = proven(&[3.0; REFERENCE_SAMPLES]);
        assert_eq!(judge(&mut st, lim, below(), 2.5, 0.1), Verdict::Free);
    }

    #[test]
    fn a_tail_slo_is_judged_on_its_quantile_not_the_mean() {
        let (small, fair) = ([10u64], [50u64]);
        let lim = Limit::of(&crate::topology::Slo::P99Ms(5.0)).unwrap();
        assert_eq!(
            lim,
            Limit::Tail {
                quantile: 0.99,
                ms: 5.0
            }
        );
        let mut st = proven(&[3.0; REFERENCE_SAMPLES]);
        let at = |mean: f64, p99: f64| {
            let mut o = obs(mean, 0.1);
            o.latency_quantiles = Some(crate::observe::Quantiles {
                p50: mean,
                p90: mean,
                p95: mean,
                p99,
                p999: p99,
            });
            o
        };
        let below = || Some(held((10, &small), (50, &fair)));
        // A mean of 1 ms with a p99 of 8 ms misses a 5 ms p99: harm.
        let v = step(&mut st, lim, &model(), below(), &at(1.0, 8.0));
        assert_eq!(v, Verdict::Reverted);
        // A mean of 6 ms with a p99 of 4.5 ms meets it.
        let mut st = proven(&[3.0; REFERENCE_SAMPLES]);
        let v = step(&mut st, lim, &model(), below(), &at(6.0, 4.5));
        assert_eq!(v, Verdict::Free);
    }

    #[test]
    fn holding_more_than_fair_never_makes_the_reference_stricter() {
        let mut st = GuardState::default();
        let (big, fair) = ([150u64], [50u64]);
        // At 50 + 150 blocks the model predicts far less latency than at fair share: the
        // measurement is carried up to the fair point by the model's ratio.
        judge(&mut st, DEG, held((50, &big), (50, &fair)), 1.0, 1.0);
        let r = st.reference_ms.unwrap();
        assert!(r > 1.0, "reference {r} carried to the fair point");
    }
}
