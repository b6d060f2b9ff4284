//! The two-level latency model the controller plans with, and SLOs turned into latency
//! targets.
//!
//! A tenant's mean latency at `c1` level-1 blocks and `c2` level-2 blocks (over all its
//! servers), from its hit-ratio curve `H` and the mean service time of a level-1 hit `a`,
//! a level-2 hit `b` and a miss `d`:
//! * exclusive levels (level 2 extends level 1's stack): `h1 = H(c1)`, `h12 = H(c1 + c2)`;
//! * inclusive levels (level 2 holds a superset only when larger): `h1 = H(c1)`,
//!   `h12 = H(max(c1, c2))`;
//!
//! and `lat = a·h1 + b·(h12 − h1) + d·(1 − h12)`. The service times are what the tenant
//! observed last (so queueing at a busy disk raises `d` and makes space there worth more),
//! or the topology's figures before it observed any.

use crate::topology::{Levels, ServiceTimes, Slo, Tenant};
use mrc::HitRatioCurve;

/// One tenant's latency model.
#[derive(Clone, Debug)]
pub struct LatencyModel {
    /// Its curve (monotone), sizes in blocks.
    pub curve: HitRatioCurve,
    /// Service times (ms).
    pub service: ServiceTimes,
    /// How the levels relate.
    pub levels: Levels,
}

impl LatencyModel {
    /// Hit ratios `(level 1, both levels)` at `(c1, c2)`.
    pub fn hit_ratios(&self, c1: f64, c2: f64) -> (f64, f64) {
        let h1 = self.curve.hit_ratio(c1);
        let h12 = match self.levels {
            Levels::Exclusive => self.curve.hit_ratio(c1 + c2),
            Levels::Inclusive => self.curve.hit_ratio(c1.max(c2)),
        };
        (h1, h12.max(h1))
    }

    /// Predicted mean latency (ms) at `(c1, c2)`.
    pub fn latency(&self, c1: f64, c2: f64) -> f64 {
        let (h1, h12) = self.hit_ratios(c1, c2);
        let s = &self.service;
        s.l1_hit_ms * h1 + s.l2_hit_ms * (h12 - h1) + s.miss_ms * (1.0 - h12)
    }

