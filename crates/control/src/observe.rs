//! What one enforcement interval observed: per tenant its requests, hits at each level,
//! latency, the service time of each way a request was served, and hit-ratio curves per
//! candidate eviction policy; per storage server its hot tier's hits and migrations.
//!
//! The simulator fills these from its models, the live controller from the nodes' stats;
//! the enforcement step cannot tell which.

use mrc::HitRatioCurve;
use serde::{Deserialize, Serialize};

/// Lookups and hits at one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelCount {
    /// Blocks looked up.
    pub lookups: u64,
    /// Blocks found.
    pub hits: u64,
}

impl LevelCount {
    /// Hits over lookups (0 without lookups).
    pub fn hit_ratio(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }
}

/// A hit-ratio curve of one eviction policy over a tenant's whole request stream (sizes in
/// blocks of both levels together).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyCurve {
    /// The policy's canonical name (`lru`, `arc`, ...).
    pub policy: String,
    /// Its curve.
    pub curve: HitRatioCurve,
}

/// Mean latency, in milliseconds, of the requests served each way this interval (`None`
/// where none was).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ObservedService {
    /// Requests served entirely by level 1.
    pub l1_hit_ms: Option<f64>,
    /// Requests whose slowest block came from level 2.
    pub l2_hit_ms: Option<f64>,
    /// Requests that went to a disk.
    pub miss_ms: Option<f64>,
}

/// One tenant's interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantObservation {
    /// Requests completed.
    pub requests: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Level-1 lookups and hits (blocks).
    pub l1: LevelCount,
    /// Level-2 lookups and hits (blocks).
    pub l2: LevelCount,
    /// Mean latency of its requests (ms).
    pub mean_latency_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_latency_ms: f64,
    /// Mean latency of each way of service.
    pub service: ObservedService,
    /// Curves, one per candidate policy; the first is the policy in use (or LRU).
    pub curves: Vec<PolicyCurve>,
    /// Of `requests`, how many were writes (0 where the observer does not tell).
    #[serde(default)]
    pub writes: u64,
    /// Mean latency of the reads alone (ms), where the observer measured it.
    #[serde(default)]
    pub read_latency_ms: Option<f64>,
    /// Mean latency of the writes alone (ms), where the observer measured it.
    #[serde(default)]
    pub write_latency_ms: Option<f64>,
    /// Its level-1 cache is write-back: a write is absorbed, and pays for the backend
    /// only when it adds a block that was not resident (the eviction it causes must
    /// sooner or later write a dirty block back).
    #[serde(default)]
    pub write_back: bool,
    /// The share of its resident blocks (all its partitions) that are dirty, where the
    /// nodes count them (`None`: not counted). A shrink's write-backs are paced by it.
    #[serde(default)]
    pub dirty_share: Option<f64>,
    /// Quantiles of the latency of all its requests this interval, where measured.
    #[serde(default)]
    pub latency_quantiles: Option<Quantiles>,
    /// Quantiles of the latency of its reads that went to a disk this interval, where
    /// measured: what sizing for a tail SLO needs (how many misses overrun the bound).
    #[serde(default)]
    pub miss_quantiles: Option<Quantiles>,
}

/// Latency quantiles of one class of requests in one interval (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

impl Quantiles {
    /// Quantiles from a function of the quantile (a histogram's `value_at_quantile`).
    pub fn from_fn(mut at: impl FnMut(f64) -> f64) -> Self {
        Quantiles {
            p50: at(0.5),
            p90: at(0.9),
            p95: at(0.95),
            p99: at(0.99),
            p999: at(0.999),
        }
    }

    /// `(quantile, ms)` pairs, quantiles ascending.
    pub fn points(&self) -> [(f64, f64); 5] {
        [
            (0.5, self.p50),
            (0.9, self.p90),
            (0.95, self.p95),
            (0.99, self.p99),
            (0.999, self.p999),
        ]
    }

    /// The latency at quantile `q`, if it is one of the five kept.
    pub fn at(&self, q: f64) -> Option<f64> {
        self.points()
            .iter()
            .find(|p| (p.0 - q).abs() < 1e-9)
            .map(|p| p.1)
    }

    /// An upper bound on the share of these requests slower than `ms`: `1 − q` for the
    /// highest kept quantile `q` whose latency is within `ms`, 1 when even the median is
    /// slower. Bounded, never estimated below what the kept points prove.
    pub fn share_above(&self, ms: f64) -> f64 {
        self.points()
            .iter()
            .rev()
            .find(|p| p.1 <= ms)
            .map_or(1.0, |p| 1.0 - p.0)
    }
}

impl TenantObservation {
    /// The curve of `policy`, if observed.
    pub fn curve(&self, policy: &str) -> Option<&HitRatioCurve> {
        self.curves
            .iter()
            .find(|c| c.policy == policy)
            .map(|c| &c.curve)
    }

    /// Hit ratio of both levels together (blocks found in either over blocks asked).
    pub fn combined_hit_ratio(&self) -> f64 {
        if self.l1.lookups == 0 {
            0.0
        } else {
            (self.l1.hits + self.l2.hits) as f64 / self.l1.lookups as f64
        }
    }
}

/// A storage server's hot tier this interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierObservation {
    /// Chunk accesses served by the tier.
    pub hits: u64,
    /// Chunks copied into the tier.
    pub migrations: u64,
}

/// What one storage server's backend (its disk, or the upstream it owns) did in an
/// interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerObservation {
    /// Share of the interval the backend was busy serving requests (0 to 1); `None` where
    /// it is not measured.
    pub backend_busy: Option<f64>,
}

/// One interval's observations, tenants in topology order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observations {
    /// Length of the interval in seconds.
    pub seconds: f64,
    /// Per tenant, in the topology's order.
    pub tenants: Vec<TenantObservation>,
    /// Per storage server, in the topology's order (servers without a tier: zeros).
    #[serde(default)]
    pub tiers: Vec<TierObservation>,
    /// Per storage server, in the topology's order, its backend's load (empty where
    /// nothing is measured).
    #[serde(default)]
    pub servers: Vec<ServerObservation>,
}
