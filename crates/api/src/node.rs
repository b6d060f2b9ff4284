//! The node API's bodies: what a cache node answers and accepts under `/v1/`.
//!
//! | verb | path | request | answer |
//! |---|---|---|---|
//! | GET | `/v1/observations` | | [`NodeObservations`] |
//! | GET | `/v1/node` | | [`NodeInfo`] |
//! | GET | `/v1/tenants` | | `[`[`TenantInfo`]`]` |
//! | GET | `/v1/caches/{c}/curve?window=true&points=N` | | [`CacheCurve`] |
//! | GET | `/v1/caches` | | `[`[`CacheInfo`]`]` |
//! | POST | `/v1/caches` | [`CreateCache`] | [`CacheInfo`] (201; 200 if it exists alike) |
//! | GET, PATCH | `/v1/caches/{id or name}` | [`CachePatch`] (PATCH) | [`CacheInfo`] |
//! | DELETE | `/v1/caches/{id or name}` | | [`Removed`] |
//! | GET | `/v1/rules` | | `[`[`RuleInfo`]`]` |
//! | POST | `/v1/rules` | [`CreateRule`] | [`RuleInfo`] (201) |
//! | DELETE | `/v1/rules/{id}` | | [`Removed`] |
//! | PUT | `/v1/proportions` | [`Proportions`] | [`Proportions`] |
//! | POST | `/v1/demote/{export}` | binary records | [`DemoteOutcome`] |
//!
//! The node's two other answers, `/v1/exports` (with the hot tier's own snapshot) and
//! `GET /v1/proportions` (with the backend queue's per-tenant sums; the same figures are
//! in the observations, [`crate::bandwidth::BackendView`]), are diagnostics for people
//! and are still declared by the node itself; no program of ours reads them.
//!
//! Every type that the node writes and a program of ours reads refuses unknown fields;
//! request bodies refuse them too (the error names the field).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use units::ByteSize;

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
pub struct Served {
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
    pub hit: Served,
    /// At least one block from below.
    pub miss: Served,
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

/// The body of `POST /v1/caches` (the node's `[[cache]]` has the same fields). Every
/// field but `name` and `size` is optional: absent, the node's default applies.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CreateCache {
    /// Name, unique on the node.
    pub name: String,
    /// Capacity: bytes with a unit, or a plain number of bytes.
    pub size: ByteSize,
    /// Eviction policy spec (`lru`, `arc`, `lirs:hir=0.01`, ...; absent: `lru`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<String>,
    /// Write policy (absent: `write-back`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_policy: Option<String>,
    /// Admission policy spec (`demand`, `mrfu`, `adaptive`, ...; absent: `demand`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// Keep an online hit-ratio curve for this cache (absent: on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<bool>,
    /// Most dirty data as a fraction of the cache, in (0, 1] (absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_ratio: Option<f64>,
    /// Most dirty bytes (absent: the ratio alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_bytes: Option<ByteSize>,
    /// Exclusive levels (absent: off).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// A durable write log at this path (relative to the node's data directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// A durable write log at `DATA_DIR/cache-NAME.log` (absent: none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub durable: bool,
}

/// The body of `PATCH /v1/caches/{id or name}`: absent fields stay as they are.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CachePatch {
    /// New capacity (bytes, or a string with a unit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<ByteSize>,
    /// New eviction policy spec (switched online by reconstruction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<String>,
    /// New write policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_policy: Option<String>,
    /// New admission policy spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// Exclusive levels on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<bool>,
    /// New dirty limit as a fraction of the cache, in (0, 1] (the byte limit stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_ratio: Option<f64>,
    /// New dirty limit in bytes, at least one block; 0 removes it (the ratio stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_bytes: Option<ByteSize>,
}

/// A request's operation as rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Reads.
    Read,
    /// Writes (and trims).
    Write,
}

