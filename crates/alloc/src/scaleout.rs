//! Scaled-out cache (Moirai §3.5): one tenant's cache of `a` blocks spread over a host
//! cache and a storage-server cache that act as one global LRU through demotion; choose
//! the split `alpha` (host part `alpha·a`, storage part `(1 − alpha)·a`).
//!
//! Derivation (the paper's equations are not reproduced here, so they are derived). The
//! two caches are *exclusive* and ordered: the host holds the `alpha·a` most recently used
//! blocks of the tenant's global LRU stack, the storage cache the next `(1 − alpha)·a`.
//! That is what demotion maintains: a block evicted from the host is inserted at the
//! storage cache's MRU end; a storage hit moves the block up to the host (and out of the
//! storage cache); a miss in both is read from disk into the host. By the inclusion
//! property of LRU, a request whose stack distance is `d` hits the host iff `d <= alpha·a`,
//! hits the storage cache iff `alpha·a < d <= a`, and goes to disk otherwise. With `H(x)`
//! the tenant's hit ratio at `x` blocks (the fraction of requests with `d <= x`):
//! ```text
//! host hit ratio      h_host    = H(alpha·a)
//! storage hit ratio   h_storage = H(a) − H(alpha·a)
//! disk ratio                      1 − H(a)
//! latency L(a, alpha) = H(alpha·a)·lat_host + (H(a) − H(alpha·a))·lat_storage_cache
//!                       + (1 − H(a))·lat_disk
//!                     = lat_disk − H(a)·(lat_disk − lat_sc) − H(alpha·a)·(lat_sc − lat_host)
//! ```
//! So for a fixed total, latency falls as `alpha` grows whenever the host is faster than
//! the storage cache (`lat_host < lat_sc`): the host part should be as large as its cap
//! allows, the storage part takes the rest; and the total should be as large as the two
//! caps allow. The search below does not rely on that closed form (it scans the host part
//! in whole steps over what the caps permit), so it stays right for odd inputs (a host
//! slower than the storage cache, curves with plateaus).

use crate::AllocError;
use mrc::HitRatioCurve;

/// Latencies and caps of a scale-out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaleOutParams {
    /// Latency of a host-cache hit.
    pub lat_host: f64,
    /// Latency of a storage-cache hit.
    pub lat_storage_cache: f64,
    /// Latency of a disk access.
    pub lat_disk: f64,
    /// Most blocks the host part may hold.
    pub host_cap: Option<u64>,
    /// Most blocks the storage part may hold.
    pub storage_cap: Option<u64>,
}

/// A chosen split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaleOut {
    /// Total blocks `a` actually used (may be below the request if the caps bind).
    pub total: u64,
    /// Host part in blocks.
    pub host: u64,
    /// Storage part in blocks.
    pub storage: u64,
    /// `host / total` (1 for an empty cache).
    pub alpha: f64,
    /// Hit ratio at the host, `H(host)`.
    pub host_hit: f64,
    /// Hit ratio at the storage cache, `H(total) − H(host)`.
    pub storage_hit: f64,
    /// Predicted mean latency.
    pub latency: f64,
}

/// Latency of a split with `host` blocks at the host and `total` in all.
pub fn latency(curve: &HitRatioCurve, p: &ScaleOutParams, total: u64, host: u64) -> f64 {
    let (ha, hh) = (curve.hit_ratio(total as f64), curve.hit_ratio(host as f64));
    hh * p.lat_host + (ha - hh) * p.lat_storage_cache + (1.0 - ha) * p.lat_disk
}

/// The best split of at most `total` blocks (from the utility or SLO allocation), scanning
/// the host part in steps of `step` blocks.
pub fn best_split(
    curve: &HitRatioCurve,
    p: &ScaleOutParams,
    total: u64,
    step: u64,
) -> Result<ScaleOut, AllocError> {
    if step == 0 {
        return Err(AllocError::ZeroStep);
    }
    let lats = [p.lat_host, p.lat_storage_cache, p.lat_disk];
    if lats.iter().any(|l| !l.is_finite() || *l < 0.0) {
        return Err(AllocError::BadInput(format!(
            "scale-out latencies must be finite and >= 0: {lats:?}"
        )));
    }
    let hcap = p.host_cap.unwrap_or(u64::MAX);
    let scap = p.storage_cap.unwrap_or(u64::MAX);
    let total = total.min(hcap.saturating_add(scap));
    let lo = total.saturating_sub(scap); // host must take what storage cannot
    let hi = total.min(hcap);
    let mut best: Option<(f64, u64)> = None;
    let mut h = lo;
    loop {
        let l = latency(curve, p, total, h);
        if best.is_none_or(|(b, _)| l < b - 1e-15) {
            best = Some((l, h));
        }
        if h >= hi {
            break;
        }
        h = (h + step).min(hi);
    }
    let (lat, host) = best.expect("at least one split scanned");
    let (ha, hh) = (curve.hit_ratio(total as f64), curve.hit_ratio(host as f64));
    Ok(ScaleOut {
        total,
        host,
        storage: total - host,
        alpha: if total == 0 {
            1.0
        } else {
            host as f64 / total as f64
        },
        host_hit: hh,
        storage_hit: ha - hh,
        latency: lat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> HitRatioCurve {
        HitRatioCurve::from_pairs([(0, 1.0), (100, 0.5), (400, 0.2)]).unwrap()
    }
    fn params(host_cap: Option<u64>, storage_cap: Option<u64>) -> ScaleOutParams {
        ScaleOutParams {
            lat_host: 0.1,
            lat_storage_cache: 1.0,
            lat_disk: 10.0,
            host_cap,
            storage_cap,
        }
    }

    #[test]
    fn host_as_large_as_its_cap_allows() {
        let s = best_split(&curve(), &params(Some(100), None), 300, 10).unwrap();
        assert_eq!((s.total, s.host, s.storage), (300, 100, 200));
        assert!((s.alpha - 1.0 / 3.0).abs() < 1e-12);
        // H(100) = 0.5, H(300) = 0.7: 0.05 + 0.2 + 3.0
        assert!((s.host_hit - 0.5).abs() < 1e-12 && (s.storage_hit - 0.2).abs() < 1e-12);
        assert!((s.latency - 3.25).abs() < 1e-12);
        let free = best_split(&curve(), &params(None, None), 300, 10).unwrap();
        assert_eq!((free.host, free.storage), (300, 0));
    }

    #[test]
    fn caps_bound_the_total_and_force_the_host_part() {
        let s = best_split(&curve(), &params(Some(50), Some(100)), 300, 10).unwrap();
        assert_eq!((s.total, s.host, s.storage), (150, 50, 100));
        // A host slower than the storage cache: keep as little at the host as allowed.
        let slow = ScaleOutParams {
            lat_host: 2.0,
            ..params(None, Some(200))
        };
        let s = best_split(&curve(), &slow, 300, 10).unwrap();
        assert_eq!((s.host, s.storage), (100, 200));
        assert!(best_split(&curve(), &params(None, None), 10, 0).is_err());
    }
}
