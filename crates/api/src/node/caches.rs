//! Caches and rules: the bodies that create and change them, their rows with counters,
//! removal answers, and a cache's hit-ratio curve.

use serde::{Deserialize, Serialize};
use units::ByteSize;

/// The write policies' canonical names, as a cache reports them and a controller's
/// volume names them.
pub const WRITE_POLICIES: &[&str] = &["write-back", "write-through", "write-around", "read-only"];

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
    /// Answer this cache's hit-ratio curve, its tenant's (absent: on).
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

/// One entry of `PATCH /v1/caches`: the fields `patch` gives, for the cache `cache`
/// (an id or a name).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CachePatchEntry {
    /// The cache, by id or name.
    pub cache: String,
    /// Its fields to change, as `PATCH /v1/caches/{cache}` takes them.
    pub patch: CachePatch,
}

/// The body of `PATCH /v1/caches`: several caches changed in one call, in the order
/// given (shrinks before grows keep the node within its memory), each entry applied or
/// refused on its own.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CachesPatch {
    /// The entries, applied in this order.
    pub caches: Vec<CachePatchEntry>,
}

/// What `PATCH /v1/caches` did with one entry: the cache as it is now, or the status and
/// reason the single `PATCH /v1/caches/{cache}` would have answered (the node is left as
/// it was for that entry).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CachePatchOutcome {
    /// The entry's cache, as the request named it.
    pub cache: String,
    /// HTTP status of the entry: 200, or the error's.
    pub status: u16,
    /// The cache after the change (on success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<CacheInfo>,
    /// Why it was refused (on failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The answer of `PATCH /v1/caches`: one outcome per entry, in the request's order.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CachesPatched {
    /// Per entry, what became of it.
    pub caches: Vec<CachePatchOutcome>,
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