/// The body of `POST /v1/rules` (the node's `[[rule]]` has the same fields): requests of
/// `client` doing `op` on `export` in `range` go to `cache`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CreateRule {
    /// The export.
    pub export: String,
    /// The cache, by name.
    pub cache: String,
    /// Client address (IP, without port) or `unix`; absent = every client.
    #[serde(default)]
    pub client: Option<String>,
    /// `read` or `write`; absent = both.
    #[serde(default)]
    pub op: Option<Op>,
    /// Byte range `[start, end)`; absent = the whole export.
    #[serde(default)]
    pub range: Option<(u64, u64)>,
}

/// One cache as `GET /v1/caches` lists it and the cache verbs answer.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheInfo {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Bytes of capacity.
    pub size_bytes: u64,
    /// Counters and settings.
    pub stats: CacheStats,
    /// Hits per lookup.
    pub hit_ratio: f64,
    /// Most dirty data as a fraction of the capacity.
    pub dirty_ratio: f64,
    /// Most dirty bytes (0: the ratio alone).
    pub dirty_bytes: u64,
    /// The durable write log's path, if the cache has one.
    // Default: the node leaves the field out when the cache has no log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// A snapshot of one cache's state and counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheStats {
    /// Capacity in blocks.
    pub capacity: u64,
    /// Resident blocks.
    pub resident: u64,
    /// Resident dirty blocks.
    pub dirty: u64,
    /// Evicted dirty blocks whose write-back has not completed.
    pub writing_back: u64,
    /// Eviction policy name, canonical.
    pub eviction: String,
    /// Admission policy name.
    pub admission: String,
    /// Write policy name.
    pub write_policy: String,
    /// Block lookups found in memory.
    pub hits: u64,
    /// Block lookups not found.
    pub misses: u64,
    /// Bytes read by clients through this cache.
    pub read_bytes: u64,
    /// Bytes written by clients through this cache.
    pub write_bytes: u64,
    /// Blocks evicted (clean or dirty).
    pub evictions: u64,
    /// Dirty blocks written to the backend.
    pub writebacks: u64,
    /// Write-backs that failed (the data stays in memory and is retried on flush).
    pub writeback_errors: u64,
    /// Requests that matched no rule but touched blocks this cache holds.
    pub coherent_ops: u64,
    /// Exclusive mode: `off`, `upper` (clean victims are demoted) or `lower` (blocks
    /// served to reads are dropped).
    pub exclusive: String,
    /// Clean victims handed to the demote sink (upper).
    pub demoted: u64,
    /// Clean victims the demote sink refused (its queue was full; upper).
    pub demote_dropped: u64,
    /// Clean victims not demoted because a write of the block was in flight (upper).
    pub demote_skipped: u64,
    /// Demoted blocks inserted clean (lower).
    pub demoted_in: u64,
    /// Demoted blocks already resident, moved to the MRU end (lower).
    pub demote_refreshed: u64,
    /// Clean blocks dropped after a read served them (lower).
    pub dropped_on_read: u64,
}

/// One rule as `GET /v1/rules` lists it and `POST /v1/rules` answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleInfo {
    /// Id.
    pub id: u64,
    /// Cache id.
    pub cache: u64,
    /// The client (NBD peer); `None` matches every client.
    pub client: Option<String>,
    /// The operation; `None` matches reads and writes.
    pub op: Option<Op>,
    /// The export.
    pub export: String,
    /// Byte range `[start, end)`; `None` is the whole export.
    pub range: Option<(u64, u64)>,
}

/// The answer of a removal (`DELETE /v1/caches/{c}`, `DELETE /v1/rules/{id}`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Removed {
    /// The id of the cache or rule removed.
    pub removed: u64,
}

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

/// The answer of `GET /v1/caches/{c}/curve`: a cache's online hit-ratio curve.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheCurve {
    /// The cache's id.
    pub cache: u64,
    /// Recent accesses only.
    pub windowed: bool,
    /// Block size in bytes (sizes are in blocks).
    pub block_size: u64,
    /// `ok`, or `no data` (no points) before the cache saw any access.
    pub status: String,
    /// The points, sizes ascending.
    pub points: Vec<CurvePoint>,
}

/// One point of a curve.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CurvePoint {
    /// Cache size in blocks.
    pub cache_size: u64,
    /// Miss ratio at that size, in `[0, 1]`.
    pub miss_ratio: f64,
}

