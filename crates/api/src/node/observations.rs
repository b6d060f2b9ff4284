//! `GET /v1/observations`: what a node observed of each tenant, cumulative since it
//! started, for a controller ([`NodeObservations`]).

use serde::{Deserialize, Serialize};

/// The version an observation without a `version` field was written in: nodes before
/// the field existed spoke version 1.
fn version_1() -> u32 {
    1
}

/// The whole answer of `GET /v1/observations`: what the node observed of each tenant,
/// cumulative since it started (a controller takes differences between polls and
/// recognises a restart by `epoch`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeObservations {
    /// The API version the node wrote this in ([`crate::API_VERSION`]).
    // Default: nodes from before the field omit it, and they spoke version 1.
    #[serde(default = "version_1")]
    pub version: u32,
    /// The node's name.
    pub node: String,
    /// Its level.
    pub level: u8,
    /// Cache block size in bytes.
    pub block_size: u64,
    /// Memory for all caches, bytes.
    pub cache_size: u64,
    /// Milliseconds since start.
    pub uptime_ms: u64,
    /// Chosen at start; changes on restart.
    pub epoch: String,
    /// Per tenant, by name.
    pub tenants: Vec<TenantObservations>,
    /// Per export with a hot tier, by export name: the tier's counters and settings.
    // Default: nodes from before tiers were reported omit it.
    #[serde(default)]
    pub tiers: Vec<crate::node::HotTierView>,
}

/// One tenant in [`NodeObservations`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TenantObservations {
    /// The tenant (owner of the exports).
    pub tenant: String,
    /// The cache its exports' rules route to (the first, if several; the volume's name
    /// under a controller); `None` if none.
    pub cache: Option<String>,
    /// That cache's capacity in bytes (0 without a cache).
    pub size: u64,
    /// Its eviction policy.
    pub eviction: Option<String>,
    /// Its write policy (`write-back`, `write-through`, `write-around`).
    // Default: nodes from before write policies were reported omit it.
    #[serde(default)]
    pub write_policy: Option<String>,
    /// Its admission policy.
    pub admission: Option<String>,
    /// Blocks resident in that cache now (a gauge, not a counter); `None` without a
    /// cache. Under a shared cache, the whole cache's.
    // Default: nodes from before resident and dirty blocks were reported omit both.
    #[serde(default)]
    pub resident_blocks: Option<u64>,
    /// Of those, blocks written and not yet written back (a gauge); `None` without a
    /// cache.
    #[serde(default)]
    pub dirty_blocks: Option<u64>,
    /// Requests (reads and writes).
    pub requests: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Blocks looked up at this node.
    pub lookups: u64,
    /// Blocks found in memory.
    pub hits: u64,
    /// Latency of every request.
    pub latency: LatencyView,
    /// Reads served here against below.
    pub served: ServedView,
    /// Curves per candidate policy, LRU first; empty without data.
    pub curves: Vec<PolicyPoints>,
    /// Its use of the node's backend and its proportion of it.
    // Default: nodes from before the backend queue omit it.
    #[serde(default)]
    pub backend: crate::bandwidth::BackendView,
}

/// The name of the one cache every volume's rule routes to when a controller runs a
/// node as a single shared cache (the `uncontrolled` scheme).
pub const SHARED_CACHE: &str = "shared";

impl TenantObservations {
    /// The key a controller knows it by: its cache's name, else (no cache, or the one
    /// [`SHARED_CACHE`] all tenants route to) the tenant's.
    pub fn key(&self) -> &str {
        match self.cache.as_deref() {
            Some(c) if c != SHARED_CACHE => c,
            _ => &self.tenant,
        }
    }
}

/// Latency of every request of a tenant.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencyView {
    /// Requests timed.
    pub count: u64,
    /// Requests answered with an error: counted here only, never timed (a request that
    /// failed at once is no fast one).
    // Default: nodes from before failures were counted apart omit it.
    #[serde(default)]
    pub failed: u64,
    /// Their total latency (ms).
    pub sum_ms: f64,
    /// Median (ms).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// The latency histogram's recorded buckets: `(highest microseconds of the bucket,
    /// requests)`, ascending, cumulative since the node started (three significant digits).
    // Default: nodes from before histograms were shipped omit it.
    #[serde(default)]
    pub buckets: Vec<(u64, u64)>,
    /// The same of the reads that went below this node (misses; two significant digits).
    #[serde(default)]
    pub miss_buckets: Vec<(u64, u64)>,
}

/// Count and total latency of one class of reads (a mean-latency accumulator).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencySum {
    /// Reads.
    pub count: u64,
    /// Their total latency (ms).
    pub sum_ms: f64,
}

/// Reads served from this node's memory against reads that went below it.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServedView {
    /// Every block in memory here.
    pub hit: LatencySum,
    /// At least one block from below.
    pub miss: LatencySum,
}

/// One policy's curve: `[size_bytes, miss_ratio]` pairs, sizes ascending from 0.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyPoints {
    /// Canonical policy name.
    pub policy: String,
    /// `[size_bytes, miss_ratio]`.
    pub points: Vec<(u64, f64)>,
}
