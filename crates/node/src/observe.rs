//! What the node observed of each tenant, for a controller: the `GET /v1/observations`
//! answer.
//!
//! Each tenant (the owner of one or more exports) has one [`TenantObserver`], fed by the
//! NBD face (`export`) with every request the tenant sends, whatever cache (or none) its
//! rules route it to:
//!
//! * a profiler of its block stream with bounded memory: fixed-size SHARDS
//!   ([`PROFILER_SMAX`] sampled keys, windows of [`PROFILER_WINDOW`] accesses) for the LRU
//!   curve, and phantom caches (scaled-down simulation, `mrc::profiler::PhantomCaches`) of
//!   every other candidate policy at [`PHANTOM_FRACTIONS`] of the tenant's profiled range,
//!   sampled at `mrc::profiler::phantom_rates` (the smallest phantom holds about 128
//!   keys where a rate of at most 1/16 allows);
//! * its request latency: exact sums for means, split into reads served wholly from this
//!   node's memory (`hit`) and reads that went below it (`miss`); the percentiles come
//!   from the tenant's latency histograms (`crate::latency`, one per export and client,
//!   merged when asked), so a request is timed into one histogram only, and a miss into
//!   one more of the tenant's misses (two significant digits). The answer carries both
//!   histograms' recorded buckets, cumulative like every counter, so a controller takes
//!   an interval's percentiles from the difference of two answers.
//!
//! The profiled range of a tenant is its exports' blocks, capped at four times the node's
//! cache (and at least 64 blocks): curves cover sizes `0..=range`.
//!
//! The answer's types ([`NodeObservations`] and the types in it) are the contract's, from
//! `api::node`; this module builds them from its observers, and is the one place that
//! does.
//!
//! Every counter is cumulative since the node started; the LRU curve is the windowed one
//! (the last one to two windows), the phantoms' curves cover everything since start. The
//! controller takes differences between polls and recognises a restart by the `epoch`.

use crate::latency::MAX_MICROS;
use crate::state::NodeState;
use api::node::{
    LatencyView, NodeObservations, PolicyPoints, Served, ServedView, TenantObservations,
};
use hdrhistogram::Histogram;
use mrc::profiler::{OnlineProfiler, PhantomCaches};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Sampled keys of each tenant's SHARDS profiler (bounded memory, about 100 KiB).
pub const PROFILER_SMAX: usize = 8192;
/// Accesses per window of the tenant's LRU curve (the curve covers the last one to two).
pub const PROFILER_WINDOW: u64 = 200_000;
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

struct Profile {
    lru: OnlineProfiler,
    phantoms: Vec<(String, PhantomCaches)>,
}

/// Count and total latency of a class of requests.
#[derive(Default)]
struct Sum {
    count: AtomicU64,
    nanos: AtomicU64,
}

