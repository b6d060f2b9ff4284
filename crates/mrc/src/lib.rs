//! # mrc
//!
//! Hit-ratio curves (miss-ratio curves, MRCs): the curve type and its operations, and the
//! ways to build one — exact LRU stack distances ([`exact`]), SHARDS ([`shards`]), scaled-
//! down simulation for any policy ([`minisim`]) and the online per-tenant profiler
//! ([`profiler`]).
//!
//! Owns: measuring how a tenant's miss ratio falls with cache size. Does not own: choosing
//! sizes (that is `alloc`).
//!
//! [`build_curve_stream`] is the fast way in from a trace: it takes requests in batches
//! ([`trace::RequestStream`]) and runs each method over a batch in a tight, generic loop,
//! with the key mode and weighting chosen once per batch, the sampled-out SHARDS test
//! inlined (the sampled work is out of line) and unit weights counted as integers. Fed one
//! request at a time through a `dyn FnMut` per key, fixed-size SHARDS ran at 45–60 M
//! requests/s end to end from an oracleGeneral file; batched, 85–90 M.
//! [`build_curve`] and [`build_curve_weighted`] take any iterator (batched through `next`).

pub mod counter_stack;
pub mod curve;
pub mod distinct;
pub mod exact;
pub mod fenwick;
pub mod histogram;
pub mod keytable;
pub mod minisim;
pub mod profiler;
pub mod shards;

pub use curve::{CurveError, CurvePoint, HitRatioCurve, Weighting};

use serde::Serialize;
use std::time::Instant;
use trace::{KeyMode, Plain, Request, RequestStream, TraceError, BATCH};

/// How to build a curve.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// Exact LRU stack distances.
    Exact,
    /// SHARDS at a fixed rate, holding at least `min_keys` sampled keys while a higher
    /// rate can ([`shards::ShardsFixedRate::with_options`]; 0: the plain fixed rate).
    ShardsRate {
        /// Sampling rate in `(0, 1]`.
        rate: f64,
        /// Floor on the sample's keys ([`shards::MIN_SAMPLE`] by default).
        min_keys: usize,
    },
    /// SHARDS with at most this many sampled keys.
    ShardsSize(usize),
    /// Scaled-down simulation of a policy at a sampling rate.
    MiniSim {
        /// Policy spec (`policy` crate syntax).
        policy: String,
        /// Sampling rate.
        rate: f64,
    },
}

impl Method {
    /// Fixed-rate SHARDS at `rate` with the default floor of [`shards::MIN_SAMPLE`] keys.
    pub fn shards_rate(rate: f64) -> Self {
        Method::ShardsRate {
            rate,
            min_keys: shards::MIN_SAMPLE,
        }
    }

    /// Short name for reports: `exact`, `shards-rate`, `shards-size`, `minisim`.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::ShardsRate { .. } => "shards-rate",
            Method::ShardsSize(_) => "shards-size",
            Method::MiniSim { .. } => "minisim",
        }
    }

    /// The policy whose curve this method gives.
    pub fn policy(&self) -> String {
        match self {
            Method::MiniSim { policy, .. } => policy.clone(),
            _ => "lru".into(),
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), MrcError> {
        match self {
            Method::ShardsRate { rate: r, .. } | Method::MiniSim { rate: r, .. }
                if !(*r > 0.0 && *r <= 1.0) =>
            {
                Err(MrcError::BadParameter(format!(
                    "sampling rate {r} is not in (0, 1]"
                )))
            }
            Method::ShardsSize(0) => Err(MrcError::BadParameter("s_max must be at least 1".into())),
            Method::MiniSim { policy, .. } => policy::build(policy)
                .map(|_| ())
                .map_err(|e| MrcError::BadParameter(e.to_string())),
            _ => Ok(()),
        }
    }
}

