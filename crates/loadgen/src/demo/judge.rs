//! Degradation SLOs judged on what the clients measured rather than on the controller's
//! model ([`judge`]): each arm against the fair-share arm, which ran at the same time on
//! the same request streams; the fair arm itself meets them by definition wherever it
//! served requests (it is the reference).
//!
//! A degradation SLO `x` holds in an interval when the tenant's clients spent at most
//! `1 + x` times as long on the requests they completed in that interval as the fair
//! arm's clients spent on the same requests (request `k` of a client is the same request
//! in every arm). The row's latency becomes the clients' mean over those requests and
//! its target `1 + x` times the fair arm's mean over the same requests: the target comes
//! from the fair-share reference, never from the measured latency, and `latency ≤
//! target` is the verdict. Only requests the fair arm also completed count (the arms run
//! `extend` longer than is counted so that it reaches them); none: no verdict.

use super::options::DemoOptions;
use super::results::{span, ArmResult};
use super::workload::{tenants, DemoTenant};
use control::Slo;

/// Judges the degradation SLOs of every arm of `arms` (one of them `fair`), run with
/// `opts`, as the module says. Without a fair arm nothing changes.
pub fn judge(arms: &mut [ArmResult], opts: &DemoOptions) {
    let ts = tenants(opts.db_slo_ms);
    let Some(f) = arms.iter().position(|a| a.scheme == "fair") else {
        return;
    };
    let fair = arms[f].clone();
    for (i, arm) in arms.iter_mut().enumerate() {
        against_fair(arm, &ts, &fair, i == f);
    }
}

/// Judges `arm` against `fair` (`itself`: `arm` is the fair arm).
pub(super) fn against_fair(arm: &mut ArmResult, ts: &[DemoTenant], fair: &ArmResult, itself: bool) {
    for i in 0..arm.reports.len() {
        let (from, to) = (
            i.checked_sub(1).and_then(|p| arm.marks.get(p)).cloned(),
            arm.marks.get(i).cloned().unwrap_or_default(),
        );
        for row in &mut arm.reports[i].rows {
            let Some(Slo::Degradation(x)) =
                ts.iter().find(|t| t.name == row.tenant).and_then(|t| t.slo)
            else {
                continue;
            };
            let (mut ours, mut theirs, mut n) = (0.0, 0.0, 0usize);
            for (d, log) in arm.drivers.iter().enumerate() {
                let Some(fl) = fair.drivers.get(d).filter(|_| log.tenant == row.tenant) else {
                    continue;
                };
                let a = from.as_ref().and_then(|m| m.get(d)).copied().unwrap_or(0);
                // Only the requests the fair arm completed too.
                let b = to.get(d).copied().unwrap_or(a).min(fl.latencies_ms.len());
                let (o, k) = span(&log.latencies_ms, a, b);
                ours += o;
                theirs += span(&fl.latencies_ms, a, b).0;
                n += k;
            }
            if n == 0 || theirs <= 0.0 {
                row.target_ms = None;
                row.slo_met = None;
                continue;
            }
            let (mean, reference) = (ours / n as f64, theirs / n as f64);
            row.latency_ms = Some(mean);
            row.target_ms = Some((1.0 + x) * reference);
            row.slo_met = Some(itself || ours <= (1.0 + x) * theirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::results::tests::{arm, log};
    use super::*;
    use controller::views::{IntervalReport, Row};

    fn report() -> IntervalReport {
        let row = |t: &str| Row {
            tenant: t.into(),
            latency_ms: Some(3.0),
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
    fn degradation_is_judged_per_interval_on_the_same_requests() {
        let opts = DemoOptions {
            db_slo_ms: 1.5,
            ..DemoOptions::default()
        };
        // Drivers in the demo's order: db ×2, scan, cloud ×2, web ×2.
        let mut fair = arm(vec![
            log("db", &[1.0; 10]),
            log("db", &[1.0; 10]),
            log("scan", &[4.0; 10]),
            log("cloud", &[10.0, 10.0, 10.0, 10.0]),
            log("cloud", &[10.0, 10.0]),
            log("web", &[5.0; 4]),
            log("web", &[5.0; 4]),
        ]);
        let mut ours = arm(vec![
            log("db", &[0.5; 10]),
            log("db", &[0.5; 10]),
            log("scan", &[4.0; 10]),
            // Faster early, slower later, and further than the fair arm got.
            log("cloud", &[2.0, 2.0, 20.0, 20.0, 20.0, 20.0]),
            log("cloud", &[2.0, 30.0, 30.0]),
            log("web", &[6.0, 6.0, 6.0, 6.0]),
            log("web", &[5.5, 5.5, 5.5, 5.5]),
        ]);
        ours.scheme = "lachesis".into();
        ours.reports = vec![report(), report(), report()];
        // Interval 0: cloud's first 2 and 1 requests; 1: the next 1 and 1; 2: up to 6 and
        // 3 (past the fair arm's 4 and 2).
        ours.marks = vec![
            vec![5, 5, 5, 2, 1, 2, 2],
            vec![5, 5, 5, 3, 2, 4, 4],
            vec![10, 10, 10, 6, 3, 4, 4],
        ];
        fair.reports = vec![report()];
        fair.marks = vec![vec![10, 10, 10, 4, 2, 4, 4]];
        let mut arms = vec![fair, ours];
        judge(&mut arms, &opts);
        let r = &arms[1].reports;
        // 0: 2+2+2 = 6 ms on 3 requests against 30: met; the target is 1.1 × fair's mean.
        let cloud = &r[0].rows[2];
        assert_eq!(cloud.slo_met, Some(true));
        assert!((cloud.latency_ms.unwrap() - 2.0).abs() < 1e-9);
        assert!((cloud.target_ms.unwrap() - 11.0).abs() < 1e-9);
        // 1: 20 + 30 = 50 against 20: missed, whatever came before.
        let cloud = &r[1].rows[2];
        assert_eq!(cloud.slo_met, Some(false));
        assert!((cloud.target_ms.unwrap() - 11.0).abs() < 1e-9);
        assert!((cloud.latency_ms.unwrap() - 25.0).abs() < 1e-9);
        // 2: only request 3 of the first client is one the fair arm reached: 20 against 10.
        assert_eq!(r[2].rows[2].slo_met, Some(false));
        assert!((r[2].rows[2].latency_ms.unwrap() - 20.0).abs() < 1e-9);
        // web (20 %) in interval 0: 2·6 + 2·5.5 = 23 against 20 is 1.15: met; in
        // interval 1 the same; in 2 no request: no verdict.
        assert_eq!(r[0].rows[1].slo_met, Some(true));
        assert_eq!((r[2].rows[1].slo_met, r[2].rows[1].target_ms), (None, None));
        // db's absolute SLO is left as the controller judged it.
        assert_eq!(
            (r[0].rows[0].target_ms, r[0].rows[0].slo_met),
            (Some(99.0), Some(false))
        );
        // The fair arm meets its own reference, its target (1 + x) times its latency.
        let f = &arms[0].reports[0].rows[2];
        assert_eq!(f.slo_met, Some(true));
        assert!((f.target_ms.unwrap() - 11.0).abs() < 1e-9);
        // Without a fair arm nothing is judged.
        let mut alone = vec![arms[1].clone()];
        alone[0].reports = vec![report()];
        judge(&mut alone, &opts);
        assert_eq!(alone[0].reports[0].rows[2].slo_met, Some(false));
    }
}
