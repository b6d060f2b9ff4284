//! SLOs judged after the fact: per tenant and interval, against its target or (for
//! degradation SLOs) the fair scheme's latency in the same interval; the share of counted
//! intervals met, violations, unjudged tenants, and each row's `slo_met`, deviance and
//! target.
//!
//! Does not own: the other summary figures (`summary`).

use super::jobs::SchemeRun;
use super::summary::SchemeSummary;
use super::SLO_COMPLIANCE;
use crate::scenario::Scenario;
use crate::stats::{deviance, Counters, IntervalRow};
use control::Slo;
use std::collections::BTreeMap;

/// Whether counters `c` over `secs` seconds meet `slo` (`fair`: the fair scheme's in the
/// same interval); `None` when they cannot be judged (no requests).
fn meets(slo: &Slo, c: &Counters, fair: &Counters, secs: f64) -> Option<bool> {
    if c.requests == 0 {
        return None;
    }
    Some(match *slo {
        Slo::LatencyMs(t) => c.mean_ms() <= t,
        Slo::Degradation(x) => {
            if fair.requests == 0 {
                return None;
            }
            c.mean_ms() <= (1.0 + x) * fair.mean_ms() * (1.0 + 1e-9)
        }
        Slo::Iops(v) => c.requests as f64 / secs >= v,
        Slo::Mbps(m) => c.bytes as f64 / secs >= m * 1e6,
        Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
            let (q, t) = slo.tail()?;
            c.quantile_ms(q) <= t
        }
    })
}

/// Judges every scheme's tenants' SLOs per interval, fills in the SLO fields of
/// `schemes` and of the rows, and returns every scheme's rows (in `order`).
pub(super) fn judge_slos(
    sc: &Scenario,
    order: &[String],
    runs: &mut [SchemeRun],
    fair_k: usize,
    schemes: &mut BTreeMap<String, SchemeSummary>,
) -> Vec<IntervalRow> {
    let mut all_rows = Vec::new();
    let fair_intervals = runs[fair_k].intervals.clone();
    for (k, name) in order.iter().enumerate() {
        let r = &mut runs[k];
        let summary = schemes.get_mut(name).expect("inserted");
        let (mut pairs_met, mut pairs) = (0u64, 0u64);
        let (mut violations, mut unjudged) = (0u32, 0u32);
        for (i, t) in sc.tenants.iter().enumerate() {
            let Some(slo) = t.slo else { continue };
            let (mut met, mut judged, mut infeasible) = (0u32, 0u32, 0u32);
            for iv in r.warm(sc, i)..r.intervals.len() {
                infeasible += r.infeasible_at.get(iv).is_some_and(|v| v[i]) as u32;
                let c = &r.intervals[iv][i];
                let f = fair_intervals
                    .get(iv)
                    .and_then(|v| v.get(i))
                    .cloned()
                    .unwrap_or_default();
                if let Some(ok) = meets(&slo, c, &f, sc.interval) {
                    judged += 1;
                    met += ok as u32;
                }
            }
            pairs_met += met as u64;
            pairs += judged as u64;
            let share = (judged > 0).then(|| met as f64 / judged as f64);
            match share {
                None => {
                    unjudged += 1;
                    violations += 1;
                }
                Some(s) if s < SLO_COMPLIANCE => violations += 1,
                Some(_) => {}
            }
            if let Some(ts) = summary.tenants.get_mut(&t.name) {
                ts.slo_met_share = share;
                ts.slo_judged_intervals = judged;
                ts.slo_unjudged = judged == 0;
                ts.infeasible_intervals = infeasible;
            }
            for row in r.rows.iter_mut().filter(|row| row.tenant == t.name) {
                let iv = row.interval as usize;
                let c = &r
                    .intervals
                    .get(iv)
                    .map(|v| v[i].clone())
                    .unwrap_or_default();
                let f = fair_intervals
                    .get(iv)
                    .and_then(|v| v.get(i))
                    .cloned()
                    .unwrap_or_default();
                row.slo_met = meets(&slo, c, &f, sc.interval);
                let len = if iv + 1 == r.intervals.len() {
                    // The last interval may be partial.
                    (row.time_s - iv as f64 * sc.interval).max(1e-9)
                } else {
                    sc.interval
                };
                row.deviance = deviance(&slo, c, len, (f.requests > 0).then(|| f.mean_ms()));
                if let (Slo::Degradation(x), true) = (slo, f.requests > 0) {
                    row.target_ms = Some((1.0 + x) * f.mean_ms());
                }
            }
        }
        summary.slo_violations = violations;
        summary.slo_unjudged = unjudged;
        summary.slo_met_share = if pairs == 0 {
            1.0
        } else {
            pairs_met as f64 / pairs as f64
        };
        all_rows.append(&mut r.rows);
    }
    all_rows
}
