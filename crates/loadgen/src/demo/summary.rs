//! What the demo's arms measured, summarised: for one arm against the fair arm
//! ([`ArmComparison`], which `lachesis bench control` prints too), and for the three arms side
//! by side ([`DemoSummary`], the demo's last line).
//!
//! Every figure counts the intervals after the first [`WARMUP_INTERVALS`], the same in
//! every arm. An SLO is counted in every such interval in which it was judged (the tenant
//! had requests); an interval the plan called infeasible is counted like any other and
//! shown beside ([`TenantResult::infeasible_intervals`]), never left out. A tenant never
//! judged is reported with no share (`None`), never as meeting its SLO. Latencies are
//! what the tenant's clients measured of every request they completed after the warm-up.

use super::results::{span, ArmResult, DriverLog};
use controller::service::IntervalReport;
use std::collections::BTreeMap;

/// Intervals at the start of every arm that no figure counts (caches warming).
pub const WARMUP_INTERVALS: usize = 12;

/// The comparison of one arm against the fair arm.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArmComparison {
    /// Of the (tenant, interval) pairs after the warm-up in which an SLO was judged, the
    /// share in which it held (`None`: none judged).
    pub slo_met_share: Option<f64>,
    /// Pairs counted in `slo_met_share`.
    pub slo_checks: usize,
    /// Of those, the pairs the plan called infeasible (counted all the same).
    pub infeasible_checks: usize,
    /// Level-1 requests per second of the arm after the warm-up, over the fair arm's.
    pub throughput_vs_fair: Option<f64>,
    /// Requests per second of the arm (after the warm-up).
    pub throughput: f64,
    /// Requests per second of the fair arm, if it ran.
    pub fair_throughput: Option<f64>,
    /// Intervals of the arm.
    pub intervals: usize,
    /// Per tenant, the share of its judged intervals it met its SLO.
    pub per_tenant: BTreeMap<String, f64>,
    /// Per tenant, the mean latency its clients saw over the requests both arms completed,
    /// in the arm over in the fair arm: a degradation SLO judged over the whole run.
    pub latency_vs_fair: BTreeMap<String, f64>,
}

/// Per tenant, the mean latency its clients saw over the requests both arms completed
/// (the same requests: each driver's sequence is the same in both) in `arm` over `fair`.
pub(super) fn latency_vs_fair(arm: &ArmResult, fair: &ArmResult) -> BTreeMap<String, f64> {
    let mut acc: BTreeMap<String, (f64, f64)> = Default::default();
    for (a, f) in arm.drivers.iter().zip(&fair.drivers) {
        if a.tenant != f.tenant {
            continue;
        }
        let n = a.latencies_ms.len().min(f.latencies_ms.len());
        let e = acc.entry(a.tenant.clone()).or_default();
        e.0 += span(&a.latencies_ms, 0, n).0;
        e.1 += span(&f.latencies_ms, 0, n).0;
    }
    acc.into_iter()
        .filter(|(_, (_, f))| *f > 0.0)
        .map(|(t, (a, f))| (t, a / f))
        .collect()
}

fn counted(a: &ArmResult) -> impl Iterator<Item = &IntervalReport> {
    a.reports.iter().skip(WARMUP_INTERVALS)
}

/// Level-1 requests per second after the warm-up.
fn rate(a: &ArmResult) -> f64 {
    let secs: f64 = counted(a).map(|x| x.seconds).sum();
    let req: u64 = counted(a)
        .flat_map(|x| &x.rows)
        .map(|row| row.requests)
        .sum();
    if secs > 0.0 {
        req as f64 / secs
    } else {
        0.0
    }
}

/// Per tenant: (intervals met, intervals judged, intervals the plan called infeasible,
/// of those the intervals the SLO was measured to hold in).
fn verdicts(arm: &ArmResult) -> BTreeMap<String, (usize, usize, usize, usize)> {
    let mut per: BTreeMap<String, (usize, usize, usize, usize)> = Default::default();
    for r in counted(arm) {
        for row in &r.rows {
            let e = per.entry(row.tenant.clone()).or_default();
            if r.infeasible.iter().any(|s| s.tenant == row.tenant) {
                e.2 += 1;
                if row.slo_met == Some(true) {
                    e.3 += 1;
                }
            }
            if let Some(m) = row.slo_met {
                e.1 += 1;
                if m {
                    e.0 += 1;
                }
            }
        }
    }
    per
}

fn share(met: usize, of: usize) -> Option<f64> {
    (of > 0).then(|| met as f64 / of as f64)
}

