//! What the node observes of each tenant: one [`TenantObserver`] per tenant (the owner of
//! one or more exports), fed by the NBD face (`export`) with every request the tenant
//! sends, whatever cache (or none) its rules route it to. It holds together:
//!
//! * the tenant's one profiler of its block stream, with bounded memory: fixed-size SHARDS
//!   (`mrc::profiler::TENANT_SMAX` sampled keys, windows of `mrc::profiler::TENANT_WINDOW`
//!   accesses) for the LRU curve, and phantom caches (scaled-down simulation,
//!   `mrc::profiler::PhantomCaches`) of every other candidate policy at
//!   [`PHANTOM_FRACTIONS`] of the tenant's profiled range, sampled at
//!   `mrc::profiler::phantom_rates` (the smallest phantom holds about 128 keys where a
//!   rate of at most 1/16 allows). A cache's curve (`GET /v1/caches/{c}/curve`) is the
//!   curve of the tenant its rules serve, from this same profiler: a block is profiled once.
//! * the tenant's latency recorders, one per export and client ([`crate::latency`]), each
//!   fed once per request: histograms of reads and writes, exact sums of every request
//!   and of reads served from this node's memory (`hit`) or from below it (`miss`); and a
//!   histogram of the tenant's misses alone (two significant digits), fed only on misses,
//!   which tail-SLO sizing reads. The observations carry both histograms' recorded
//!   buckets, cumulative like every counter, so a controller takes an interval's
//!   percentiles from the difference of two answers.
//!
//! One window for every curve: 200,000 accesses, the simulator's (see
//! `mrc::profiler::TENANT_WINDOW`). A cache's curve once had a profiler of its own with
//! windows of 1,000,000 accesses; the window the control step reads is the one that
//! matters, and it must be the simulator's so that what is measured offline is what runs
//! online; about one enforcement interval of a busy tenant, it shows a phase change
//! within an interval or two.
//!
//! The profiled range of a tenant is its exports' blocks, capped at four times the node's
//! cache (and at least 64 blocks): curves cover sizes `0..=range`.
//!
//! Every counter is cumulative since the node started; the LRU curve is the windowed one
//! (the last one to two windows), the phantoms' curves cover everything since start.
//! `ControlPlane::observations` turns the observers into the contract's answer
//! (`api::node::NodeObservations`).

use crate::latency::{Latency, LatencyClass, Sums, MAX_MICROS};
use api::node::{LatencyView, PolicyPoints, ServedView};
use hdrhistogram::Histogram;
use mrc::profiler::{OnlineProfiler, PhantomCaches};
use mrc::HitRatioCurve;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The phantom caches' sizes as fractions of the profiled range.
pub const PHANTOM_FRACTIONS: [f64; 8] = [0.0625, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0];
/// Points of the LRU curve (besides size 0).
pub const LRU_POINTS: u64 = 32;
/// The candidate policies profiled besides LRU by default (the `control` crate's default
/// candidates).
pub const DEFAULT_PHANTOM_POLICIES: [&str; 3] = ["arc", "lirs", "s3fifo"];

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A phantom policy the observer cannot build.
#[derive(Debug, thiserror::Error)]
#[error("policy `{policy}`: {source}")]
pub struct PhantomError {
    /// The policy spec.
    pub policy: String,
    /// Why.
    #[source]
    pub source: mrc::MrcError,
}

struct Profile {
    lru: OnlineProfiler,
    phantoms: Vec<(String, PhantomCaches)>,
}

/// One tenant's profiler, latency recorders and misses' histogram.
pub struct TenantObserver {
    range_blocks: u64,
    profile: Mutex<Profile>,
    recorders: Mutex<BTreeMap<(String, String), Arc<Latency>>>,
    miss_histogram: Mutex<Histogram<u64>>,
}

