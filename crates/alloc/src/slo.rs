//! SLO minimums (Moirai §3.2): turn each tenant's performance target into the hit ratio it
//! needs, then into the smallest cache size whose curve reaches it, then decide which
//! minimums the capacity can honour.
//!
//! Model: a request is served at the cache's rate with probability `hit` and at the
//! storage's otherwise, and the tenant's metric is linear in the hit ratio,
//! `metric(hit) = hit * cache + (1 - hit) * storage` — Moirai's bandwidth model, and the
//! same form for latency (mean latency) and IOPS. So for every kind
//! `hit >= (target - storage) / (cache - storage)`:
//! * bandwidth: `Hit >= (SLA - BW_storage) / (BW_mem - BW_storage)`, needs `cache > storage`;
//! * IOPS: the same with IOPS figures;
//! * latency: `hit >= (lat_storage - target) / (lat_storage - lat_mem)`, needs
//!   `cache < storage`.
//!
//! A required hit ratio `<= 0` needs no cache; `> 1` cannot be met by any cache. The size is
//! the smallest whole number of blocks where the interpolated curve reaches the ratio
//! (binary search; the curve is monotone by then), rounded up to whole steps.
//!
//! Outcomes per tenant ([`SloStatus`]): `Reserved` (its minimum is honoured), `Unreachable`
//! (even the whole curve falls short: reported with the best size — the smallest size with
//! the curve's best hit ratio — and the shortfall in hit ratio; nothing is reserved for it,
//! so a lost cause does not take space from SLOs that can be met; it still competes in the
//! utility stage), `NotAdmitted` (reachable, but the reachable minimums do not fit
//! together). Admission order when they do not fit: higher weight first, then the smallest
//! need first (within a weight class this maximises the number of SLOs met), then input
//! order. Later tenants whose need still fits are admitted (first fit).

use crate::{AllocError, Slo, SloKind};
use mrc::HitRatioCurve;

/// The hit ratio `slo` needs (may be `<= 0`: none, or `> 1`: impossible).
pub fn required_hit_ratio(slo: &Slo) -> f64 {
    (slo.target - slo.storage) / (slo.cache - slo.storage)
}

/// The tenant's metric at hit ratio `hit` under the linear model.
pub fn metric_at(slo: &Slo, hit: f64) -> f64 {
    hit * slo.cache + (1.0 - hit) * slo.storage
}

/// Whether `value` of the metric meets the target (latency: at most; others: at least).
pub fn meets(slo: &Slo, value: f64) -> bool {
    let tol = 1e-9 * slo.target.abs().max(1.0);
    match slo.kind {
        SloKind::Latency => value <= slo.target + tol,
        SloKind::Bandwidth | SloKind::Iops => value >= slo.target - tol,
    }
}

/// An SLO whose numbers make no sense ([`check`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SloError {
    /// A number that is not finite and positive.
    #[error("target {target}, cache {cache} and storage {storage} must be finite and positive")]
    NotPositive {
        /// The target.
        target: f64,
        /// The cache's figure.
        cache: f64,
        /// The storage's figure.
        storage: f64,
    },
    /// A latency SLO whose cache is not faster than its storage.
    #[error("latency: cache latency {cache} must be below storage latency {storage}")]
    CacheNotFaster {
        /// The cache's latency.
        cache: f64,
        /// The storage's latency.
        storage: f64,
    },
    /// A bandwidth or IOPS SLO whose cache does not exceed its storage.
    #[error("{kind:?}: cache figure {cache} must exceed storage figure {storage}")]
    CacheNotAbove {
        /// Bandwidth or IOPS.
        kind: SloKind,
        /// The cache's figure.
        cache: f64,
        /// The storage's figure.
        storage: f64,
    },
}

/// Checks an SLO's numbers; the error says what is wrong.
pub fn check(slo: &Slo) -> Result<(), SloError> {
    let all = [slo.target, slo.cache, slo.storage];
    if all.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return Err(SloError::NotPositive {
            target: slo.target,
            cache: slo.cache,
            storage: slo.storage,
        });
    }
    match slo.kind {
        SloKind::Latency if slo.cache >= slo.storage => Err(SloError::CacheNotFaster {
            cache: slo.cache,
            storage: slo.storage,
        }),
        SloKind::Bandwidth | SloKind::Iops if slo.cache <= slo.storage => {
            Err(SloError::CacheNotAbove {
                kind: slo.kind,
                cache: slo.cache,
                storage: slo.storage,
            })
        }
        _ => Ok(()),
    }
}