impl ArmComparison {
    /// Summarises `arm` against `fair`.
    pub fn of(arm: &ArmResult, fair: Option<&ArmResult>) -> ArmComparison {
        let per = verdicts(arm);
        let met: usize = per.values().map(|v| v.0).sum();
        let checks: usize = per.values().map(|v| v.1).sum();
        let throughput = rate(arm);
        let fair_throughput = fair.map(rate);
        ArmComparison {
            slo_met_share: share(met, checks),
            slo_checks: checks,
            infeasible_checks: per.values().map(|v| v.2).sum(),
            throughput_vs_fair: fair_throughput.filter(|f| *f > 0.0).map(|f| throughput / f),
            throughput,
            fair_throughput,
            intervals: arm.reports.len(),
            per_tenant: per
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), share(v.0, v.1)?)))
                .collect(),
            latency_vs_fair: fair.map(|f| latency_vs_fair(arm, f)).unwrap_or_default(),
        }
    }
}

/// One tenant in one arm.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TenantResult {
    /// Its SLO as text, if any.
    pub slo: Option<String>,
    /// The share of the judged intervals after the warm-up in which it held (`None`: no
    /// SLO, or never judged).
    pub slo_met_share: Option<f64>,
    /// Intervals judged.
    pub judged_intervals: usize,
    /// Mean latency of the requests its clients completed after the warm-up (ms).
    pub mean_ms: Option<f64>,
    /// Their 99th percentile (ms).
    pub p99_ms: Option<f64>,
    /// Intervals after the warm-up the plan called its SLO infeasible in (counted in the
    /// share all the same).
    pub infeasible_intervals: usize,
    /// Of those, the intervals in which the SLO was measured to hold all the same: the
    /// plan's model was wrong, not the tenant's service (the model's hit-ratio curve
    /// counts a window's first references as misses, which caps the hit ratio it
    /// predicts below what a p99 SLO needs even when the set is cached).
    pub infeasible_met_intervals: usize,
}

/// One arm.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ArmSummary {
    /// Level-1 requests per second after the warm-up.
    pub throughput: f64,
    /// The share of judged (tenant, interval) pairs after the warm-up whose SLO held.
    pub slo_met_share: Option<f64>,
    /// Per tenant.
    pub tenants: BTreeMap<String, TenantResult>,
}

/// The latencies (ms) each tenant's clients logged after the warm-up: `warm[d]` is how
/// many driver `d` had logged by then (empty: the arm ended within the warm-up, and
/// nothing counts).
fn after_warmup(drivers: &[DriverLog], warm: &[usize]) -> BTreeMap<String, Vec<f32>> {
    let mut out: BTreeMap<String, Vec<f32>> = BTreeMap::new();
    for (d, log) in drivers.iter().enumerate() {
        let logged = log.latencies_ms.len();
        let from = if warm.is_empty() {
            logged
        } else {
            warm.get(d).copied().unwrap_or(0).min(logged)
        };
        out.entry(log.tenant.clone())
            .or_default()
            .extend_from_slice(&log.latencies_ms[from..]);
    }
    out
}

/// Mean and 99th percentile (nearest rank) of `v`.
fn mean_p99(v: &mut [f32]) -> (Option<f64>, Option<f64>) {
    if v.is_empty() {
        return (None, None);
    }
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
    v.sort_unstable_by(f32::total_cmp);
    let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    (Some(mean), Some(f64::from(v[rank - 1])))
}

impl ArmSummary {
    /// Summarises `arm`; `slos` gives each tenant's SLO as text.
    pub fn of(arm: &ArmResult, slos: &BTreeMap<String, Option<String>>) -> ArmSummary {
        let per = verdicts(arm);
        let mut lat = after_warmup(&arm.drivers, &arm.warm);
        let tenants = slos
            .iter()
            .map(|(name, slo)| {
                let (met, judged, infeasible, infeasible_met) =
                    per.get(name).copied().unwrap_or_default();
                let (mean_ms, p99_ms) = mean_p99(lat.get_mut(name).map_or(&mut [][..], |v| v));
                let r = TenantResult {
                    slo: slo.clone(),
                    slo_met_share: slo.as_ref().and_then(|_| share(met, judged)),
                    judged_intervals: judged,
                    mean_ms,
                    p99_ms,
                    infeasible_intervals: infeasible,
                    infeasible_met_intervals: infeasible_met,
                };
                (name.clone(), r)
            })
            .collect();
        let met: usize = per.values().map(|v| v.0).sum();
        let judged: usize = per.values().map(|v| v.1).sum();
        ArmSummary {
            throughput: rate(arm),
            slo_met_share: share(met, judged),
            tenants,
        }
    }
}

/// The demo's arms side by side: `lachesis`'s share of SLOs met and its throughput over
/// the fair arm's, then every arm.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DemoSummary {
    /// The scheme under test's share of judged (tenant, interval) pairs whose SLO held.
    pub slo_met_share: Option<f64>,
    /// Its throughput over the fair arm's.
    pub throughput_vs_fair: Option<f64>,
    /// Intervals of its arm.
    pub intervals: usize,
    /// Per arm, by scheme name.
    pub arms: BTreeMap<String, ArmSummary>,
}

