//! Degradation SLOs judged on what the clients measured rather than on the controller's
//! model: against a fair-share arm run before on the same requests
//! ([`judge_against_fair`]), or, for the fair arm itself, met by definition wherever it
//! served requests ([`fair_meets_degradation`]).

use super::results::{span, ArmResult, DriverLog};
use super::workload::DemoTenant;
use crate::views::IntervalReport;
use control::Slo;

/// Re-judges the degradation SLOs of `r` on measurements against `fair` (the same
/// workload under fair share). A degradation SLO `x` holds at the end of an interval when
/// the tenant's clients have spent at most `1 + x` times as long on the requests they have
/// completed so far as the fair arm's clients spent on the same requests (its drivers
/// replay the same sequences, closed loop, so this is being at most `x` behind fair share
/// through the same work). Progress so far, not the interval alone: a write-back cache
/// that absorbs a burst defers its write-back to later intervals, so the same requests
/// cost less early and more later, and only the sum says whether the tenant was slowed.
/// The row keeps its measured latency; its target becomes the one that comparison
/// implies for it (`latency · (1 + x) · fair / ours`), so `latency ≤ target` is the
/// verdict. `None` when the fair arm reached none of the requests.
pub(super) fn judge_against_fair(
    r: &mut IntervalReport,
    ts: &[DemoTenant],
    logs: &[DriverLog],
    after: &[usize],
    fair: &ArmResult,
) {
    for row in &mut r.rows {
        let Some(Slo::Degradation(x)) =
            ts.iter().find(|t| t.name == row.tenant).and_then(|t| t.slo)
        else {
            continue;
        };
        let (mut ours, mut theirs) = (0.0, 0.0);
        for (d, log) in logs
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tenant == row.tenant)
        {
            let Some(f) = fair.drivers.get(d).filter(|f| f.tenant == log.tenant) else {
                continue;
            };
            // Only the requests the fair arm completed too.
            let to = after[d].min(f.latencies_ms.len());
            ours += span(&log.latencies_ms, 0, to).0;
            theirs += span(&f.latencies_ms, 0, to).0;
        }
        match row.latency_ms {
            Some(lat) if ours > 0.0 && theirs > 0.0 => {
                let ratio = ours / theirs;
                row.target_ms = Some(lat * (1.0 + x) / ratio);
                row.slo_met = Some(ratio <= 1.0 + x);
            }
            _ => {
                row.target_ms = None;
                row.slo_met = None;
            }
        }
    }
}

/// The fair arm is the reference of degradation SLOs: it meets them by definition
/// wherever it served requests (what the controller's model made of them is no verdict).
pub(super) fn fair_meets_degradation(r: &mut IntervalReport, ts: &[DemoTenant]) {
    for row in &mut r.rows {
        if let Some(Slo::Degradation(x)) =
            ts.iter().find(|t| t.name == row.tenant).and_then(|t| t.slo)
        {
            row.target_ms = row.latency_ms.map(|l| l * (1.0 + x));
            row.slo_met = row.latency_ms.map(|_| true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::results::tests::{arm, log};
    use super::super::workload::tenants;
    use super::*;
    use crate::views::Row;

    fn report(latency: f64) -> IntervalReport {
        let row = |t: &str| Row {
            tenant: t.into(),
            latency_ms: Some(latency),
            target_ms: Some(99.0),
            slo_met: Some(false),
            ..Row::default()
        };
        IntervalReport {
            rows: vec![row("db"), row("web"), row("cloud")],
            ..IntervalReport::default()
        }
    }

    #[test]
    fn degradation_is_judged_on_progress_through_the_same_requests() {
        let ts = tenants(1.5);
        // Drivers in the demo's order: db ×2, scan, cloud ×2, web ×2.
        let fair = arm(vec![
            log("db", &[1.0; 10]),
            log("db", &[1.0; 10]),
            log("scan", &[4.0; 10]),
            log("cloud", &[10.0, 10.0, 10.0, 10.0]),
            log("cloud", &[10.0, 10.0]),
            log("web", &[5.0; 4]),
            log("web", &[5.0; 4]),
        ]);
        let ours = vec![
            log("db", &[0.5; 10]),
            log("db", &[0.5; 10]),
            log("scan", &[4.0; 10]),
            // Faster early, slower later, and further than the fair arm got.
            log("cloud", &[2.0, 2.0, 20.0, 20.0, 20.0, 20.0]),
            log("cloud", &[2.0, 30.0, 30.0]),
            log("web", &[6.0, 6.0, 6.0, 6.0]),
            log("web", &[6.5, 6.5, 6.5, 6.5]),
        ];
        // After 3 and 2 cloud requests: 2+2+20 + 2+30 = 56 ms against 50 (1.12 > 1.1).
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 3, 2, 4, 4], &fair);
        let cloud = &r.rows[2];
        assert_eq!(cloud.slo_met, Some(false));
        assert!((cloud.target_ms.unwrap() - 8.0 * 1.1 / (56.0 / 50.0)).abs() < 1e-9);
        assert_eq!(
            cloud.latency_ms,
            Some(8.0),
            "the row keeps its measured latency"
        );
        // After 2 and 1: 4 + 2 = 6 against 30: met.
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 2, 1, 4, 4], &fair);
        assert_eq!(r.rows[2].slo_met, Some(true));
        // Past what the fair arm reached only the common requests count: 4 and 2 of them,
        // 2+2+20+20 + 2+30 = 76 against 60 (1.27 > 1.1).
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 6, 3, 4, 4], &fair);
        assert_eq!(r.rows[2].slo_met, Some(false));
        // web (20 %): 24 + 26 = 50 against 40 is 1.25: missed; db's absolute SLO is left
        // as the controller judged it.
        assert_eq!(r.rows[1].slo_met, Some(false));
        assert_eq!(
            (r.rows[0].target_ms, r.rows[0].slo_met),
            (Some(99.0), Some(false))
        );
        // Nothing the fair arm completed: no verdict.
        let empty = arm(Vec::new());
        let mut r = report(8.0);
        judge_against_fair(&mut r, &ts, &ours, &[5, 5, 5, 3, 2, 4, 4], &empty);
        assert_eq!((r.rows[2].target_ms, r.rows[2].slo_met), (None, None));
    }
}