/// The smallest size in blocks where `curve` reaches hit ratio `hit`, or `None` if it
/// never does. The curve must be monotone.
pub fn min_size_for_hit(curve: &HitRatioCurve, hit: f64) -> Option<u64> {
    if hit <= 0.0 {
        return Some(0);
    }
    let reaches = |s: u64| curve.hit_ratio(s as f64) >= hit - 1e-12;
    let (mut lo, mut hi) = (0u64, curve.max_size());
    if !reaches(hi) {
        return None;
    }
    // Invariant: reaches(hi); lo is below (or 0 untested).
    if reaches(0) {
        return Some(0);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reaches(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// What became of one tenant's SLO minimum.
#[derive(Clone, Debug, PartialEq)]
pub enum SloStatus {
    /// No SLO.
    None,
    /// The minimum (blocks, whole steps) is reserved.
    Reserved {
        /// Hit ratio needed.
        hit: f64,
        /// Blocks reserved.
        size: u64,
    },
    /// No size on the curve reaches the needed hit ratio.
    Unreachable {
        /// Hit ratio needed.
        hit: f64,
        /// The smallest size with the curve's best hit ratio.
        best_size: u64,
        /// Needed minus best hit ratio.
        shortfall: f64,
    },
    /// Reachable, but did not fit with the minimums admitted before it.
    NotAdmitted {
        /// Hit ratio needed.
        hit: f64,
        /// Blocks it needs.
        need: u64,
        /// Blocks that were left when its turn came.
        left: u64,
    },
}

impl SloStatus {
    /// Blocks reserved for the tenant (0 unless `Reserved`).
    pub fn reserved(&self) -> u64 {
        match self {
            SloStatus::Reserved { size, .. } => *size,
            _ => 0,
        }
    }

    /// A one-line explanation for the report, if there is something to explain.
    pub fn reason(&self) -> Option<String> {
        match self {
            SloStatus::None | SloStatus::Reserved { .. } => None,
            SloStatus::Unreachable { hit, best_size, shortfall } => Some(format!(
                "SLO unreachable: needs hit ratio {hit:.4}, the curve's best is {:.4} at {best_size} blocks (short by {shortfall:.4})",
                hit - shortfall
            )),
            SloStatus::NotAdmitted { hit, need, left } => Some(format!(
                "SLOs cannot all be met together: needs {need} blocks (hit ratio {hit:.4}), only {left} left after tenants admitted first"
            )),
        }
    }
}

/// One tenant as the SLO stage sees it.
#[derive(Clone, Debug)]
pub struct SloTenant<'a> {
    /// Its curve (monotone).
    pub curve: &'a HitRatioCurve,
    /// Its SLO, if any.
    pub slo: Option<&'a Slo>,
    /// Its weight (admission order).
    pub weight: f64,
    /// Blocks it already gets anyway (an explicit minimum); counted against capacity.
    pub floor: u64,
}

/// Decides every tenant's SLO minimum within `capacity` blocks (whole `step`s).
pub fn slo_minimums(
    tenants: &[SloTenant],
    capacity: u64,
    step: u64,
) -> Result<Vec<SloStatus>, AllocError> {
    if step == 0 {
        return Err(AllocError::ZeroStep);
    }
    let mut out = vec![SloStatus::None; tenants.len()];
    let mut need = Vec::new();
    for (i, t) in tenants.iter().enumerate() {
        let Some(slo) = t.slo else { continue };
        let hit = required_hit_ratio(slo);
        match min_size_for_hit(t.curve, hit) {
            Some(s) => need.push((i, hit, s.div_ceil(step) * step)),
            None => {
                let best = t.curve.hit_ratio(t.curve.max_size() as f64);
                let best_size = min_size_for_hit(t.curve, best).unwrap_or(t.curve.max_size());
                out[i] = SloStatus::Unreachable {
                    hit,
                    best_size,
                    shortfall: hit - best,
                };
            }
        }
    }
    let floors: u64 = tenants.iter().map(|t| t.floor).sum();
    let mut left = capacity.saturating_sub(floors);
    need.sort_by(|a, b| {
        tenants[b.0]
            .weight
            .total_cmp(&tenants[a.0].weight)
            .then(a.2.cmp(&b.2))
            .then(a.0.cmp(&b.0))
    });
    for (i, hit, size) in need {
        // The explicit floor already counts; only the excess takes capacity.
        let extra = size.saturating_sub(tenants[i].floor);
        if extra <= left {
            left -= extra;
            out[i] = SloStatus::Reserved { hit, size };
        } else {
            out[i] = SloStatus::NotAdmitted {
                hit,
                need: size,
                left,
            };
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(p: &[(u64, f64)]) -> HitRatioCurve {
        HitRatioCurve::from_pairs(p.iter().copied()).unwrap()
    }
    fn bw(target: f64) -> Slo {
        Slo {
            kind: SloKind::Bandwidth,
            target,
            cache: 1000.0,
            storage: 200.0,
        }
    }

    #[test]
    fn required_hit_ratio_for_each_kind() {
        // (600 - 200) / (1000 - 200) = 0.5
        assert!((required_hit_ratio(&bw(600.0)) - 0.5).abs() < 1e-12);
        let lat = Slo {
            kind: SloKind::Latency,
            target: 2.0,
            cache: 0.1,
            storage: 10.0,
        };
        // (10 - 2) / (10 - 0.1)
        assert!((required_hit_ratio(&lat) - 8.0 / 9.9).abs() < 1e-12);
        let h = required_hit_ratio(&lat);
        assert!((metric_at(&lat, h) - 2.0).abs() < 1e-12);
        assert!(meets(&lat, metric_at(&lat, h)));
        let iops = Slo {
            kind: SloKind::Iops,
            target: 100.0,
            cache: 50_000.0,
            storage: 150.0,
        };
        assert!(required_hit_ratio(&iops) < 0.0);
        assert!(check(&Slo {
            kind: SloKind::Latency,
            target: 1.0,
            cache: 5.0,
            storage: 2.0
        })
        .is_err());
        assert!(check(&Slo {
            kind: SloKind::Bandwidth,
            target: 1.0,
            cache: 5.0,
            storage: 5.0
        })
        .is_err());
    }

    #[test]
    fn smallest_size_by_binary_search() {
        let c = curve(&[(0, 1.0), (100, 0.5), (200, 0.4)]);
        assert_eq!(min_size_for_hit(&c, 0.25), Some(50));
        assert_eq!(min_size_for_hit(&c, 0.251), Some(51));
        assert_eq!(min_size_for_hit(&c, 0.6), Some(200));
        assert_eq!(min_size_for_hit(&c, 0.61), None);
        assert_eq!(min_size_for_hit(&c, 0.0), Some(0));
    }

    #[test]
    fn unreachable_and_not_admitted_are_reported() {
        let c = curve(&[(0, 1.0), (100, 0.5), (200, 0.4), (300, 0.4)]);
        let (s1, s2, s3) = (bw(600.0), bw(400.0), bw(900.0)); // hit 0.5, 0.25, 0.875
        let t = |slo| SloTenant {
            curve: &c,
            slo: Some(slo),
            weight: 1.0,
            floor: 0,
        };
        let ts = [
            t(&s1),
            t(&s2),
            t(&s3),
            SloTenant {
                slo: None,
                ..t(&s1)
            },
        ];
        let r = slo_minimums(&ts, 120, 10).unwrap();
        // Smallest need first: tenant 1 (50 blocks), then tenant 0 needs 100 > 70 left.
        assert_eq!(
            r[1],
            SloStatus::Reserved {
                hit: 0.25,
                size: 50
            }
        );
        assert_eq!(
            r[0],
            SloStatus::NotAdmitted {
                hit: 0.5,
                need: 100,
                left: 70
            }
        );
        match &r[2] {
            SloStatus::Unreachable {
                best_size,
                shortfall,
                ..
            } => {
                assert_eq!(*best_size, 200);
                assert!((shortfall - 0.275).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r[3], SloStatus::None);
        assert!(r[0].reason().unwrap().contains("cannot all be met"));
        // A heavier tenant goes first even if it needs more.
        let heavy = SloTenant {
            weight: 2.0,
            ..t(&s1)
        };
        let r = slo_minimums(&[t(&s2), heavy], 120, 10).unwrap();
        assert_eq!(r[1].reserved(), 100);
        assert_eq!(
            r[0],
            SloStatus::NotAdmitted {
                hit: 0.25,
                need: 50,
                left: 20
            }
        );
    }
}
