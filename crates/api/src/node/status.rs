//! A node's and its tenants' status: node counters, per-tenant counters and latency
//! percentiles, health (upstream links), bandwidth proportions and demotion answers.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bandwidth weights per tenant: the body and answer of `PUT /v1/proportions`.
pub type Proportions = BTreeMap<String, f64>;

/// The answer of `POST /v1/demote/{export}`: what the level-2 cache did with the blocks.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DemoteOutcome {
    /// Blocks inserted clean.
    pub inserted: u64,
    /// Blocks already resident, moved to MRU.
    pub refreshed: u64,
    /// Blocks left alone (being written back or filled, or declined by admission).
    pub skipped: u64,
}

/// The answer of `GET /v1/node`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeInfo {
    /// The node's level.
    pub level: u8,
    /// Cache block size in bytes.
    pub block_size: u64,
    /// Blocks of memory for all caches.
    pub total_blocks: u64,
    /// Blocks given to caches.
    pub allocated_blocks: u64,
    /// Seconds since start.
    pub uptime_seconds: f64,
    /// The disk bandwidth shared between tenants (0: unlimited).
    pub bandwidth_bytes_per_sec: u64,
    /// The demote path's counters (level 1).
    pub demote: DemoteCounters,
}

/// Counters of the demote path at level 1.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DemoteCounters {
    /// Blocks queued.
    pub queued: u64,
    /// Blocks dropped because the queue was full.
    pub dropped: u64,
    /// Blocks of exports with no level-2 API (not demoted).
    pub no_target: u64,
    /// Queued blocks cancelled by a read or write of the same block.
    pub cancelled: u64,
    /// Blocks sent and accepted by level 2.
    pub sent: u64,
    /// Blocks of batches that failed (level 2 unreachable or refused).
    pub failed: u64,
    /// Batches sent.
    pub batches: u64,
    /// Blocks queued now.
    pub queue_blocks: u64,
}

/// One tenant (export, client) as `GET /v1/tenants` lists it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TenantInfo {
    /// Export.
    pub export: String,
    /// Owning tenant of the export.
    pub tenant: String,
    /// Client address.
    pub client: String,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Block hits.
    pub hits: u64,
    /// Block misses (including requests that matched no rule).
    pub misses: u64,
    /// Evictions caused.
    pub evictions: u64,
    /// Write-backs caused.
    pub writebacks: u64,
    /// Hits per block lookup at this node's level.
    pub hit_ratio: f64,
    /// Latency summary.
    pub latency: LatencySummary,
}

/// Read and write percentiles.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencySummary {
    /// Reads.
    pub read: Percentiles,
    /// Writes, trims, flushes.
    pub write: Percentiles,
}

/// Percentiles of one histogram, in microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    /// Requests recorded.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
}

/// The body of a node's `GET /healthz`: status 200 with `"status": "ok"` while it serves,
/// 503 with `"status": "degraded"` and the links that are down while one reconnects, 503
/// with `"status": "at-risk"` and [`DirtyAtRisk`] while acknowledged dirty blocks can be
/// neither written back nor kept.
///
/// Unknown fields are let through: a node may say more about why it is not ok.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Health {
    /// `ok`, `degraded` or `at-risk`.
    pub status: String,
    /// The upstream links that are down.
    // Default: a healthy node leaves it out.
    #[serde(default)]
    pub upstreams_down: Vec<UpstreamDown>,
    /// Dirty blocks at risk (only with `at-risk`).
    // Default: a node not at risk leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_at_risk: Option<DirtyAtRisk>,
}

impl Health {
    /// Whether the node says it is fully able to serve.
    pub fn ok(&self) -> bool {
        self.status == "ok" && self.upstreams_down.is_empty() && self.dirty_at_risk.is_none()
    }
}

/// Acknowledged dirty blocks a node can neither write back (its backend fails) nor keep
/// in its data directory (no room), in [`Health`]: their exports refuse writes and a stop
/// waits for them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirtyAtRisk {
    /// The exports whose blocks they are.
    pub exports: Vec<String>,
    /// How many blocks.
    pub blocks: usize,
    /// Why the backend does not take them.
    pub backend_error: String,
    /// Why the data directory cannot keep them.
    pub room_error: String,
    /// Whether the data directory is full (writes get ENOSPC, else EIO).
    pub disk_full: bool,
    /// Seconds since the node found them at risk.
    pub since_secs: f64,
    /// Whether a stop is waiting for them.
    pub stop_waiting: bool,
}

/// One upstream link that is down, in [`Health`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UpstreamDown {
    /// The export it serves.
    pub export: String,
    /// The upstream (`host:port/export`).
    pub upstream: String,
    /// Seconds since it went down.
    pub down_secs: f64,
    /// Why the last attempt failed.
    #[serde(default)]
    pub error: Option<String>,
}
