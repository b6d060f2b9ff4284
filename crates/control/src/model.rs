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
//! or the topology's figures before it observed any. That is the latency of a read; a
//! tenant whose writes were observed apart (share `w`, mean `W`) is modelled as
//! `(1 − w)·lat + w·W`. Through a write-through cache `W` is what it is whatever the
//! sizes. A write-back cache absorbs a write, but one that adds a block not resident
//! evicts another, and once the cache is full of dirty data that eviction waits for a
//! write-back: there `W = a + P·(1 − H(c1))`, `P` being what such a write paid beyond a
//! level-1 hit when observed, so a larger level-1 cache makes writes cheaper as far as
//! its curve says more of them find their block resident.
//!
//! A tail SLO (`q` of an interval's requests within `T` ms) is met when the requests
//! slower than `T` are at most `1 − q` of them. Level-1 hits take well under `T` (else no
//! size meets it). Where level-2 hits do too (their mean is within `T`), the slow ones are
//! the misses that overrun `T`: a share `s` of the misses, bounded from the quantiles of
//! the tenant's last measured miss latencies (all of them before any was measured). The
//! SLO then needs a hit ratio of both levels of at least `h* = 1 − (1 − q) / s`, and
//! [`tail_target`] turns that into the mean latency the model gives at `(h1, h12) =
//! (h*, h*)`: the model's mean rises as either hit ratio falls, so any sizes whose
//! modelled mean is within it have `h12 ≥ h*`. Where level-2 hits overrun `T` (their
//! mean does), every level-1 miss counts as slow, the SLO needs `h1 ≥ 1 − (1 − q)`, and
//! the target is the mean at `(h*, 1)`: a mean within it is only reached with `h1 ≥ h*`
//! (a miss costs at least a level-2 hit). Either way the step sizes a tail SLO like a
//! mean-latency one.

use crate::observe::Quantiles;
use crate::topology::{Levels, ServiceTimes, Slo, Tenant};
use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};

/// A tenant's write mix: the share of its requests that are writes and their mean
/// latency, which the cache sizes do not change (a write-back cache absorbs a write
/// whatever its size; a write-through one sends it to the disk whatever its size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteMix {
    /// Writes over requests, in `[0, 1]`.
    pub share: f64,
    /// Mean latency of a write (ms).
    pub ms: f64,
    /// Through a write-back level-1 cache: what a write that adds a block not resident
    /// costs beyond a level-1 hit (ms), so a write's mean at `c1` level-1 blocks is
    /// `l1_hit_ms + per_miss_ms·(1 − H(c1))` (at most four times `ms − l1_hit_ms` above a
    /// hit). `None`: a write costs `ms` at any size.
    #[serde(default)]
    pub per_miss_ms: Option<f64>,
}

/// One tenant's latency model.
#[derive(Clone, Debug)]
pub struct LatencyModel {
    /// Its curve (monotone), sizes in blocks.
    pub curve: HitRatioCurve,
    /// Service times (ms).
    pub service: ServiceTimes,
    /// How the levels relate.
    pub levels: Levels,
    /// Its writes, where observed apart from its reads (`None`: every request is modelled
    /// as a read).
    pub writes: Option<WriteMix>,
}

impl LatencyModel {
    /// Hit ratios `(level 1, both levels)` at `(c1, c2)`.
    pub fn hit_ratios(&self, c1: f64, c2: f64) -> (f64, f64) {
        self.hit_ratios_at(self.curve.hit_ratio(c1), c1, c2)
    }

    /// [`LatencyModel::hit_ratios`] given `h1`, the curve's hit ratio at `c1` (for a
    /// caller that evaluates many `c2` at one `c1`: one lookup of the curve, not two).
    pub fn hit_ratios_at(&self, h1: f64, c1: f64, c2: f64) -> (f64, f64) {
        let h12 = match self.levels {
            Levels::Exclusive => self.curve.hit_ratio(c1 + c2),
            Levels::Inclusive => self.curve.hit_ratio(c1.max(c2)),
        };
        (h1, h12.max(h1))
    }