/// The body of a node's `GET /healthz`: status 200 with `"status": "ok"` while it serves,
/// 503 with `"status": "degraded"` and the links that are down while one reconnects.
///
/// Unknown fields are let through: a node may say more about why it is not ok.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Health {
    /// `ok` or `degraded`.
    pub status: String,
    /// The upstream links that are down.
    // Default: a healthy node leaves it out.
    #[serde(default)]
    pub upstreams_down: Vec<UpstreamDown>,
}

impl Health {
    /// Whether the node says it is fully able to serve.
    pub fn ok(&self) -> bool {
        self.status == "ok" && self.upstreams_down.is_empty()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn populated() -> NodeObservations {
        NodeObservations {
            version: crate::API_VERSION,
            node: "l1-a".into(),
            level: 1,
            block_size: 4096,
            cache_size: 256 << 20,
            uptime_ms: 12_345,
            epoch: "e1".into(),
            tenants: vec![TenantObservations {
                tenant: "t1".into(),
                cache: Some("vol1".into()),
                size: 64 << 20,
                eviction: Some("lru".into()),
                write_policy: Some("write-back".into()),
                admission: Some("demand".into()),
                requests: 1000,
                read_bytes: 4_096_000,
                write_bytes: 8192,
                lookups: 1002,
                hits: 600,
                latency: LatencyView {
                    count: 1000,
                    sum_ms: 812.5,
                    p50_ms: 0.4,
                    p99_ms: 6.1,
                    buckets: vec![(400, 600), (6100, 400)],
                    miss_buckets: vec![(6100, 400)],
                },
                served: ServedView {
                    hit: Served {
                        count: 600,
                        sum_ms: 60.0,
                    },
                    miss: Served {
                        count: 400,
                        sum_ms: 752.5,
                    },
                },
                curves: vec![
                    PolicyPoints {
                        policy: "lru".into(),
                        points: vec![(0, 1.0), (4096, 0.5)],
                    },
                    PolicyPoints {
                        policy: "arc".into(),
                        points: vec![(0, 1.0), (4096, 0.25)],
                    },
                ],
                backend: crate::bandwidth::BackendView {
                    requests: 400,
                    bytes: 1_638_400,
                    service_ms: 700.0,
                    queue_ms: 52.5,
                    proportion: Some(0.75),
                },
            }],
        }
    }

    #[test]
    fn observations_round_trip_without_loss() {
        let o = populated();
        let text = serde_json::to_string(&o).unwrap();
        let back: NodeObservations = serde_json::from_str(&text).unwrap();
        assert_eq!(back, o);
        assert_eq!(back.tenants[0].key(), "vol1");
        // Every field is on the wire: a field the node writes that the reader lacked
        // would be refused, and one the reader wants but the node left out would be
        // missing.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["tenants"][0]["served"]["miss"]["sum_ms"], 752.5);
        assert_eq!(v["tenants"][0]["backend"]["queue_ms"], 52.5);
        // A node from before the backend queue omits `backend`: zeros, no proportion.
        let mut old = v.clone();
        old["tenants"][0].as_object_mut().unwrap().remove("backend");
        let back: NodeObservations = serde_json::from_value(old).unwrap();
        assert_eq!(back.tenants[0].backend, Default::default());
        assert_eq!(v["version"], crate::API_VERSION);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut v = serde_json::to_value(populated()).unwrap();
        v["tenants"][0]["hitz"] = 3.into();
        let e = serde_json::from_value::<NodeObservations>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hitz"), "{e}");
        let e = serde_json::from_str::<CachePatch>(r#"{"colour":"red"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        let e = serde_json::from_str::<CreateRule>(r#"{"export":"a","cache":"b","ops":"read"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ops"), "{e}");
    }

    #[test]
    fn a_missing_required_field_is_refused() {
        let mut v = serde_json::to_value(populated()).unwrap();
        v["tenants"][0].as_object_mut().unwrap().remove("hits");
        let e = serde_json::from_value::<NodeObservations>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hits"), "{e}");
    }

    #[test]
    fn an_older_node_without_version_or_write_policy_still_parses() {
        // What nodes wrote before `version` and `write_policy` were reported.
        let text = r#"{"node": "l1-a", "level": 1, "block_size": 4096, "cache_size": 268435456,
    "uptime_ms": 12345, "epoch": "e1",
    "tenants": [{"tenant": "t1", "cache": "t1", "size": 67108864, "eviction": "lru",
       "admission": "demand", "requests": 1000, "read_bytes": 4096000, "write_bytes": 0,
       "lookups": 1000, "hits": 600,
       "latency": {"count": 1000, "sum_ms": 812.5, "p50_ms": 0.4, "p99_ms": 6.1},
       "served": {"hit": {"count": 600, "sum_ms": 60.0}, "miss": {"count": 400, "sum_ms": 752.5}},
       "curves": [{"policy": "lru", "points": [[0, 1.0], [4096, 0.5]]}]}]}"#;
        let o: NodeObservations = serde_json::from_str(text).unwrap();
        assert_eq!(o.version, 1);
        assert_eq!(o.tenants[0].write_policy, None);
        assert_eq!(o.tenants[0].hits, 600);
        assert_eq!(o.tenants[0].served.miss.sum_ms, 752.5);
        assert_eq!(o.tenants[0].curves[0].points[1], (4096, 0.5));
    }

    #[test]
    fn request_bodies_take_sizes_with_units_and_leave_defaults_to_the_node() {
        let c: CreateCache =
            serde_json::from_str(r#"{"name":"t2","size":"8MiB","eviction":"arc"}"#).unwrap();
        assert_eq!(c.size, ByteSize(8 << 20));
        assert_eq!(c.eviction.as_deref(), Some("arc"));
        assert_eq!(c.write_policy, None);
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"name":"t2","size":8388608,"eviction":"arc"}"#
        );
        let p: CachePatch = serde_json::from_str(r#"{"size":1048576}"#).unwrap();
        assert_eq!(p.size, Some(ByteSize(1 << 20)));
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"size":1048576}"#);
        let r: CreateRule =
            serde_json::from_str(r#"{"export":"a","cache":"b","op":"read","range":[0,4096]}"#)
                .unwrap();
        assert_eq!(r.op, Some(Op::Read));
        assert_eq!(r.range, Some((0, 4096)));
    }

    #[test]
    fn node_tenant_and_curve_answers_round_trip() {
        let n = NodeInfo {
            level: 2,
            block_size: 4096,
            total_blocks: 1024,
            allocated_blocks: 512,
            uptime_seconds: 1.5,
            bandwidth_bytes_per_sec: 0,
            demote: DemoteCounters {
                queued: 3,
                queue_blocks: 1,
                ..Default::default()
            },
        };
        let back: NodeInfo = serde_json::from_str(&serde_json::to_string(&n).unwrap()).unwrap();
        assert_eq!(back, n);
        let t = TenantInfo {
            export: "v".into(),
            tenant: "t".into(),
            client: "127.0.0.1".into(),
            reads: 5,
            hits: 4,
            misses: 1,
            hit_ratio: 0.8,
            latency: LatencySummary {
                read: Percentiles {
                    count: 5,
                    mean_us: 12.5,
                    p50_us: 10,
                    p99_us: 40,
                    p999_us: 40,
                    max_us: 41,
                },
                write: Percentiles::default(),
            },
            ..Default::default()
        };
        let back: TenantInfo = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let c: CacheCurve = serde_json::from_str(
            r#"{"cache":1,"windowed":false,"block_size":4096,"status":"no data","points":[]}"#,
        )
        .unwrap();
        assert_eq!(c.status, "no data");
        assert!(c.points.is_empty());
    }

    #[test]
    fn a_cache_without_a_log_parses() {
        let c = CacheInfo {
            id: 3,
            name: "t1".into(),
            size_bytes: 1 << 20,
            ..Default::default()
        };
        let text = serde_json::to_string(&c).unwrap();
        assert!(!text.contains("\"log\""), "{text}");
        assert_eq!(serde_json::from_str::<CacheInfo>(&text).unwrap(), c);
    }
}