impl DemoSummary {
    /// The summary of `arms` (scheme name, result), the scheme under test being `ours`.
    pub fn of(
        arms: &[(&str, &ArmResult)],
        ours: &str,
        slos: &BTreeMap<String, Option<String>>,
    ) -> DemoSummary {
        let by: BTreeMap<String, ArmSummary> = arms
            .iter()
            .map(|(n, a)| (n.to_string(), ArmSummary::of(a, slos)))
            .collect();
        let fair = by.get("fair").map(|a| a.throughput).filter(|t| *t > 0.0);
        let main = by.get(ours);
        DemoSummary {
            slo_met_share: main.and_then(|a| a.slo_met_share),
            throughput_vs_fair: main.zip(fair).map(|(a, f)| a.throughput / f),
            intervals: arms
                .iter()
                .find(|(n, _)| *n == ours)
                .map_or(0, |(_, a)| a.reports.len()),
            arms: by,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::results::tests::{arm, log};
    use super::*;
    use controller::service::Row;

    #[test]
    fn latency_against_fair_share_covers_the_requests_both_completed() {
        let fair = arm(vec![log("cloud", &[10.0, 10.0]), log("web", &[5.0; 3])]);
        let ours = arm(vec![
            log("cloud", &[4.0, 6.0, 100.0]),
            log("web", &[6.0, 6.0]),
        ]);
        let r = latency_vs_fair(&ours, &fair);
        assert!((r["cloud"] - 0.5).abs() < 1e-12);
        assert!((r["web"] - 1.2).abs() < 1e-12);
    }
    #[test]
    fn every_interval_after_the_warm_up_counts_infeasible_or_not() {
        let row = |t: &str, met: Option<bool>, requests: u64| Row {
            tenant: t.into(),
            slo_met: met,
            requests,
            ..Row::default()
        };
        let report = |db: Option<bool>, infeasible: bool| IntervalReport {
            seconds: 2.0,
            rows: vec![row("db", db, 100), row("scan", None, 300)],
            infeasible: if infeasible {
                vec![api::controller::Shortfall {
                    tenant: "db".into(),
                    target_ms: 1.0,
                    predicted_ms: 2.0,
                    reason: String::new(),
                }]
            } else {
                Vec::new()
            },
            ..IntervalReport::default()
        };
        let mut a = arm(vec![
            log("db", &[9.0, 9.0, 1.0, 1.0, 1.0, 3.0]),
            log("scan", &[4.0; 4]),
        ]);
        // The warm-up's intervals (misses not counted), then a met, an infeasible miss,
        // an unjudged interval and a met one.
        a.reports = vec![report(Some(false), false); WARMUP_INTERVALS];
        a.reports.extend([
            report(Some(true), false),
            report(Some(false), true),
            report(None, false),
            report(Some(true), false),
        ]);
        a.warm = vec![2, 1];
        let slos: BTreeMap<String, Option<String>> = [
            ("db".to_string(), Some("p99 ≤2 ms".to_string())),
            ("scan".to_string(), None),
        ]
        .into();
        let s = ArmSummary::of(&a, &slos);
        let db = &s.tenants["db"];
        assert_eq!(db.judged_intervals, 3);
        assert_eq!(db.infeasible_intervals, 1);
        assert_eq!(db.infeasible_met_intervals, 0);
        assert!((db.slo_met_share.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // The clients' requests after the warm-up: 1, 1, 1, 3.
        assert_eq!(db.mean_ms, Some(1.5));
        assert_eq!(db.p99_ms, Some(3.0));
        assert_eq!(s.tenants["scan"].slo_met_share, None);
        assert_eq!(s.tenants["scan"].p99_ms, Some(4.0));
        // 4 counted intervals of 2 s, 400 requests each.
        assert!((s.throughput - 200.0).abs() < 1e-9);
        let old = ArmComparison::of(&a, None);
        assert_eq!((old.slo_checks, old.infeasible_checks), (3, 1));
        let d = DemoSummary::of(&[("fair", &a), ("lachesis", &a)], "lachesis", &slos);
        assert_eq!(d.throughput_vs_fair, Some(1.0));
        assert_eq!(d.intervals, WARMUP_INTERVALS + 4);
        // Nothing judged: no share, never "met".
        let mut none = a.clone();
        none.reports.truncate(WARMUP_INTERVALS);
        none.warm.clear();
        let db = &ArmSummary::of(&none, &slos).tenants["db"];
        assert_eq!(
            (db.slo_met_share, db.mean_ms, db.p99_ms),
            (None, None, None)
        );
    }
}