    /// Predicted mean latency (ms) at `(c1, c2)`: of reads, or with a write mix `w` at
    /// `W` ms, `(1 − w)·reads + w·W`.
    pub fn latency(&self, c1: f64, c2: f64) -> f64 {
        self.latency_at(self.hit_ratios(c1, c2))
    }

    /// [`LatencyModel::latency`] at the hit ratios `(h1, h12)` that
    /// [`LatencyModel::hit_ratios`] gave, for a caller that needs them too.
    pub fn latency_at(&self, (h1, h12): (f64, f64)) -> f64 {
        let s = &self.service;
        let reads = s.l1_hit_ms * h1 + s.l2_hit_ms * (h12 - h1) + s.miss_ms * (1.0 - h12);
        match self.writes {
            Some(w) => {
                let share = w.share.clamp(0.0, 1.0);
                // Below the size it was seen at, a write is taken to pay at most four times
                // what it was seen to pay (the curve's tail is least sure).
                let write = match w.per_miss_ms {
                    Some(p) => {
                        let cap = 4.0 * (w.ms - s.l1_hit_ms).max(0.0);
                        s.l1_hit_ms + (p * (1.0 - h1)).min(cap)
                    }
                    None => w.ms,
                };
                (1.0 - share) * reads + share * write
            }
            None => reads,
        }
    }

    /// The level-1 size from which [`LatencyModel::latency`] no longer changes with `c1`,
    /// whatever `c2`: the end of the curve (both hit ratios are flat past it).
    pub fn flat_from_c1(&self) -> u64 {
        self.curve.max_size()
    }

