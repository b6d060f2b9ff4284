//! A curve-method benchmark on keys in memory (the `bench_mrc` example): speed, accuracy
//! and memory of every method on a seeded synthetic trace.
//!
//! The trace is generated once into memory as object keys (a Zipf(0.9) tenant over
//! `requests / 10` objects mixed 3:1 with a cyclic loop over `requests / 200` objects,
//! from `trace::synth`), so the timings are of the methods alone: one `access` call per
//! key (`access_all` over the slice for the exact method, which runs its table lookups
//! ahead), then the curve at 100 sizes up to the footprint. Accuracy is the mean absolute
//! error against the exact curve at those sizes. Memory is the structures' own count
//! ([`mrc::exact::ExactStack::memory_bytes`] etc.) after a quarter of the trace and after
//! all of it: fixed-size SHARDS must not grow, the exact method grows with the footprint.
//! [`minisim_report`] separately checks miniSim against full simulation of policies.

use mrc::exact::ExactStack;
use mrc::minisim::MiniSim;
use mrc::shards::{ShardsFixedRate, ShardsFixedSize};
use mrc::{mean_absolute_error, spread_sizes, HitRatioCurve, MrcError};
use serde::Serialize;
use std::fmt;
use std::time::Instant;

/// One method's figures.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    /// Method name and parameter.
    pub method: String,
    /// Seconds for all accesses and the curve.
    pub seconds: f64,
    /// Accesses per second.
    pub requests_per_sec: f64,
    /// Mean absolute error against the exact curve (0 for the exact method).
    pub mae: f64,
    /// Bytes the structures hold at the end.
    pub memory_bytes: usize,
}

/// Structure sizes after a prefix of the trace.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryAt {
    /// Requests fed.
    pub requests: u64,
    /// Fixed-size SHARDS: keys in the sample.
    pub sampled_keys: usize,
    /// Fixed-size SHARDS: priority-queue capacity.
    pub heap_capacity: usize,
    /// Fixed-size SHARDS: Fenwick tree leaves.
    pub time_axis: usize,
    /// Fixed-size SHARDS: histogram buckets.
    pub histogram_buckets: usize,
    /// Fixed-size SHARDS: bytes in all.
    pub shards_size_bytes: usize,
    /// Fixed-rate SHARDS (the first rate): bytes.
    pub shards_rate_bytes: usize,
    /// Exact: bytes.
    pub exact_bytes: usize,
    /// Exact: distinct keys.
    pub exact_keys: u64,
}

/// What [`bench_report`] measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The `trace::synth` spec of the trace.
    pub workload: String,
    /// Requests (one access each: object mode).
    pub requests: u64,
    /// Distinct keys.
    pub unique_keys: u64,
    /// Sizes the curves were compared at.
    pub sizes: usize,
    /// Per method, exact first.
    pub methods: Vec<MethodResult>,
    /// Structure sizes after a quarter of the trace and after all of it.
    pub memory: Vec<MemoryAt>,
}

/// `s_max` of the fixed-size method in the benchmark.
pub const BENCH_S_MAX: usize = 8192;
/// Rates of the fixed-rate method in the benchmark.
pub const BENCH_RATES: [f64; 2] = [0.01, 0.001];

/// The benchmark workload spec for `requests` requests and `seed`.
pub fn bench_workload(requests: u64, seed: u64) -> String {
    let requests = requests.max(4);
    let zipf = requests * 3 / 4;
    let looped = requests - zipf;
    format!(
        "mix(zipf:alpha=0.9,objects={},requests={zipf},seed={seed}@3;loop:objects={},requests={looped}@1)",
        (requests / 10).max(100),
        (requests / 200).max(10),
    )
}

/// The benchmark trace's object keys.
pub fn bench_keys(requests: u64, seed: u64) -> Result<Vec<u64>, MrcError> {
    let w = trace::synth::parse(&bench_workload(requests, seed))?;
    Ok(w.iter().map(|r| r.object_key()).collect())
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed().as_secs_f64())
}

/// Generates the trace (`requests` requests, `seed`) and measures exact, fixed-rate and
/// fixed-size SHARDS: speed, error, memory at two trace lengths. Single thread.
pub fn bench_report(requests: u64, seed: u64) -> Result<BenchReport, MrcError> {
    let keys = bench_keys(requests, seed)?;
    Ok(bench_keys_report(&keys, bench_workload(requests, seed)))
}

/// [`bench_report`] on given keys (`workload` only labels the report).
pub fn bench_keys_report(keys: &[u64], workload: String) -> BenchReport {
    let n = keys.len() as u64;
    let ((exact, e, sizes), secs) = timed(|| {
        let mut s = ExactStack::new();
        s.access_all(keys);
        let sizes = spread_sizes(100, s.unique());
        let c = s.histogram.curve(&sizes);
        (s, c, sizes)
    });
    let unique = exact.unique();
    let per_sec = |secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let mut methods = vec![MethodResult {
        method: "exact".into(),
        seconds: secs,
        requests_per_sec: per_sec(secs),
        mae: 0.0,
        memory_bytes: exact.memory_bytes(),
    }];
    drop(exact);
    let mae = |c: &HitRatioCurve| mean_absolute_error(&e, c, &sizes);
    for rate in BENCH_RATES {
        let ((c, mem), secs) = timed(|| {
            let mut s = ShardsFixedRate::new(rate);
            for &k in keys {
                s.access(k);
            }
            (s.histogram().curve(&sizes), s.memory_bytes())
        });
        methods.push(MethodResult {
            method: format!("shards rate {rate}"),
            seconds: secs,
            requests_per_sec: per_sec(secs),
            mae: mae(&c),
            memory_bytes: mem,
        });
    }
    let ((c, mem), secs) = timed(|| {
        let mut s = ShardsFixedSize::new(BENCH_S_MAX);
        for &k in keys {
            s.access(k);
        }
        (s.histogram().curve(&sizes), s.memory_bytes())
    });
    methods.push(MethodResult {
        method: format!("shards s_max {BENCH_S_MAX}"),
        seconds: secs,
        requests_per_sec: per_sec(secs),
        mae: mae(&c),
        memory_bytes: mem,
    });
    let memory = [keys.len() / 4, keys.len()]
        .into_iter()
        .map(|len| memory_at(&keys[..len]))
        .collect();
    BenchReport {
        workload,
        requests: n,
        unique_keys: unique,
        sizes: sizes.len(),
        methods,
        memory,
    }
}

