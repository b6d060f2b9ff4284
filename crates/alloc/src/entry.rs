//! The library entry point [`allocate`]: validation, priority partitions, then the chosen
//! objective, then one report row per tenant.
//!
//! Order of business: priority partitions come off the top of the capacity (exactly
//! their size); the rest is shared in whole steps among the other tenants:
//! * `fair` — weighted max-min fair shares within min/max, each capped at the tenant's
//!   [`footprint`] (rounded up to a step), so capacity a tenant cannot use goes to the
//!   others; what no one can use stays unallocated;
//! * `utility` — the fast hull greedy with the rounding fix-up, within min/max;
//! * `slo` — SLO minimums (see [`crate::slo`] for who gets theirs when they do not all
//!   fit), then the fast method for the rest;
//! * `mlms` — see [`crate::mlms::allocate_levels`].
//!
//! Capacity that is not a whole step, or that no tenant gains from, stays unallocated.

use crate::fair::{fair_shares, take_priority};
use crate::report::row;
use crate::slo::{self, SloStatus, SloTenant};
use crate::utility::{fast, FixUp, UtilityProblem, UtilityTenant};
use crate::{AllocError, AllocInput, AllocOutput, Objective};
use mrc::{CurvePoint, HitRatioCurve};
use std::collections::HashSet;

/// The monotone envelope of a curve: the running minimum of its miss ratio.
pub fn monotone_envelope(curve: &HitRatioCurve) -> HitRatioCurve {
    let mut best = f64::INFINITY;
    let pts: Vec<CurvePoint> = curve
        .points()
        .iter()
        .map(|p| {
            best = best.min(p.miss_ratio);
            CurvePoint {
                cache_size: p.cache_size,
                miss_ratio: best,
            }
        })
        .collect();
    HitRatioCurve::new(pts).expect("same sizes, ratios within the original's")
}

/// The smallest size at which the curve reaches its lowest miss ratio: the most cache the
/// tenant can use (beyond it only cold misses are left). A flat curve's is its first size.
pub fn footprint(curve: &HitRatioCurve) -> u64 {
    let pts = curve.points();
    let floor = pts
        .iter()
        .map(|p| p.miss_ratio)
        .fold(f64::INFINITY, f64::min);
    pts.iter()
        .find(|p| p.miss_ratio <= floor + 1e-12)
        .map_or(0, |p| p.cache_size)
}

/// Checks names, weights, bounds, SLOs and curves; returns the curves to use.
pub(crate) fn validated_curves(input: &AllocInput) -> Result<Vec<HitRatioCurve>, AllocError> {
    if input.capacity == 0 {
        return Err(AllocError::ZeroCapacity);
    }
    if input.step == 0 {
        return Err(AllocError::ZeroStep);
    }
    let mut names = HashSet::new();
    let mut curves = Vec::with_capacity(input.tenants.len());
    for t in &input.tenants {
        let s = &t.spec;
        if !names.insert(s.name.as_str()) {
            return Err(AllocError::DuplicateTenant(s.name.clone()));
        }
        if !(s.weight.is_finite() && s.weight >= 0.0) {
            return Err(AllocError::BadWeight {
                tenant: s.name.clone(),
                weight: s.weight,
            });
        }
        if let (Some(lo), Some(hi)) = (s.min, s.max) {
            if lo > hi {
                return Err(AllocError::MinAboveMax {
                    tenant: s.name.clone(),
                });
            }
        }
        if let Some(slo) = &s.slo {
            slo::check(slo).map_err(|reason| AllocError::BadSlo {
                tenant: s.name.clone(),
                reason,
            })?;
        }
        if let Some(w) = t
            .curve
            .points()
            .windows(2)
            .find(|w| w[1].miss_ratio > w[0].miss_ratio + 1e-12)
        {
            if !input.repair_curves {
                return Err(AllocError::NonMonotoneCurve {
                    tenant: s.name.clone(),
                    size: w[1].cache_size,
                });
            }
            curves.push(monotone_envelope(&t.curve));
        } else {
            curves.push(t.curve.clone());
        }
    }
    Ok(curves)
}