    /// The level-2 size of one of `n` servers (the others fixed) from which the latency at
    /// `c1` no longer changes: where `c1 + n·x` (exclusive) or `n·x` (inclusive) reaches
    /// the end of the curve; 0 when `c1` already does.
    pub fn flat_from_c2(&self, c1: u64, n: u64) -> u64 {
        let end = self.curve.max_size();
        let n = n.max(1);
        if c1 >= end {
            return 0;
        }
        match self.levels {
            Levels::Exclusive => (end - c1).div_ceil(n),
            Levels::Inclusive => end.div_ceil(n),
        }
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

/// The mean latency (ms) a tail SLO of `q` within `ms` comes to (see the module doc):
/// `misses` are the tenant's last measured miss-latency quantiles (`None`: every miss is
/// taken to overrun `ms`).
pub fn tail_target(model: &LatencyModel, q: f64, ms: f64, misses: Option<&Quantiles>) -> f64 {
    if model.service.l2_hit_ms > ms {
        let h = q.clamp(0.0, 1.0);
        return model.latency_at((h, 1.0));
    }
    let slow = misses.map_or(1.0, |m| m.share_above(ms));
    let allowed_miss = if slow > 0.0 {
        ((1.0 - q) / slow).min(1.0)
    } else {
        1.0
    };
    let h = 1.0 - allowed_miss;
    model.latency_at((h, h))
}

/// The latency (ms) tenant `t`'s SLO allows, given its model, its fair-share latency and
/// what it observed (requests, bytes, mean latency over `seconds`; the quantiles of its
/// misses); `None` without an SLO, or for a throughput SLO before anything was observed.
pub fn latency_target(
    t: &Tenant,
    model: &LatencyModel,
    lat_fair_ms: f64,
    observed: Option<(u64, u64, f64)>,
    misses: Option<&Quantiles>,
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
        Slo::P95Ms(_) | Slo::P99Ms(_) | Slo::P999Ms(_) => {
            let (q, ms) = slo.tail()?;
            Some(tail_target(model, q, ms, misses))
        }
    }
}

/// A curve `x ↦ f(x) / f(0)` over `0..=max` blocks, sampled at about `points` sizes (plus
/// `max`), made monotone: the form the concave-hull optimiser takes for a latency
/// function `f` that falls with size (it maximises `weight · (1 − curve)`).
pub fn normalised_curve(f: impl FnMut(u64) -> f64, max: u64, points: u64) -> (HitRatioCurve, f64) {
    normalised_curve_flat(f, max, points, u64::MAX)
}

/// [`normalised_curve`] of an `f` known to be constant from `flat` blocks on (a latency
/// past the end of the tenant's curve: see [`LatencyModel::flat_from_c1`] and
/// [`LatencyModel::flat_from_c2`]): the samples of the grid at or past `flat` would all
/// repeat the first of them, so only that one and `max` are kept. The same function as
/// [`normalised_curve`] gives, from a fraction of the evaluations.
pub fn normalised_curve_flat(
    mut f: impl FnMut(u64) -> f64,
    max: u64,
    points: u64,
    flat: u64,
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
        if x >= flat {
            pairs.push((max, r));
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
            writes: None,
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

    proptest::proptest! {
        /// Sampling only up to where the latency goes flat gives the very function (and so
        /// the very allocation) that sampling the whole grid gives.
        #[test]
        fn the_flat_shortcut_changes_nothing(
            pts in proptest::collection::vec((1u64..400, 0.0f64..1.0), 1..12),
            c1 in 0u64..3000,
            n in 1u64..4,
            cap in 1u64..5000,
            inclusive in proptest::bool::ANY,
            others in proptest::collection::vec((1u64..400, 0.0f64..1.0, 1u64..3000), 1..4),
        ) {
            let curve_of = |pts: &[(u64, f64)]| {
                let mut x = 0;
                let mut pairs = vec![(0u64, 1.0f64)];
                for &(dx, m) in pts {
                    x += dx;
                    pairs.push((x, m));
                }
                HitRatioCurve::from_pairs(pairs).unwrap()
            };
            let levels = if inclusive { Levels::Inclusive } else { Levels::Exclusive };
            let m = LatencyModel {
                curve: lachesis_alloc::monotone_envelope(&curve_of(&pts)),
                service: ServiceTimes { l1_hit_ms: 0.1, l2_hit_ms: 1.0, miss_ms: 10.0 },
                levels,
                writes: None,
            };
            let lat2 = |v: u64| m.latency(c1 as f64, (n * v) as f64);
            let (full, b1) = normalised_curve(lat2, cap, 256);
            let (short, b2) = normalised_curve_flat(lat2, cap, 256, m.flat_from_c2(c1, n));
            proptest::prop_assert_eq!(b1, b2);
            for x in 0..=cap {
                proptest::prop_assert_eq!(full.miss_ratio(x as f64), short.miss_ratio(x as f64));
            }
            let lat1 = |c: u64| m.latency(c as f64, 100.0);
            let (full1, _) = normalised_curve(lat1, cap, 256);
            let (short1, _) = normalised_curve_flat(lat1, cap, 256, m.flat_from_c1());
            for x in 0..=cap {
                proptest::prop_assert_eq!(full1.miss_ratio(x as f64), short1.miss_ratio(x as f64));
            }
            // The optimiser, given either form among other tenants, decides the same.
            let items = |first: &HitRatioCurve| {
                let mut v = vec![crate::allocate::Item { curve: first.clone(), weight: b1, min: 0 }];
                for (k, &(dx, mr, w)) in others.iter().enumerate() {
                    v.push(crate::allocate::Item {
                        curve: curve_of(&[(dx * (k as u64 + 1), mr)]),
                        weight: w as f64 / 100.0,
                        min: 0,
                    });
                }
                v
            };
            proptest::prop_assert_eq!(
                crate::allocate::optimise(cap, &items(&full)),
                crate::allocate::optimise(cap, &items(&short))
            );
        }
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
            levels: None,
        };
        let m = model(Levels::Exclusive);
        assert_eq!(latency_target(&t, &m, 1.0, None, None, 1.0), Some(4.0));
        t.depth = None;
        assert_eq!(latency_target(&t, &m, 1.0, None, None, 1.0), None);
        // 2,000 requests in 1 s at 2 ms each: 4 in flight.
        let got = latency_target(&t, &m, 1.0, Some((2000, 0, 2.0)), None, 1.0).unwrap();
        assert!((got - 4.0).abs() < 1e-9);
        t.slo = Some(Slo::Mbps(8.192));
        // 8.192 MB/s of 8 KiB requests is 1,000 IOPS.
        let got = latency_target(&t, &m, 1.0, Some((2000, 2000 * 8192, 2.0)), None, 1.0).unwrap();
        assert!((got - 4.0).abs() < 1e-9);
        t.slo = Some(Slo::Degradation(0.05));
        let got = latency_target(&t, &m, 2.0, None, None, 1.0).unwrap();
        assert!((got - 2.1).abs() < 1e-12);
    }

    #[test]
    fn a_tail_slo_is_the_mean_at_the_hit_ratio_it_needs() {
        let m = model(Levels::Exclusive);
        // Every miss (10 ms) overruns 5 ms: p99 needs a miss ratio of at most 1 %, so a
        // hit ratio of 0.99: 0.1·0.99 + 10·0.01 = 0.199 ms.
        let t = tail_target(&m, 0.99, 5.0, None);
        assert!((t - 0.199).abs() < 1e-9, "{t}");
        // Half the misses finish within 5 ms (their median is 4 ms, their p90 8 ms): 2 %
        // of requests may miss.
        let misses = Quantiles {
            p50: 4.0,
            p90: 8.0,
            p95: 9.0,
            p99: 12.0,
            p999: 20.0,
        };
        assert_eq!(misses.share_above(5.0), 0.5);
        let t = tail_target(&m, 0.99, 5.0, Some(&misses));
        assert!((t - (0.1 * 0.98 + 10.0 * 0.02)).abs() < 1e-9, "{t}");
        // Sizes whose modelled mean is within the target have at least that hit ratio:
        // with this curve (hit ratio c/100), level 1 at 98 blocks, or 20 + 78 over both.
        assert!(m.latency(98.0, 0.0) <= t + 1e-12);
        assert!(m.latency(20.0, 78.0) > t);
        assert!(m.latency(97.0, 0.0) > t);
        // Misses that all finish within the bound leave any size enough.
        let quick = Quantiles {
            p999: 4.0,
            ..misses
        };
        assert!((quick.share_above(5.0) - 0.001).abs() < 1e-12);
        assert_eq!(
            tail_target(&m, 0.999, 5.0, Some(&quick)),
            m.latency_at((0.0, 0.0))
        );
    }

    proptest::proptest! {
        /// Whatever the curve, service times and bound: any sizes whose modelled mean is
        /// within the tail target reach the hit ratio the tail SLO needs.
        #[test]
        fn within_the_tail_target_means_enough_hits(
            a in 0.01f64..1.0, b in 1.0f64..9.0, d in 9.0f64..50.0,
            q in proptest::sample::select(vec![0.95, 0.99, 0.999]),
            c1 in 0.0f64..120.0, c2 in 0.0f64..120.0,
            p50 in 0.0f64..10.0, inclusive in proptest::bool::ANY,
        ) {
            let m = LatencyModel {
                curve: HitRatioCurve::from_pairs([(0, 1.0), (100, 0.0)]).unwrap(),
                service: ServiceTimes { l1_hit_ms: a, l2_hit_ms: b, miss_ms: d },
                levels: if inclusive { Levels::Inclusive } else { Levels::Exclusive },
                writes: None,
            };
            let misses = Quantiles { p50, p90: p50 * 2.0, p95: p50 * 3.0, p99: p50 * 4.0, p999: p50 * 5.0 };
            let ms = 6.0;
            let target = tail_target(&m, q, ms, Some(&misses));
            if m.latency(c1, c2) <= target {
                let (h1, h12) = m.hit_ratios(c1, c2);
                if b > ms {
                    proptest::prop_assert!(h1 >= q - 1e-9, "h1 {h1} q {q}");
                } else {
                    let needed = 1.0 - ((1.0 - q) / misses.share_above(ms)).min(1.0);
                    proptest::prop_assert!(h12 >= needed - 1e-9, "h {h12} needed {needed}");
                }
            }
        }
    }
}