impl TenantObserver {
    /// An observer profiling `range_blocks` blocks, with phantoms of `policies` (each a
    /// `policy` crate spec; `lru` is skipped, SHARDS gives it). An unknown policy is an
    /// error naming it.
    pub fn new(range_blocks: u64, policies: &[String]) -> Result<Self, PhantomError> {
        let range_blocks = range_blocks.max(64);
        let sizes: Vec<u64> = PHANTOM_FRACTIONS
            .iter()
            .map(|f| ((range_blocks as f64 * f).round() as u64).max(1))
            .collect();
        let mut phantoms = Vec::new();
        for p in policies {
            if p == "lru" || phantoms.iter().any(|(n, _)| n == p) {
                continue;
            }
            let ph = PhantomCaches::for_sizes(p, &sizes).map_err(|source| PhantomError {
                policy: p.clone(),
                source,
            })?;
            phantoms.push((p.clone(), ph));
        }
        Ok(TenantObserver {
            range_blocks,
            profile: Mutex::new(Profile {
                lru: OnlineProfiler::tenant(),
                phantoms,
            }),
            recorders: Mutex::default(),
            miss_histogram: Mutex::new(shipped_histogram()),
        })
    }

    /// Records an access to each of `keys` (block keys unique on the node).
    pub fn access(&self, keys: impl Iterator<Item = u64>) {
        let mut p = lock(&self.profile);
        for k in keys {
            p.lru.record(k);
            for (_, ph) in p.phantoms.iter_mut() {
                ph.record(k);
            }
        }
    }

    /// The latency recorder of `export`'s `client` (made on first use).
    pub fn recorder(&self, export: &str, client: &str) -> Arc<Latency> {
        lock(&self.recorders)
            .entry((export.to_string(), client.to_string()))
            .or_default()
            .clone()
    }

    /// Every `(export, client)` with its recorder, in that order.
    pub fn recorders(&self) -> Vec<((String, String), Arc<Latency>)> {
        lock(&self.recorders)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Records one request that took `took` in `recorder` (one of this tenant's), and a
    /// miss also in the misses' histogram.
    pub fn record(&self, recorder: &Latency, write: bool, service: LatencyClass, took: Duration) {
        recorder.record(write, service, took);
        if service == LatencyClass::Miss {
            let us = (took.as_micros() as u64).clamp(1, MAX_MICROS);
            lock(&self.miss_histogram).saturating_record(us);
        }
    }

    /// Every request of the tenant (its recorders, all exports and clients) in one
    /// histogram.
    pub fn histogram(&self) -> Histogram<u64> {
        merged(&self.recorders())
    }

    /// The blocks the curves cover.
    pub fn range_blocks(&self) -> u64 {
        self.range_blocks
    }

    /// Block accesses profiled so far.
    pub fn accesses(&self) -> u64 {
        lock(&self.profile).lru.accesses()
    }

    /// The curves, sizes in bytes (`block_size` each block): LRU first, then each phantom
    /// policy; empty before the first access.
    pub fn curves(&self, block_size: u64) -> Vec<PolicyPoints> {
        let mut p = lock(&self.profile);
        if p.lru.accesses() == 0 {
            return Vec::new();
        }
        let sizes: Vec<u64> = (1..=LRU_POINTS)
            .map(|i| self.range_blocks * i / LRU_POINTS)
            .collect();
        let mut out = vec![PolicyPoints {
            policy: "lru".into(),
            points: bytes_of(p.lru.windowed_curve(&sizes).points(), block_size),
        }];
        for (name, ph) in &mut p.phantoms {
            out.push(PolicyPoints {
                policy: name.clone(),
                points: bytes_of(ph.curve().points(), block_size),
            });
        }
        out
    }

    /// The LRU curve at `sizes` blocks (`windowed`: the last one to two windows only);
    /// `None` before the first access.
    pub fn lru_curve(&self, sizes: &[u64], windowed: bool) -> Option<HitRatioCurve> {
        let mut p = lock(&self.profile);
        if p.lru.accesses() == 0 {
            return None;
        }
        Some(if windowed {
            p.lru.windowed_curve(sizes)
        } else {
            p.lru.curve(sizes)
        })
    }

    /// The latency now: means and the hit/miss split from the recorders' sums,
    /// percentiles from their histograms merged.
    pub fn latency_view(&self) -> (LatencyView, ServedView) {
        let recorders = self.recorders();
        let mut sums = Sums::default();
        for (_, l) in &recorders {
            sums.add(l.sums());
        }
        // A tenant with no request yet has nothing to merge: its view is its zero sums
        // (merging and scanning the recorders' histograms is the bulk of a node's answer
        // to a poll, and a node has many idle tenants).
        let (h, misses) = if sums.all.count == 0 {
            (None, Vec::new())
        } else {
            let all = merged(&recorders);
            let misses = lock(&self.miss_histogram);
            let miss_buckets = if misses.is_empty() {
                Vec::new()
            } else {
                buckets(&misses)
            };
            (Some(all), miss_buckets)
        };
        let q = |x: f64| match &h {
            Some(h) if !h.is_empty() => h.value_at_quantile(x) as f64 / 1e3,
            _ => 0.0,
        };
        (
            LatencyView {
                count: sums.all.count,
                failed: sums.failed,
                sum_ms: sums.all.sum_ms,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
                buckets: h.as_ref().map(buckets).unwrap_or_default(),
                miss_buckets: misses,
            },
            ServedView {
                hit: sums.hit,
                miss: sums.miss,
            },
        )
    }
}

/// The requests of `recorders` in one histogram.
fn merged(recorders: &[((String, String), Arc<Latency>)]) -> Histogram<u64> {
    let mut h = Latency::empty();
    for (_, l) in recorders {
        l.merge_into(&mut h);
    }
    h
}

/// A histogram of request latency in microseconds with two significant digits: a
/// percentile within 1 %, and at most a few hundred recorded buckets to ship per tenant.
fn shipped_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 2).expect("valid bounds")
}

