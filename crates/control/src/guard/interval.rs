//! One interval of the guard for one tenant ([`step`]): the reference measured at fair
//! share, a workload or environment that changed, probes below the proven sizes judged,
//! harm from outside reverted, and the verdict that follows, with its doubling penalties.

use super::inputs::{measured_ms, Held, Limit};
use super::samples::{scatter, settled, spread};
use super::state::{GuardSizes, GuardState};
use super::verdict::Verdict;
use super::{
    BASE_PENALTY, CHANGED_INTERVALS, FIRST_STEP, HIT_RATIO_TOLERANCE, LEAST_STEP, MAX_PENALTY,
    MOVED_SAMPLES, PROBE_INTERVALS, REFERENCE_SAMPLES,
};
use crate::model::LatencyModel;
use crate::observe::TenantObservation;

/// One interval of the guard for a tenant with the SLO `limit`: updates `st` from what
/// was measured at `sizes` (`None` for `sizes`: nothing held yet, as before the first
/// plan) and returns the verdict ([`floor`] turns it into the least sizes allowed).
///
/// [`floor`]: super::floor
pub fn step(
    st: &mut GuardState,
    limit: Limit,
    model: &LatencyModel,
    sizes: Option<Held<'_>>,
    o: &TenantObservation,
) -> Verdict {
    let measured = measured_ms(o, limit, sizes.as_ref().map_or(0.0, |h| h.seconds));
    let mut harmed = false;
    let mut probe_outcome: Option<bool> = None; // Some(true): proven; Some(false): failed
    let mut probe_undecided_end = false;
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
        let noise = spread(&st.samples);
        let harm_bound = st.reference_ms.map(|r| limit.allows(r, noise));
        let accept_bound = st
            .reference_ms
            .map(|r| limit.allows(r, 0.0) / (1.0 + noise));
        let fair = h.fair_sizes();
        // A workload that changed since the reference was measured: its curve no longer
        // predicts what it did at fair share. The reference, and every size proven
        // against it, are forgotten, and it is measured at fair share again.
        let curve_moved = match (st.reference_hits.is_empty(), h.fair_hit) {
            (false, Some(now)) => {
                let hits = &st.reference_hits;
                let mean = hits.iter().sum::<f64>() / hits.len() as f64;
                let (lo, hi) = hits
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                        (a.min(v), b.max(v))
                    });
                Some((now - mean).abs() > HIT_RATIO_TOLERANCE + (hi - lo))
            }
            _ => None,
        };
        // The environment that changed: the disks it misses to now serve a miss in a
        // time further (relatively) from what they took while the reference was measured
        // than the SLO's tolerance plus those times' own spread. Fair share's latency
        // moved with them (a neighbour finished, or started), and a reference measured
        // before would judge the tenant against a fair share that no longer exists: when
        // the disks got faster, a lax one.
        let env_moved = match (
            limit,
            st.reference_miss.is_empty(),
            o.service.miss_ms.filter(|v| v.is_finite() && *v > 0.0),
        ) {
            (Limit::Degradation(x), false, Some(now)) => {
                let v = &st.reference_miss;
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                Some(mean > 0.0 && (now - mean).abs() / mean > x + spread(v))
            }
            _ => None,
        };
        if curve_moved.is_some() || env_moved.is_some() {
            if curve_moved == Some(true) || env_moved == Some(true) {
                st.changed = st.changed.saturating_add(1);
            } else {
                st.changed = 0;
            }
            if st.changed >= CHANGED_INTERVALS {
                st.samples.clear();
                st.reference_ms = None;
                st.reference_hits.clear();
                st.reference_miss.clear();
                st.noise = 0.0;
                st.changed = 0;
                st.proven = None;
                st.probe = None;
                st.moved.clear();
                st.step = FIRST_STEP;
                return Verdict::Unreferenced;
            }
        }
        let proven = st.proven(&fair);
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
            if let Some(hit) = h.fair_hit {
                if st.reference_hits.len() == REFERENCE_SAMPLES {
                    st.reference_hits.remove(0);
                }
                st.reference_hits.push(hit);
            }
            if let Some(miss) = o.service.miss_ms.filter(|v| v.is_finite() && *v > 0.0) {
                if st.reference_miss.len() == REFERENCE_SAMPLES {
                    st.reference_miss.remove(0);
                }
                st.reference_miss.push(miss);
            }
            // (Only once settled: samples still falling as caches warm spread by the
            // trend, not by the noise of a measurement.)
            if settled(&st.samples, limit.tolerance()) {
                st.noise = st.noise.max(scatter(&st.samples));
            }
            st.moved.clear();
            st.probe = None;
        } else {
            if st.moved.len() == MOVED_SAMPLES {
                st.moved.remove(0);
            }
            st.moved.push(m);
            let k = st.moved.len();
            let mean = st.moved.iter().sum::<f64>() / k as f64;
            let accumulated = k >= REFERENCE_SAMPLES
                && st
                    .reference_ms
                    .is_some_and(|r| mean > limit.allows(r, noise / (k as f64).sqrt()));
            let beyond = harm_bound.is_some_and(|b| m > b);
            if st.reference_ms.is_some() && !h.at_or_above(proven.l1, &proven.l2) {
                // On probation below its proven sizes.
                let here = h.sizes();
                let runs = match st.probe.take() {
                    Some((p, mut v)) if p == here => {
                        v.push(m);
                        v
                    }
                    _ => vec![m],
                };
                let probe_mean = runs.iter().sum::<f64>() / runs.len() as f64;
                // A probe that ends unproven was judged (and is undone) on its own
                // intervals: they are no evidence against the sizes it returns to.
                let forget = |moved: &mut Vec<f64>| {
                    let keep = moved.len().saturating_sub(runs.len());
                    moved.truncate(keep);
                };
                if beyond {
                    forget(&mut st.moved);
                    probe_outcome = Some(false);
                } else if accept_bound.is_some_and(|a| probe_mean <= a) {
                    probe_outcome = Some(true);
                    let merged = GuardSizes {
                        l1: proven.l1.min(here.l1),
                        l2: proven
                            .l2
                            .iter()
                            .zip(&here.l2)
                            .map(|(&a, &b)| a.min(b))
                            .collect(),
                    };
                    st.proven = Some((merged, fair.clone()));
                } else if runs.len() >= PROBE_INTERVALS {
                    forget(&mut st.moved);
                    probe_undecided_end = true;
                } else {
                    st.probe = Some((here, runs));
                }
                harmed = accumulated && probe_outcome != Some(false);
            } else {
                st.probe = None;
                harmed = beyond || accumulated;
            }
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
        st.probe = None;
        st.proven = None;
        st.harms = st.harms.saturating_add(1);
        st.penalty = doubling(st.harms);
        st.step = FIRST_STEP;
        return Verdict::Reverted;
    }
    if st.penalty > 0 {
        st.penalty -= 1;
        return Verdict::Penalised {
            intervals: st.penalty,
        };
    }
    if !settled(&st.samples, limit.tolerance()) {
        return Verdict::Unreferenced;
    }
    // The guard weighs at most MOVED_SAMPLES intervals together; a mean of k intervals
    // is as noisy as one over sqrt(k). When even that cannot resolve the harm the SLO
    // allows, no measurement can show a move safe (nor a probe proven except by luck).
    if let Limit::Degradation(x) = limit {
        if st.noise > x * (MOVED_SAMPLES as f64).sqrt() {
            st.probe = None;
            return Verdict::TooNoisy { noise: st.noise };
        }
    }
    match probe_outcome {
        Some(true) => {
            st.step = (st.step_share() * 2.0).min(1.0);
            st.probe_failures = 0;
        }
        Some(false) => {
            st.step = (st.step_share() / 2.0).max(LEAST_STEP);
            st.probe_failures = st.probe_failures.saturating_add(1);
            st.probe_penalty = doubling(st.probe_failures);
            return Verdict::ProbeEnded {
                intervals: st.probe_penalty,
            };
        }
        None if probe_undecided_end => {
            st.step = (st.step_share() / 2.0).max(LEAST_STEP);
            return Verdict::ProbeEnded {
                intervals: st.probe_penalty,
            };
        }
        None => {}
    }
    if st.probe.is_some() {
        return Verdict::Probing;
    }
    if st.probe_penalty > 0 {
        st.probe_penalty -= 1;
        return Verdict::ProbeEnded {
            intervals: st.probe_penalty,
        };
    }
    Verdict::Proven
}

/// [`BASE_PENALTY`] doubled for each of `count − 1` earlier failures, at most
/// [`MAX_PENALTY`].
fn doubling(count: u32) -> u32 {
    let doubling = 1u32
        .checked_shl(count.saturating_sub(1))
        .unwrap_or(u32::MAX);
    BASE_PENALTY.saturating_mul(doubling).min(MAX_PENALTY)
}