/// Errors of curve building.
#[derive(Debug, thiserror::Error)]
pub enum MrcError {
    /// A parameter is out of range.
    #[error("{0}")]
    BadParameter(String),
    /// The trace has no read or write.
    #[error("the trace has no read or write request: no curve to build")]
    EmptyTrace,
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// A built curve and how it was built.
#[derive(Clone, Debug, Serialize)]
pub struct CurveReport {
    /// Method name.
    pub method: String,
    /// What the miss ratio counts.
    pub weighting: Weighting,
    /// Policy the curve is for.
    pub policy: String,
    /// Requests read.
    pub requests: u64,
    /// Cache lookups (requests in object mode, blocks in block mode).
    pub accesses: u64,
    /// Seconds spent building.
    pub seconds: f64,
    /// Bytes the method's structures held at the end.
    pub memory_bytes: usize,
    /// The curve at the requested sizes (plus size 0).
    pub points: Vec<CurvePoint>,
}

impl CurveReport {
    /// The points as a curve.
    pub fn curve(&self) -> HitRatioCurve {
        HitRatioCurve::new(self.points.clone())
            .expect("built curves are well formed")
            .with_weighting(self.weighting)
    }
}

/// Builds the request-weighted curve of `requests` under `mode` with `method` at `sizes`
/// (blocks).
pub fn build_curve<I>(
    method: &Method,
    mode: KeyMode,
    sizes: &[u64],
    requests: I,
) -> Result<CurveReport, MrcError>
where
    I: IntoIterator<Item = Result<Request, TraceError>>,
{
    build_curve_weighted(method, mode, Weighting::Requests, sizes, requests)
}

/// Builds the curve with each lookup weighted as `weighting` says.
pub fn build_curve_weighted<I>(
    method: &Method,
    mode: KeyMode,
    weighting: Weighting,
    sizes: &[u64],
    requests: I,
) -> Result<CurveReport, MrcError>
where
    I: IntoIterator<Item = Result<Request, TraceError>>,
{
    build_curve_stream(method, mode, weighting, sizes, Plain(requests.into_iter()))
}

/// [`build_curve_weighted`] reading `requests` in batches ([`RequestStream`]): what to
/// call with a trace reader ([`trace::open`], optionally [`RequestStream::limit`]ed or
/// wrapped in [`trace::SkipBad`]), whose oracle reader then decodes whole batches in one
/// tight loop and the curve method runs its own over them.
pub fn build_curve_stream<S: RequestStream>(
    method: &Method,
    mode: KeyMode,
    weighting: Weighting,
    sizes: &[u64],
    requests: S,
) -> Result<CurveReport, MrcError> {
    method.validate()?;
    let start = Instant::now();
    let mut fed = Fed::default();
    let (hist, minis, memory) = match method {
        Method::Exact => {
            // Buffered so the table lookups of a chunk can run ahead (`access_all`); the
            // weights are kept only when they are not all 1.
            let mut s = exact::ExactStack::new();
            let mut keys = Vec::with_capacity(CHUNK);
            if weighting == Weighting::Requests {
                feed(requests, mode, weighting, &mut fed, |k, _| {
                    keys.push(k);
                    if keys.len() == CHUNK {
                        s.access_all(&keys);
                        keys.clear();
                    }
                })?;
                s.access_all(&keys);
            } else {
                let mut weights = Vec::with_capacity(CHUNK);
                feed(requests, mode, weighting, &mut fed, |k, w| {
                    keys.push(k);
                    weights.push(w);
                    if keys.len() == CHUNK {
                        s.access_all_weighted(&keys, &weights);
                        keys.clear();
                        weights.clear();
                    }
                })?;
                s.access_all_weighted(&keys, &weights);
            }
            let m = s.memory_bytes();
            (Some(s.histogram), None, m)
        }
        // Request weighting calls the unit-weight `access`, which counts with an integer.
        Method::ShardsRate { rate, min_keys } => {
            let mut s = shards::ShardsFixedRate::with_options(*rate, *min_keys, shards::SALT);
            if weighting == Weighting::Requests {
                feed(requests, mode, weighting, &mut fed, |k, _| s.access(k))?;
            } else {
                feed(requests, mode, weighting, &mut fed, |k, w| {
                    s.access_weighted(k, w)
                })?;
            }
            (Some(s.histogram()), None, s.memory_bytes())
        }
        Method::ShardsSize(n) => {
            let mut s = shards::ShardsFixedSize::new(*n);
            if weighting == Weighting::Requests {
                feed(requests, mode, weighting, &mut fed, |k, _| {
                    s.access(k);
                })?;
            } else {
                feed(requests, mode, weighting, &mut fed, |k, w| {
                    s.access_weighted(k, w);
                })?;
            }
            (Some(s.histogram()), None, s.memory_bytes())
        }
        Method::MiniSim { policy, rate } => {
            let mut m = minisim::MiniSim::new(policy, *rate, sizes)
                .map_err(|e| MrcError::BadParameter(e.to_string()))?;
            feed(requests, mode, weighting, &mut fed, |k, w| {
                m.access_weighted(k, w)
            })?;
            (None, Some(m.miss_ratios()), 0)
        }
    };
    let (n_req, n_acc) = (fed.requests, fed.accesses);
    if n_acc == 0 {
        return Err(MrcError::EmptyTrace);
    }
    let curve = match (hist, minis) {
        (Some(h), _) => h.curve(sizes),
        (None, Some(points)) => {
            let mut pts: Vec<(u64, f64)> = points;
            pts.sort_by_key(|p| p.0);
            pts.dedup_by_key(|p| p.0);
            if pts.first().is_none_or(|p| p.0 > 0) {
                pts.insert(0, (0, 1.0));
            }
            HitRatioCurve::from_pairs(pts).expect("sizes increase and ratios lie in [0, 1]")
        }
        (None, None) => unreachable!("every method yields a histogram or points"),
    };
    Ok(CurveReport {
        method: method.name().into(),
        weighting,
        policy: method.policy(),
        requests: n_req,
        accesses: n_acc,
        seconds: start.elapsed().as_secs_f64(),
        memory_bytes: memory,
        points: curve.points().to_vec(),
    })
}

/// Keys the exact method buffers before running their table lookups ahead.
const CHUNK: usize = 4096;

/// What [`feed`] counted.
#[derive(Default)]
struct Fed {
    requests: u64,
    accesses: u64,
}

/// Calls `f(key, weight)` for every key of every read and write of `requests`, counting
/// requests and keys into `fed`; the first trace error ends the feed.
///
/// This loop is the whole cost of a sampled-out SHARDS access besides the hash, so it
/// reads batches of requests ([`RequestStream::next_batch`]) and runs over each in a tight
/// loop, generic so that `f` inlines into it, with the key mode and weighting decided once
/// per batch: object mode with request weighting, the usual case, is one key of weight 1
/// per data request.
#[inline(always)]
fn feed<S, F>(
    mut requests: S,
    mode: KeyMode,
    weighting: Weighting,
    fed: &mut Fed,
    mut f: F,
) -> Result<(), MrcError>
where
    S: RequestStream,
    F: FnMut(u64, f64),
{
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    loop {
        batch.clear();
        let res = requests.next_batch(&mut batch, BATCH);
        fed.requests += batch.len() as u64;
        match (mode, weighting) {
            (KeyMode::Object, Weighting::Requests) => {
                for r in &batch {
                    if r.op.is_data() {
                        fed.accesses += 1;
                        f(r.object_key(), 1.0);
                    }
                }
            }
            (KeyMode::Object, Weighting::Bytes) => {
                for r in &batch {
                    if r.op.is_data() {
                        fed.accesses += 1;
                        f(r.object_key(), r.len as f64);
                    }
                }
            }
            (KeyMode::Block { block_size }, _) => {
                let w = match weighting {
                    Weighting::Requests => 1.0,
                    Weighting::Bytes => block_size as f64,
                };
                for r in &batch {
                    if r.op.is_data() {
                        r.for_each_key(mode, |k| {
                            fed.accesses += 1;
                            f(k, w)
                        });
                    }
                }
            }
        }
        // The requests before an error count, as they did one by one.
        res?;
        if batch.is_empty() {
            return Ok(());
        }
    }
}

/// `n` sizes spread evenly up to `max` (at least one, all distinct and positive).
pub fn spread_sizes(n: usize, max: u64) -> Vec<u64> {
    let n = n.max(1) as u64;
    let mut v: Vec<u64> = (1..=n)
        .map(|i| (max.max(1) * i).div_ceil(n).max(1))
        .collect();
    v.dedup();
    v
}

/// Mean absolute error between two curves at `sizes`.
pub fn mean_absolute_error(a: &HitRatioCurve, b: &HitRatioCurve, sizes: &[u64]) -> f64 {
    if sizes.is_empty() {
        return 0.0;
    }
    sizes
        .iter()
        .map(|&s| (a.miss_ratio(s as f64) - b.miss_ratio(s as f64)).abs())
        .sum::<f64>()
        / sizes.len() as f64
}