/// The recorded buckets of `h` as `(highest microseconds of the bucket, count)`, ascending.
fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

fn bytes_of(points: &[mrc::CurvePoint], block_size: u64) -> Vec<(u64, f64)> {
    let mut v: Vec<(u64, f64)> = points
        .iter()
        .map(|p| (p.cache_size * block_size, p.miss_ratio.clamp(0.0, 1.0)))
        .collect();
    if v.first().is_none_or(|p| p.0 > 0) {
        v.insert(0, (0, 1.0));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies() -> Vec<String> {
        DEFAULT_PHANTOM_POLICIES
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn a_loop_that_fits_half_the_range() {
        let o = TenantObserver::new(4096, &policies()).unwrap();
        assert!(o.curves(4096).is_empty());
        for _ in 0..40 {
            o.access(0..2048u64);
        }
        let curves = o.curves(4096);
        let names: Vec<&str> = curves.iter().map(|c| c.policy.as_str()).collect();
        assert_eq!(names, ["lru", "arc", "lirs", "s3fifo"]);
        for c in &curves {
            assert_eq!(c.points[0], (0, 1.0), "{c:?}");
            assert_eq!(c.points.last().unwrap().0, 4096 * 4096, "{c:?}");
            assert!(c.points.windows(2).all(|w| w[0].0 < w[1].0), "{c:?}");
        }
        // LRU: a loop of 2,048 blocks misses below 2,048 blocks and hits above.
        let lru = &curves[0].points;
        let at = |blocks: u64| lru.iter().find(|p| p.0 == blocks * 4096).unwrap().1;
        assert!(at(1024) > 0.95, "{lru:?}");
        assert!(at(3072) < 0.05, "{lru:?}");
        assert!(TenantObserver::new(10, &["nope".to_string()])
            .err()
            .unwrap()
            .to_string()
            .contains("nope"));
    }

    #[test]
    fn latency_split_and_percentiles() {
        let o = TenantObserver::new(100, &[]).unwrap();
        let h = o.recorder("vol", "127.0.0.1");
        let timed = |service, took| o.record(&h, service == LatencyClass::Other, service, took);
        for _ in 0..90 {
            timed(LatencyClass::Hit, Duration::from_micros(100));
        }
        for _ in 0..10 {
            timed(LatencyClass::Miss, Duration::from_millis(5));
        }
        timed(LatencyClass::Other, Duration::from_millis(1));
        let (l, s) = o.latency_view();
        assert_eq!(l.count, 101);
        assert!((l.sum_ms - (9.0 + 50.0 + 1.0)).abs() < 1e-9, "{l:?}");
        assert!((l.p50_ms - 0.1).abs() < 0.001, "{l:?}");
        assert!((l.p99_ms - 5.0).abs() < 0.01, "{l:?}");
        assert_eq!(s.hit.count, 90);
        assert!((s.hit.sum_ms - 9.0).abs() < 1e-9);
        assert_eq!(s.miss.count, 10);
        assert!((s.miss.sum_ms - 50.0).abs() < 1e-9);
    }
}