impl Sum {
    fn add(&self, took: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }
    fn snapshot(&self) -> Served {
        Served {
            count: self.count.load(Ordering::Relaxed),
            sum_ms: self.nanos.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// One tenant's profiler and latency.
pub struct TenantObserver {
    range_blocks: u64,
    profile: Mutex<Profile>,
    miss_histogram: Mutex<Histogram<u64>>,
    all: Sum,
    hit: Sum,
    miss: Sum,
}

/// How a request was served, for the latency split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// A read whose every block was in this node's memory.
    Hit,
    /// A read with at least one block from below this node.
    Miss,
    /// Not a read (writes, flushes, trims): counted in the latency, not in the split.
    Other,
}

impl TenantObserver {
    /// An observer profiling `range_blocks` blocks, with phantoms of `policies` (each a
    /// `policy` crate spec; `lru` is skipped, SHARDS gives it). An unknown policy is an
    /// error naming it.
    pub fn new(range_blocks: u64, policies: &[String]) -> Result<Self, String> {
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
            let ph =
                PhantomCaches::for_sizes(p, &sizes).map_err(|e| format!("policy `{p}`: {e}"))?;
            phantoms.push((p.clone(), ph));
        }
        Ok(TenantObserver {
            range_blocks,
            profile: Mutex::new(Profile {
                lru: OnlineProfiler::new(PROFILER_SMAX, PROFILER_WINDOW),
                phantoms,
            }),
            miss_histogram: Mutex::new(shipped_histogram()),
            all: Sum::default(),
            hit: Sum::default(),
            miss: Sum::default(),
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

    /// Adds one request's latency to the sums, and a miss's to the misses' histogram (the
    /// request's own histogram is `crate::latency`'s).
    pub fn latency(&self, service: Service, took: Duration) {
        self.all.add(took);
        match service {
            Service::Hit => self.hit.add(took),
            Service::Miss => {
                let us = (took.as_micros() as u64).clamp(1, MAX_MICROS);
                lock(&self.miss_histogram).saturating_record(us);
                self.miss.add(took)
            }
            Service::Other => {}
        }
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

    /// The latency now, its percentiles from `h`, the tenant's requests' histogram
    /// ([`NodeState::tenant_histogram`]).
    pub fn latency_view(&self, h: &Histogram<u64>) -> (LatencyView, ServedView) {
        let all = self.all.snapshot();
        let q = |x: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(x) as f64 / 1e3
            }
        };
        (
            LatencyView {
                count: all.count,
                sum_ms: all.sum_ms,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
                buckets: buckets(h),
                miss_buckets: buckets(&lock(&self.miss_histogram)),
            },
            ServedView {
                hit: self.hit.snapshot(),
                miss: self.miss.snapshot(),
            },
        )
    }
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

/// Everything the node observed, cumulative since it started.
pub fn observations(s: &NodeState) -> NodeObservations {
    let bs = s.cache.block_size() as u64;
    let tenants = s
        .tenant_names()
        .into_iter()
        .map(|t| tenant(s, &t, bs))
        .collect();
    NodeObservations {
        version: api::API_VERSION,
        node: s.name.clone(),
        level: s.level,
        block_size: bs,
        cache_size: s.cache.total_blocks() as u64 * bs,
        uptime_ms: s.started.elapsed().as_millis() as u64,
        epoch: s.epoch.clone(),
        tenants,
    }
}

fn tenant(s: &NodeState, name: &str, bs: u64) -> TenantObservations {
    let counters = s.tenant_counters(name);
    let obs = s.observer(name);
    let (latency, served) = obs.latency_view(&s.tenant_histogram(name));
    let cache = s.cache_of_tenant(name).and_then(|id| s.cache(id).ok());
    TenantObservations {
        tenant: name.to_string(),
        size: cache.as_ref().map_or(0, |c| c.size_bytes),
        eviction: cache.as_ref().map(|c| c.stats.eviction.clone()),
        write_policy: cache.as_ref().map(|c| c.stats.write_policy.clone()),
        admission: cache.as_ref().map(|c| c.stats.admission.clone()),
        cache: cache.map(|c| c.name),
        requests: counters.reads + counters.writes,
        read_bytes: counters.read_bytes,
        write_bytes: counters.write_bytes,
        lookups: counters.hits + counters.misses,
        hits: counters.hits,
        latency,
        served,
        curves: obs.curves(bs),
        backend: backend_view(s, name),
    }
}

/// The tenant's use of the backend and its proportion.
fn backend_view(s: &NodeState, name: &str) -> api::bandwidth::BackendView {
    let b = s.bandwidth.tenant(name);
    api::bandwidth::BackendView {
        requests: b.requests,
        bytes: b.bytes,
        service_ms: b.service_ns as f64 / 1e6,
        queue_ms: b.queue_ns as f64 / 1e6,
        proportion: s.bandwidth.proportion(name),
    }
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
            .contains("nope"));
    }

    #[test]
    fn latency_split_and_percentiles() {
        let o = TenantObserver::new(100, &[]).unwrap();
        let h = crate::latency::Latency::default();
        let timed = |service, took| {
            o.latency(service, took);
            h.record(service == Service::Other, took);
        };
        for _ in 0..90 {
            timed(Service::Hit, Duration::from_micros(100));
        }
        for _ in 0..10 {
            timed(Service::Miss, Duration::from_millis(5));
        }
        timed(Service::Other, Duration::from_millis(1));
        let (l, s) = o.latency_view(&h.merged());
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