/// Allocates `input.capacity` blocks among the tenants for `input.objective`.
pub fn allocate(input: &AllocInput) -> Result<AllocOutput, AllocError> {
    let curves = validated_curves(input)?;
    if input.objective == Objective::Mlms {
        return crate::mlms::allocate_levels(input, &curves);
    }
    let step = input.step;
    if step > input.capacity {
        return Err(AllocError::StepAboveCapacity {
            step,
            capacity: input.capacity,
        });
    }
    let prio: Vec<Option<u64>> = input.tenants.iter().map(|t| t.spec.priority).collect();
    let rest = take_priority(&prio, input.capacity)?;
    let free: Vec<usize> = (0..input.tenants.len())
        .filter(|&i| prio[i].is_none())
        .collect();
    let spec = |i: usize| &input.tenants[i].spec;
    let mins: Vec<u64> = free
        .iter()
        .map(|&i| spec(i).min.unwrap_or(0).div_ceil(step))
        .collect();
    let maxs: Vec<u64> = free
        .iter()
        .map(|&i| spec(i).max.map_or(u64::MAX, |m| m / step))
        .collect();
    for (j, &i) in free.iter().enumerate() {
        if mins[j] > maxs[j] {
            return Err(AllocError::MinAboveMax {
                tenant: spec(i).name.clone(),
            });
        }
    }
    let need: u64 = mins.iter().map(|m| m * step).sum();
    if need > rest {
        return Err(AllocError::MinimumsExceedCapacity {
            need,
            capacity: rest,
        });
    }
    let cap_steps = rest / step;
    let mut status = vec![SloStatus::None; free.len()];
    let mut status_note: Vec<Option<String>> = vec![None; free.len()];
    let steps = match input.objective {
        Objective::Fair => {
            // No tenant gets more than it can use while others wait: a share is capped at
            // the curve's footprint (in whole steps, never below the tenant's minimum).
            let w: Vec<f64> = free.iter().map(|&i| spec(i).weight).collect();
            let caps: Vec<u64> = free
                .iter()
                .enumerate()
                .map(|(j, &i)| {
                    let fp = footprint(&curves[i]).div_ceil(step).max(mins[j]);
                    if fp < maxs[j] {
                        status_note[j] = Some(format!(
                            "fair share capped at the curve's footprint ({} blocks)",
                            footprint(&curves[i])
                        ));
                    }
                    fp.min(maxs[j])
                })
                .collect();
            let steps = fair_shares(&w, &mins, &caps, cap_steps)?;
            for (j, n) in status_note.iter_mut().enumerate() {
                if steps[j] < caps[j] {
                    *n = None;
                }
            }
            steps
        }
        Objective::Utility | Objective::Slo => {
            let mut lo = mins.clone();
            if input.objective == Objective::Slo {
                let ts: Vec<SloTenant> = free
                    .iter()
                    .zip(&mins)
                    .map(|(&i, &m)| SloTenant {
                        curve: &curves[i],
                        slo: spec(i).slo.as_ref(),
                        weight: spec(i).weight,
                        floor: m * step,
                    })
                    .collect();
                status = slo::slo_minimums(&ts, cap_steps * step, step)?;
                for (j, s) in status.iter().enumerate() {
                    lo[j] = lo[j].max(s.reserved() / step).min(maxs[j]);
                }
            }
            let p = UtilityProblem {
                tenants: free
                    .iter()
                    .enumerate()
                    .map(|(j, &i)| UtilityTenant {
                        curve: &curves[i],
                        weight: spec(i).weight,
                        min_steps: lo[j],
                        max_steps: maxs[j],
                    })
                    .collect(),
                step,
                capacity_steps: cap_steps,
            };
            fast(&p, FixUp::Round)?.steps
        }
        Objective::Mlms => unreachable!("handled above"),
    };
    let mut sizes: Vec<u64> = prio.iter().map(|p| p.unwrap_or(0)).collect();
    let mut reasons: Vec<Option<String>> = prio
        .iter()
        .map(|p| p.map(|_| "dedicated priority partition".to_string()))
        .collect();
    for (j, &i) in free.iter().enumerate() {
        sizes[i] = steps[j] * step;
        reasons[i] = status[j].reason().or(status_note[j].take());
    }
    let tenants = input
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let hit = curves[i].hit_ratio(sizes[i] as f64);
            row(
                &t.spec.name,
                sizes[i],
                hit,
                t.spec.slo.as_ref(),
                reasons[i].take(),
            )
        })
        .collect();
    Ok(AllocOutput {
        objective: input.objective,
        capacity: input.capacity,
        seconds: None,
        tenants,
    })
}