    /// The smallest `c2` on multiples of `step` up to `max` with `latency(c1, c2) <= target`
    /// (binary search: latency never rises with `c2`).
    pub fn min_c2(&self, c1: f64, target: f64, step: u64, max: u64) -> Option<u64> {
        let steps = max / step.max(1);
        if self.latency(c1, (steps * step) as f64) > target {
            return None;
        }
        let (mut lo, mut hi) = (0u64, steps);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.latency(c1, (mid * step) as f64) <= target {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(lo * step)
    }
}

/// The latency (ms) tenant `t`'s SLO allows, given its fair-share latency and what it
/// observed (requests, bytes, mean latency over `seconds`); `None` without an SLO, or for
/// a throughput SLO before anything was observed.
pub fn latency_target(
    t: &Tenant,
    lat_fair_ms: f64,
    observed: Option<(u64, u64, f64)>,
    seconds: f64,
) -> Option<f64> {
    let slo = t.slo?;
    // Little's law: a tenant keeping `depth` requests in flight at `iops` per second sees
    // a mean latency of depth / iops.
    let depth = || -> Option<f64> {
        t.depth.or_else(|| {
            let (req, _, lat) = observed?;
            (req > 0 && seconds > 0.0).then(|| (req as f64 / seconds) * lat / 1e3)
        })
    };
    match slo {
        Slo::LatencyMs(ms) => Some(ms),
        Slo::Degradation(x) => Some((1.0 + x) * lat_fair_ms),
        Slo::Iops(iops) => Some(depth()? / iops * 1e3),
        Slo::Mbps(mbps) => {
            let (req, bytes, _) = observed?;
            if req == 0 {
                return None;
            }
            let iops = mbps * 1e6 / (bytes as f64 / req as f64);
            Some(depth()? / iops * 1e3)
        }
    }
}

/// A curve `x ↦ f(x) / f(0)` over `0..=max` blocks, sampled at about `points` sizes (plus
/// `max`), made monotone: the form the concave-hull optimiser takes for a latency
/// function `f` that falls with size (it maximises `weight · (1 − curve)`).
pub fn normalised_curve(
    mut f: impl FnMut(u64) -> f64,
    max: u64,
    points: u64,
) -> (HitRatioCurve, f64) {
    let base = f(0).max(1e-12);
    let step = (max / points.max(1)).max(1);
    let mut pairs = Vec::new();
    let mut low = 1.0f64;
    let mut x = 0;
    loop {
        let r = (f(x) / base).clamp(0.0, 1.0).min(low);
        low = r;
        pairs.push((x, r));
        if x >= max {
            break;
        }
        x = (x + step).min(max);
    }
    let curve = HitRatioCurve::from_pairs(pairs).expect("sizes rise, ratios in [0, 1]");
    (curve, base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(levels: Levels) -> LatencyModel {
        LatencyModel {
            curve: HitRatioCurve::from_pairs([(0, 1.0), (100, 0.0)]).unwrap(),
            service: ServiceTimes {
                l1_hit_ms: 0.1,
                l2_hit_ms: 1.0,
                miss_ms: 10.0,
            },
            levels,
        }
    }

    #[test]
    fn exclusive_levels_extend_the_stack_inclusive_do_not() {
        let ex = model(Levels::Exclusive);
        // h1 = 0.2, h12 = 0.5: 0.02 + 0.3 + 5.0
        assert!((ex.latency(20.0, 30.0) - 5.32).abs() < 1e-9);
        let inc = model(Levels::Inclusive);
        // level 2 (30) barely larger than level 1 (20): h12 = 0.3
        assert!((inc.latency(20.0, 30.0) - (0.02 + 0.1 + 7.0)).abs() < 1e-9);
        // level 2 smaller than level 1 adds nothing
        assert!((inc.latency(20.0, 10.0) - (0.02 + 8.0)).abs() < 1e-9);
    }

    #[test]
    fn min_c2_is_the_smallest_sufficient_step() {
        let ex = model(Levels::Exclusive);
        // target 5.32 at c1 = 20 needs c2 = 30 exactly; on steps of 10 that is 30.
        assert_eq!(ex.min_c2(20.0, 5.32 + 1e-9, 10, 200), Some(30));
        assert_eq!(ex.min_c2(20.0, 0.05, 10, 200), None);
    }

    #[test]
    fn throughput_slos_become_latency_by_littles_law() {
        let mut t = Tenant {
            name: "t".into(),
            host: 0,
            servers: vec![0],
            stripe_unit: 16,
            slo: Some(Slo::Iops(1000.0)),
            class: Default::default(),
            depth: Some(4.0),
        };
        assert_eq!(latency_target(&t, 1.0, None, 1.0), Some(4.0));
        t.depth = None;
        assert_eq!(latency_target(&t, 1.0, None, 1.0), None);
        // 2,000 requests in 1 s at 2 ms each: 4 in flight.
        let got = latency_target(&t, 1.0, Some((2000, 0, 2.0)), 1.0).unwrap();
        assert!((got - 4.0).abs() < 1e-9);
        t.slo = Some(Slo::Mbps(8.192));
        // 8.192 MB/s of 8 KiB requests is 1,000 IOPS.
        let got = latency_target(&t, 1.0, Some((2000, 2000 * 8192, 2.0)), 1.0).unwrap();
        assert!((got - 4.0).abs() < 1e-9);
        t.slo = Some(Slo::Degradation(0.05));
        assert!((latency_target(&t, 2.0, None, 1.0).unwrap() - 2.1).abs() < 1e-12);
    }
}