fn memory_at(keys: &[u64]) -> MemoryAt {
    let mut fs = ShardsFixedSize::new(BENCH_S_MAX);
    let mut fr = ShardsFixedRate::new(BENCH_RATES[0]);
    let mut ex = ExactStack::new();
    for &k in keys {
        fs.access(k);
        fr.access(k);
        ex.access(k);
    }
    let (sampled_keys, heap_capacity, time_axis, histogram_buckets) = fs.structure_sizes();
    MemoryAt {
        requests: keys.len() as u64,
        sampled_keys,
        heap_capacity,
        time_axis,
        histogram_buckets,
        shards_size_bytes: fs.memory_bytes(),
        shards_rate_bytes: fr.memory_bytes(),
        exact_bytes: ex.memory_bytes(),
        exact_keys: ex.unique(),
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "trace: {} requests, {} distinct keys, object mode, 1 thread\n  {}",
            self.requests, self.unique_keys, self.workload
        )?;
        writeln!(
            f,
            "{:<20} {:>10} {:>9} {:>10} {:>12}",
            "method", "M req/s", "seconds", "MAE", "memory KiB"
        )?;
        for m in &self.methods {
            writeln!(
                f,
                "{:<20} {:>10.1} {:>9.3} {:>10.4} {:>12}",
                m.method,
                m.requests_per_sec / 1e6,
                m.seconds,
                m.mae,
                m.memory_bytes / 1024
            )?;
        }
        writeln!(f, "(MAE against the exact curve at {} sizes)", self.sizes)?;
        for m in &self.memory {
            writeln!(
                f,
                "after {:>10} requests: s_max {BENCH_S_MAX}: {} keys, heap {}, time axis {}, {} buckets, {} KiB | rate {}: {} KiB | exact: {} keys, {} KiB",
                m.requests,
                m.sampled_keys,
                m.heap_capacity,
                m.time_axis,
                m.histogram_buckets,
                m.shards_size_bytes / 1024,
                BENCH_RATES[0],
                m.shards_rate_bytes / 1024,
                m.exact_keys,
                m.exact_bytes / 1024
            )?;
        }
        Ok(())
    }
}

/// miniSim against full simulation for one policy.
#[derive(Clone, Debug, Serialize)]
pub struct MiniSimResult {
    /// Policy spec.
    pub policy: String,
    /// Sampling rate.
    pub rate: f64,
    /// `(size, miniSim miss ratio, full-simulation miss ratio)`.
    pub points: Vec<(u64, f64, f64)>,
    /// Mean absolute error over the points.
    pub mae: f64,
    /// Seconds of the miniSim pass (all sizes at once).
    pub minisim_seconds: f64,
    /// Seconds of the full simulations (one per size).
    pub full_seconds: f64,
}

/// miniSim at `rate` against full simulation at 10 sizes up to half the footprint, for
/// each policy spec in `specs`, on `keys`. An unknown spec is an error.
pub fn minisim_report(
    keys: &[u64],
    specs: &[&str],
    rate: f64,
) -> Result<Vec<MiniSimResult>, MrcError> {
    let unique = {
        let mut s = ExactStack::new();
        keys.iter().for_each(|&k| {
            s.distance(k);
        });
        s.unique()
    };
    let sizes = spread_sizes(10, (unique / 2).max(1));
    specs
        .iter()
        .map(|&spec| {
            let bad = |e: policy::PolicyError| MrcError::BadParameter(e.to_string());
            let (m, minisim_seconds) = timed(|| -> Result<_, MrcError> {
                let mut m = MiniSim::new(spec, rate, &sizes).map_err(bad)?;
                keys.iter().for_each(|&k| m.access(k));
                Ok(m.miss_ratios())
            });
            let m = m?;
            let (full, full_seconds) = timed(|| -> Result<Vec<f64>, MrcError> {
                sizes
                    .iter()
                    .map(|&s| {
                        let mut c =
                            policy::BlockCache::new(s as usize, policy::build(spec).map_err(bad)?);
                        let misses = keys
                            .iter()
                            .filter(|&&k| !c.access(k, |_, _| {}).is_hit())
                            .count();
                        Ok(misses as f64 / keys.len().max(1) as f64)
                    })
                    .collect()
            });
            let full = full?;
            let points: Vec<(u64, f64, f64)> =
                m.iter().zip(&full).map(|(&(s, a), &b)| (s, a, b)).collect();
            let mae =
                points.iter().map(|p| (p.1 - p.2).abs()).sum::<f64>() / points.len().max(1) as f64;
            Ok(MiniSimResult {
                policy: spec.into(),
                rate,
                points,
                mae,
                minisim_seconds,
                full_seconds,
            })
        })
        .collect()
}
