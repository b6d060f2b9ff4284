//! The caches and rules a node starts with (`[[cache]]`, `[[rule]]`), and the API's
//! create-cache and create-rule bodies turned into the same specs.

use crate::error::NodeError;
use crate::units::ByteSize;
use policy::EvictionSpec;
use serde::Deserialize;
use std::path::PathBuf;

/// One `[[cache]]`; the API's create-cache body ([`api::node::CreateCache`]) becomes one.
#[derive(Clone, Debug, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// Name, unique on the node.
    pub name: String,
    /// Capacity: bytes with a unit, or a plain number of bytes.
    pub size: ByteSize,
    /// Eviction policy (`lru`, `arc`, `lirs:hir=0.01`, ...; default `lru`), checked when
    /// the file or request is parsed.
    #[serde(default)]
    #[schemars(with = "String")]
    pub eviction: EvictionSpec,
    /// Write policy (default write-back).
    #[serde(default = "default_write_policy")]
    pub write_policy: String,
    /// Admission policy spec (`demand`, `mrfu`, `adaptive`, ...; default `demand`).
    #[serde(default)]
    pub admission: Option<String>,
    /// Answer this cache's hit-ratio curve (`GET /v1/caches/{c}/curve`: the curve of the
    /// tenant its rules serve, from that tenant's one profiler; default on).
    #[serde(default = "default_true")]
    pub profile: bool,
    /// Most dirty data as a fraction of the cache, in (0, 1] (default 1); background
    /// cleaning starts at half the limit, writers are throttled past three quarters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_ratio: Option<f64>,
    /// Most dirty bytes (default: the ratio alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_bytes: Option<ByteSize>,
    /// Exclusive levels (default false): on a level-1 node the cache demotes the clean
    /// blocks it evicts to level 2 (exports with `upstream_api`); on a level-2 node it
    /// drops the blocks it serves to reads (see `demote`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// A durable write log at this path (relative to `data_dir`; files `PATH.1`, `PATH.2`,
    /// ...): every write is logged and synced before it is acknowledged and replayed at
    /// the next start. Without a log, write-back data not yet flushed lives in memory only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    /// A durable write log at `DATA_DIR/cache-NAME.log` (the same as `log` with that path).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub durable: bool,
}

impl CacheSpec {
    /// Where the cache's durable write log lives, if it has one (relative to the data
    /// directory unless absolute).
    pub fn log_path(&self) -> Option<PathBuf> {
        match (&self.log, self.durable) {
            (Some(p), _) => Some(p.clone()),
            (None, true) => Some(PathBuf::from(format!("cache-{}.log", self.name))),
            (None, false) => None,
        }
    }
}

impl TryFrom<api::node::CreateCache> for CacheSpec {
    type Error = NodeError;

    /// The body of `POST /v1/caches` with the node's defaults filled in; a bad eviction
    /// spec is an error naming the field.
    fn try_from(c: api::node::CreateCache) -> Result<Self, NodeError> {
        let eviction = match c.eviction {
            Some(e) => e
                .parse::<EvictionSpec>()
                .map_err(|e| NodeError::Invalid(format!("request body: eviction: {e}")))?,
            None => EvictionSpec::default(),
        };
        Ok(CacheSpec {
            name: c.name,
            size: c.size,
            eviction,
            write_policy: c.write_policy.unwrap_or_else(default_write_policy),
            admission: c.admission,
            profile: c.profile.unwrap_or(true),
            dirty_ratio: c.dirty_ratio,
            dirty_bytes: c.dirty_bytes,
            exclusive: c.exclusive,
            log: c.log.map(PathBuf::from),
            durable: c.durable,
        })
    }
}

fn default_write_policy() -> String {
    "write-back".into()
}
fn default_true() -> bool {
    true
}

/// One `[[rule]]` (the API's [`api::node::CreateRule`] becomes one): requests of `client` doing `op` on `export` in `range` go to `cache`.
#[derive(Clone, Debug, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// The export.
    pub export: String,
    /// The cache, by name.
    pub cache: String,
    /// Client address (IP, without port) or `unix`; absent = every client.
    #[serde(default)]
    pub client: Option<String>,
    /// `read` or `write`; absent = both.
    #[serde(default)]
    #[schemars(with = "Option<RuleOp>")]
    pub op: Option<cache::Op>,
    /// Byte range `[start, end)`; absent = the whole export.
    #[serde(default)]
    pub range: Option<(u64, u64)>,
}

/// How the reference describes a rule's `op` (the key reads as [`cache::Op`]).
#[derive(schemars::JsonSchema)]
#[schemars(rename_all = "lowercase")]
#[allow(dead_code)] // only its schema is used
enum RuleOp {
    /// Reads only.
    Read,
    /// Writes (and trims) only.
    Write,
}

impl From<api::node::CreateRule> for RuleSpec {
    /// The body of `POST /v1/rules`.
    fn from(r: api::node::CreateRule) -> Self {
        RuleSpec {
            export: r.export,
            cache: r.cache,
            client: r.client,
            op: r.op.map(|o| match o {
                api::node::Op::Read => cache::Op::Read,
                api::node::Op::Write => cache::Op::Write,
            }),
            range: r.range,
        }
    }
}
