//! The node's control plane: the [`cache::CacheNode`] plus what the node adds around it —
//! cache names, online profilers, per-tenant latency histograms and exports' owners.
//!
//! Every API verb and every start-up step from `node.toml` goes through [`NodeState`], so
//! the file and the API can never disagree about what a verb does. Data-path requests go
//! to `cache::CacheNode` directly (see `export`); this module only adds latency timing.

use crate::config::{CacheSpec, RuleSpec};
use crate::error::NodeError;
use crate::hot_tier::HotTier;
use crate::latency::Latency;
use crate::observe::TenantObserver;
use api::node::{CacheInfo, RuleInfo, TenantInfo};
use cache::{
    AccessObserver, CacheConfig, CacheId, CacheNode, CacheStats, Rule, RuleId, WritePolicy,
};
use mrc::profiler::OnlineProfiler;
use mrc::HitRatioCurve;
use policy::EvictionSpec;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Samples kept by each cache's SHARDS profiler (bounded memory, ~100 KiB).
pub const PROFILER_SMAX: usize = 8192;
/// Accesses per profiler window (the windowed curve covers the last one to two).
pub const PROFILER_WINDOW: u64 = 1_000_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An export as the node serves it.
#[derive(Clone, Debug, Serialize)]
pub struct ExportInfo {
    /// NBD export name.
    pub name: String,
    /// Owning tenant.
    pub tenant: String,
    /// Size in bytes.
    pub size: u64,
    /// Writes refused.
    pub read_only: bool,
    /// What serves it (`file:PATH`, `nbd:ADDR/NAME`, `stripe(...)`).
    pub backend: String,
}

struct Profiler(Arc<Mutex<OnlineProfiler>>);

impl AccessObserver for Profiler {
    fn observe(&mut self, key: u64) {
        lock(&self.0).record(key);
    }
}

/// A change to a cache through the API (`PATCH /v1/caches/{c}`): the contract's type.
pub use api::node::CachePatch;

/// The node's state shared by the NBD server and the API.
pub struct NodeState {
    /// The data path and its caches.
    pub cache: Arc<CacheNode>,
    /// This node's level in the hierarchy.
    pub level: u8,
    /// When the node started.
    pub started: Instant,
    exports: BTreeMap<String, ExportInfo>,
    hot_tiers: BTreeMap<String, Arc<HotTier>>,
    profilers: Mutex<BTreeMap<CacheId, Arc<Mutex<OnlineProfiler>>>>,
    latency: Mutex<BTreeMap<(String, String), Arc<Latency>>>,
    /// The backend's queue: every export's backend calls wait in it, shared between
    /// tenants in proportion to their weights ([`crate::bandwidth`]).
    pub bandwidth: Arc<crate::bandwidth::FairQueue>,
    /// The node's name (`[node] name`, else its API address).
    pub name: String,
    /// A random id chosen at start: a controller sees a restart by its change.
    pub epoch: String,
    /// Candidate policies profiled by phantom caches besides LRU.
    pub phantom_policies: Vec<String>,
    export_index: BTreeMap<String, u64>,
    observers: Mutex<BTreeMap<String, Arc<TenantObserver>>>,
    /// The demote path to level 2 (used by exclusive caches on a level-1 node).
    pub demoter: crate::demote::Demoter,
    /// The links to upstream NBD exports (level 1 → level 2), for health reports.
    pub upstreams: crate::upstream::Links,
    /// The NBD server's node-wide limits (bytes in flight, workers), for `/metrics`; set
    /// by `start` before the node is shared.
    pub nbd_limits: Option<Arc<nbd::Limits>>,
    /// Where relative paths of caches' write logs are taken from (`[node] data_dir`).
    pub data_dir: Option<PathBuf>,
    /// Whether `/metrics` labels tenant series with client addresses
    /// (`[node] metrics_client_labels`).
    pub metrics_client_labels: bool,
}

/// A cache's stats as the API shows them (the one place the cache crate's snapshot
/// becomes the contract's).
fn stats_info(s: CacheStats) -> api::node::CacheStats {
    api::node::CacheStats {
        capacity: s.capacity as u64,
        resident: s.resident as u64,
        dirty: s.dirty as u64,
        writing_back: s.writing_back as u64,
        eviction: s.eviction,
        admission: s.admission,
        write_policy: s.write_policy,
        hits: s.hits,
        misses: s.misses,
        read_bytes: s.read_bytes,
        write_bytes: s.write_bytes,
        evictions: s.evictions,
        writebacks: s.writebacks,
        writeback_errors: s.writeback_errors,
        coherent_ops: s.coherent_ops,
        exclusive: s.exclusive,
        demoted: s.demoted,
        demote_dropped: s.demote_dropped,
        demote_skipped: s.demote_skipped,
        demoted_in: s.demoted_in,
        demote_refreshed: s.demote_refreshed,
        dropped_on_read: s.dropped_on_read,
    }
}

/// Bits of a profiled block key left for the block number (the export's index above).
const KEY_BLOCK_BITS: u32 = 44;

/// A random id for this start of the process.
fn new_epoch() -> String {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let h = std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()));
    format!("{h:016x}")
}

impl NodeState {
    /// A node with `total_blocks` blocks of `block_size` bytes and no exports yet.
    pub fn new(
        total_blocks: usize,
        block_size: usize,
        level: u8,
        backend_depth: usize,
    ) -> Result<Self, NodeError> {
        Ok(NodeState {
            cache: Arc::new(CacheNode::new(total_blocks, block_size)?),
            level,
            started: Instant::now(),
            exports: BTreeMap::new(),
            hot_tiers: BTreeMap::new(),
            profilers: Mutex::default(),
            latency: Mutex::default(),
            bandwidth: Arc::new(crate::bandwidth::FairQueue::new(backend_depth)),
            name: String::new(),
            epoch: new_epoch(),
            phantom_policies: crate::observe::DEFAULT_PHANTOM_POLICIES
                .iter()
                .map(|p| p.to_string())
                .collect(),
            export_index: BTreeMap::new(),
            observers: Mutex::default(),
            demoter: crate::demote::Demoter::new(),
            upstreams: Default::default(),
            nbd_limits: None,
            data_dir: None,
            metrics_client_labels: false,
        })
    }

    /// Registers an export (only before the node is shared).
    pub fn add_export(
        &mut self,
        info: ExportInfo,
        backend: Arc<dyn cache::Backend>,
        hot_tier: Option<Arc<HotTier>>,
    ) -> Result<(), NodeError> {
        self.cache.add_export(&info.name, backend)?;
        if let Some(t) = hot_tier {
            self.hot_tiers.insert(info.name.clone(), t);
        }
        let index = self.export_index.len() as u64;
        self.export_index.insert(info.name.clone(), index);
        self.exports.insert(info.name.clone(), info);
        Ok(())
    }

    /// The exports.
    pub fn exports(&self) -> impl Iterator<Item = &ExportInfo> {
        self.exports.values()
    }

    /// The hot-chunk tier of an export, if it has one.
    pub fn hot_tier(&self, export: &str) -> Option<&Arc<HotTier>> {
        self.hot_tiers.get(export)
    }

    /// One export.
    pub fn export(&self, name: &str) -> Option<&ExportInfo> {
        self.exports.get(name)
    }

    fn blocks(&self, bytes: u64, field: &str) -> Result<usize, NodeError> {
        let bs = self.cache.block_size() as u64;
        let blocks = bytes / bs;
        if blocks == 0 {
            return Err(NodeError::Invalid(format!(
                "{field}: {bytes} bytes is less than one block of {bs} bytes"
            )));
        }
        Ok(blocks as usize)
    }

    /// Creates a cache (`createCache`), with its profiler if asked.
    pub fn create_cache(&self, spec: &CacheSpec) -> Result<CacheId, NodeError> {
        api::names::check("name", &spec.name).map_err(|e| NodeError::Invalid(e.to_string()))?;
        if self.cache_id(&spec.name).is_some() {
            return Err(NodeError::Conflict(format!(
                "a cache called `{}` exists",
                spec.name
            )));
        }
        let blocks = self.blocks(spec.size.0, "size")?;
        let wp: WritePolicy = spec
            .write_policy
            .parse()
            .map_err(|e| NodeError::Invalid(format!("write_policy: {e}")))?;
        let admission = match &spec.admission {
            Some(a) => Some(
                policy::admission::build_admission(a)
                    .map_err(|e| NodeError::Invalid(format!("admission: {e}")))?,
            ),
            None => None,
        };
        let id = self
            .cache
            .create_cache(&spec.name, blocks, &spec.eviction, wp)?;
        let dirty = (spec.dirty_ratio.is_some() || spec.dirty_bytes.is_some()).then(|| {
            cache::DirtyLimits {
                ratio: spec.dirty_ratio.unwrap_or(1.0),
                bytes: spec.dirty_bytes.map_or(0, |b| b.0),
            }
        });
        if admission.is_some() || dirty.is_some() {
            let configured = self.cache.configure_cache(
                id,
                CacheConfig {
                    admission,
                    dirty,
                    ..CacheConfig::default()
                },
            );
            if let Err(e) = configured {
                let _ = self.cache.remove_cache(id);
                return Err(e.into());
            }
        }
        if spec.exclusive {
            self.set_exclusive(id, true)?;
        }
        if let Some(path) = spec.log_path() {
            if let Err(e) = self.open_log(id, &path) {
                let _ = self.cache.remove_cache(id);
                return Err(e);
            }
        }
        if spec.profile {
            let p = Arc::new(Mutex::new(OnlineProfiler::new(
                PROFILER_SMAX,
                PROFILER_WINDOW,
            )));
            self.cache
                .set_observer(id, Some(Box::new(Profiler(p.clone()))))?;
            lock(&self.profilers).insert(id, p);
        }
        tracing::info!(id, name = %spec.name, blocks, eviction = %spec.eviction, "cache created");
        Ok(id)
    }

    /// Replays what an earlier run left in the durable write log at `path` (relative to
    /// the data directory) straight through the node (the new cache has no rule yet, so
    /// the records reach the backends or the caches routing them), flushes the exports
    /// they name, deletes the replayed files and attaches a new log to cache `id`. A
    /// torn tail is ignored with a warning; a corrupt record, an unknown export or a
    /// backend that refuses the data is an error naming the file.
    fn open_log(&self, id: CacheId, path: &Path) -> Result<(), NodeError> {
        let path = match &self.data_dir {
            Some(d) if path.is_relative() => d.join(path),
            _ => path.to_path_buf(),
        };
        let err = |file: &Path, msg: String| NodeError::Config {
            file: file.display().to_string(),
            msg,
        };
        let gens = cache::write_log::generations(&path).map_err(|e| err(&path, e.to_string()))?;
        let mut exports = std::collections::BTreeSet::new();
        let mut replayed = 0usize;
        for (_, file) in &gens {
            let f = cache::write_log::read_log(file).map_err(|e| err(file, e.to_string()))?;
            if let Some(t) = &f.torn_tail {
                tracing::warn!(file = %file.display(), "write log: ignoring a torn last record ({t})");
            }
            for (i, r) in f.records.iter().enumerate() {
                let (export, res) = match r {
                    cache::write_log::LogRecord::Write {
                        export,
                        offset,
                        data,
                    } => (
                        export,
                        self.cache.write(export, "log-replay", *offset, data, false),
                    ),
                    cache::write_log::LogRecord::Trim {
                        export,
                        offset,
                        len,
                    } => (export, self.cache.trim(export, "log-replay", *offset, *len)),
                };
                res.map_err(|e| err(file, format!("replaying record {i}: {e}")))?;
                exports.insert(export.clone());
                replayed += 1;
            }
        }
        for e in &exports {
            self.cache
                .flush(e)
                .map_err(|e| err(&path, format!("flushing the replayed writes: {e}")))?;
        }
        for (_, file) in &gens {
            std::fs::remove_file(file).map_err(|e| err(file, e.to_string()))?;
        }
        if !gens.is_empty() {
            tracing::info!(log = %path.display(), files = gens.len(), records = replayed, "replayed the write log");
        }
        let log = cache::write_log::WriteLog::create(&path, &[])
            .map_err(|e| err(&path, e.to_string()))?;
        self.cache.set_log(id, Some(Arc::new(log)))?;
        Ok(())
    }

    /// Creates a cache, or finds the one called `spec.name` if it has the same settings
    /// (capacity in blocks, eviction, write and admission policy): `(id, true)` when
    /// created, `(id, false)` when it was there. A cache of that name with other settings
    /// is a conflict naming what differs (change it with `configure_cache`).
    pub fn ensure_cache(&self, spec: &CacheSpec) -> Result<(CacheId, bool), NodeError> {
        let Some(id) = self.cache_id(&spec.name) else {
            return self.create_cache(spec).map(|id| (id, true));
        };
        let stats = self.cache.get_cache_stats(id)?;
        let mut differ = Vec::new();
        let blocks = self.blocks(spec.size.0, "size")?;
        if blocks != stats.capacity {
            differ.push(format!("size ({} blocks, asked {blocks})", stats.capacity));
        }
        if spec.eviction.name() != stats.eviction {
            differ.push(format!(
                "eviction (`{}`, asked `{}`)",
                stats.eviction,
                spec.eviction.name()
            ));
        }
        let wp: WritePolicy = spec
            .write_policy
            .parse()
            .map_err(|e| NodeError::Invalid(format!("write_policy: {e}")))?;
        if wp.name() != stats.write_policy {
            differ.push(format!(
                "write_policy (`{}`, asked `{}`)",
                stats.write_policy,
                wp.name()
            ));
        }
        let admission = match &spec.admission {
            Some(a) => policy::admission::build_admission(a)
                .map_err(|e| NodeError::Invalid(format!("admission: {e}")))?
                .name(),
            None => "demand".to_string(),
        };
        if admission != stats.admission {
            differ.push(format!(
                "admission (`{}`, asked `{admission}`)",
                stats.admission
            ));
        }
        let exclusive = stats.exclusive != "off";
        if spec.exclusive != exclusive {
            differ.push(format!("exclusive ({exclusive}, asked {})", spec.exclusive));
        }
        if differ.is_empty() {
            Ok((id, false))
        } else {
            Err(NodeError::Conflict(format!(
                "a cache called `{}` exists with another {}; change it with PATCH /v1/caches/{}",
                spec.name,
                differ.join(", "),
                spec.name
            )))
        }
    }

    /// Changes a cache online (`configureCache`).
    pub fn configure_cache(&self, id: CacheId, patch: &CachePatch) -> Result<(), NodeError> {
        let eviction = match &patch.eviction {
            Some(e) => Some(
                e.parse::<EvictionSpec>()
                    .map_err(|e| NodeError::Invalid(format!("eviction: {e}")))?,
            ),
            None => None,
        };
        let size = match patch.size {
            Some(s) => Some(self.blocks(s.0, "size")?),
            None => None,
        };
        let write_policy = match &patch.write_policy {
            Some(w) => Some(
                w.parse::<WritePolicy>()
                    .map_err(|e| NodeError::Invalid(format!("write_policy: {e}")))?,
            ),
            None => None,
        };
        let admission = match &patch.admission {
            Some(a) => Some(
                policy::admission::build_admission(a)
                    .map_err(|e| NodeError::Invalid(format!("admission: {e}")))?,
            ),
            None => None,
        };
        let dirty = if patch.dirty_ratio.is_some() || patch.dirty_bytes.is_some() {
            let mut d = self.cache.dirty_limits(id)?;
            if let Some(r) = patch.dirty_ratio {
                if !(r > 0.0 && r <= 1.0) {
                    return Err(NodeError::Invalid(format!(
                        "dirty_ratio: {r} must be in (0, 1]"
                    )));
                }
                d.ratio = r;
            }
            if let Some(b) = patch.dirty_bytes {
                let bs = self.cache.block_size() as u64;
                if b.0 != 0 && b.0 < bs {
                    return Err(NodeError::Invalid(format!(
                        "dirty_bytes: {} is less than one block of {bs} bytes (0 removes the byte limit)",
                        b.0
                    )));
                }
                d.bytes = b.0;
            }
            Some(d)
        } else {
            None
        };
        self.cache.configure_cache(
            id,
            CacheConfig {
                size,
                eviction,
                write_policy,
                admission,
                dirty,
            },
        )?;
        if let Some(on) = patch.exclusive {
            self.set_exclusive(id, on)?;
        }
        tracing::info!(id, ?patch, "cache configured");
        Ok(())
    }

    /// Turns exclusive levels on or off for a cache: on a level-1 node its clean victims
    /// are demoted to level 2 (`demote`); on a level-2 node it keeps nothing it serves to
    /// reads.
    pub fn set_exclusive(&self, id: CacheId, on: bool) -> Result<(), NodeError> {
        let mode = match (on, self.level) {
            (false, _) => cache::Exclusive::Off,
            (true, 0 | 1) => cache::Exclusive::Upper(self.demoter.sink()),
            (true, _) => cache::Exclusive::Lower,
        };
        tracing::info!(id, mode = mode.name(), "exclusive mode");
        self.cache.set_exclusive(id, mode)?;
        Ok(())
    }

    /// Removes a cache after writing its dirty blocks back (`removeCache`).
    pub fn remove_cache(&self, id: CacheId) -> Result<(), NodeError> {
        self.cache.remove_cache(id)?;
        lock(&self.profilers).remove(&id);
        tracing::info!(id, "cache removed");
        Ok(())
    }

    /// The id of the cache called `name`.
    pub fn cache_id(&self, name: &str) -> Option<CacheId> {
        self.cache
            .caches()
            .into_iter()
            .find(|(_, n)| n == name)
            .map(|(id, _)| id)
    }

    /// Resolves a cache given by name or, if no cache has that name, by id (so a cache
    /// called `"0"` is reached by its name).
    pub fn resolve_cache(&self, key: &str) -> Result<CacheId, NodeError> {
        if let Some(id) = self.cache_id(key) {
            return Ok(id);
        }
        if let Ok(id) = key.parse::<CacheId>() {
            if self.cache.caches().iter().any(|(c, _)| *c == id) {
                return Ok(id);
            }
        }
        Err(NodeError::NotFound(format!(
            "no cache has name or id `{key}`"
        )))
    }

    /// Creates a rule (`createRule`).
    pub fn create_rule(&self, spec: &RuleSpec) -> Result<RuleId, NodeError> {
        let cache = self.resolve_cache(&spec.cache)?;
        let id = self.cache.create_rule(
            Rule {
                client: spec.client.clone(),
                op: spec.op,
                export: spec.export.clone(),
                range: spec.range,
            },
            cache,
        )?;
        tracing::info!(id, ?spec, "rule created");
        Ok(id)
    }

    /// Removes a rule (`removeRule`).
    pub fn remove_rule(&self, id: RuleId) -> Result<(), NodeError> {
        self.cache.remove_rule(id)?;
        Ok(())
    }

    /// Every cache with its counters (`getCacheStats` for all).
    pub fn caches(&self) -> Vec<CacheInfo> {
        self.cache
            .caches()
            .into_iter()
            .filter_map(|(id, name)| self.cache_view(id, name).ok())
            .collect()
    }

    /// One cache with its counters.
    pub fn cache(&self, id: CacheId) -> Result<CacheInfo, NodeError> {
        let name = self
            .cache
            .caches()
            .into_iter()
            .find(|(c, _)| *c == id)
            .map(|(_, n)| n)
            .ok_or(cache::CacheError::UnknownCache(id))?;
        self.cache_view(id, name)
    }

    fn cache_view(&self, id: CacheId, name: String) -> Result<CacheInfo, NodeError> {
        let stats = self.cache.get_cache_stats(id)?;
        let dirty = self.cache.dirty_limits(id)?;
        Ok(CacheInfo {
            id,
            name,
            size_bytes: stats.capacity as u64 * self.cache.block_size() as u64,
            hit_ratio: stats.hit_ratio(),
            stats: stats_info(stats),
            dirty_ratio: dirty.ratio,
            dirty_bytes: dirty.bytes,
            log: self.cache.log(id)?.map(|l| l.base().display().to_string()),
        })
    }

    /// The rules.
    pub fn rules(&self) -> Vec<RuleInfo> {
        self.cache
            .rules()
            .into_iter()
            .map(|(id, rule, cache)| RuleInfo {
                id,
                cache,
                client: rule.client,
                op: rule.op.map(|o| match o {
                    cache::Op::Read => api::node::Op::Read,
                    cache::Op::Write => api::node::Op::Write,
                }),
                export: rule.export,
                range: rule.range,
            })
            .collect()
    }

    /// A cache's hit-ratio curve at `points` sizes up to four times its capacity (or the
    /// windowed curve, recent accesses only); `None` before the cache saw any access (no
    /// data, rather than a made-up curve).
    pub fn curve(
        &self,
        id: CacheId,
        windowed: bool,
        points: usize,
    ) -> Result<Option<HitRatioCurve>, NodeError> {
        let view = self.cache(id)?;
        let p = lock(&self.profilers)
            .get(&id)
            .cloned()
            .ok_or_else(|| NodeError::NotFound(format!("cache {id} has no profiler")))?;
        let points = points.clamp(2, 1000) as u64;
        let top = (view.stats.capacity * 4).max(points);
        let sizes: Vec<u64> = (1..=points).map(|i| top * i / points).collect();
        let mut p = lock(&p);
        if p.accesses() == 0 {
            return Ok(None);
        }
        Ok(Some(if windowed {
            p.windowed_curve(&sizes)
        } else {
            p.curve(&sizes)
        }))
    }

    /// The latency recorder of a tenant (export, client).
    pub fn latency(&self, export: &str, client: &str) -> Arc<Latency> {
        lock(&self.latency)
            .entry((export.to_string(), client.to_string()))
            .or_default()
            .clone()
    }

    /// Every request of `tenant` (its exports' recorders, all clients) in one histogram.
    pub fn tenant_histogram(&self, tenant: &str) -> hdrhistogram::Histogram<u64> {
        let lat: Vec<Arc<Latency>> = lock(&self.latency)
            .iter()
            .filter(|((export, _), _)| self.exports.get(export).is_some_and(|e| e.tenant == tenant))
            .map(|(_, l)| l.clone())
            .collect();
        let mut h = Latency::empty();
        for l in lat {
            l.merge_into(&mut h);
        }
        h
    }

    /// Every tenant that sent a request.
    pub fn tenants(&self) -> Vec<TenantInfo> {
        let lat: Vec<_> = lock(&self.latency)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        lat.into_iter()
            .map(|((export, client), l)| {
                let counters = self
                    .cache
                    .tenant_stats(&export, &client)
                    .unwrap_or_default();
                let lookups = counters.hits + counters.misses;
                TenantInfo {
                    tenant: self
                        .exports
                        .get(&export)
                        .map(|e| e.tenant.clone())
                        .unwrap_or_default(),
                    hit_ratio: if lookups == 0 {
                        0.0
                    } else {
                        counters.hits as f64 / lookups as f64
                    },
                    reads: counters.reads,
                    writes: counters.writes,
                    read_bytes: counters.read_bytes,
                    write_bytes: counters.write_bytes,
                    hits: counters.hits,
                    misses: counters.misses,
                    evictions: counters.evictions,
                    writebacks: counters.writebacks,
                    latency: l.summary(),
                    export,
                    client,
                }
            })
            .collect()
    }

    /// The base of an export's profiled block keys (block `b` is `base | b`), unique on
    /// the node.
    pub fn key_base(&self, export: &str) -> u64 {
        self.export_index.get(export).copied().unwrap_or(0) << KEY_BLOCK_BITS
    }

    /// The tenants owning the exports, by name.
    pub fn tenant_names(&self) -> Vec<String> {
        let mut t: Vec<String> = self.exports.values().map(|e| e.tenant.clone()).collect();
        t.sort();
        t.dedup();
        t
    }

    /// The profiler and latency of `tenant` (made on first use; its range is the tenant's
    /// exports, capped at four times the node's cache).
    pub fn observer(&self, tenant: &str) -> Arc<TenantObserver> {
        let mut m = lock(&self.observers);
        if let Some(o) = m.get(tenant) {
            return o.clone();
        }
        let bs = self.cache.block_size() as u64;
        let blocks: u64 = self
            .exports
            .values()
            .filter(|e| e.tenant == tenant)
            .map(|e| e.size.div_ceil(bs))
            .sum();
        let range = blocks.min(self.cache.total_blocks() as u64 * 4);
        let o = TenantObserver::new(range, &self.phantom_policies).unwrap_or_else(|e| {
            tracing::warn!(tenant, error = %e, "phantom caches not built; profiling LRU only");
            TenantObserver::new(range, &[]).expect("no phantom policies")
        });
        let o = Arc::new(o);
        m.insert(tenant.to_string(), o.clone());
        o
    }

    /// A tenant's counters summed over its exports and clients.
    pub fn tenant_counters(&self, tenant: &str) -> cache::TenantSnapshot {
        let keys: Vec<(String, String)> = lock(&self.latency).keys().cloned().collect();
        let mut sum = cache::TenantSnapshot::default();
        for (export, client) in keys {
            if self.exports.get(&export).is_none_or(|e| e.tenant != tenant) {
                continue;
            }
            let c = self
                .cache
                .tenant_stats(&export, &client)
                .unwrap_or_default();
            sum.reads += c.reads;
            sum.writes += c.writes;
            sum.read_bytes += c.read_bytes;
            sum.write_bytes += c.write_bytes;
            sum.hits += c.hits;
            sum.misses += c.misses;
            sum.evictions += c.evictions;
            sum.writebacks += c.writebacks;
        }
        sum
    }

    /// The cache the rules of `tenant`'s exports route to (the lowest rule id's).
    pub fn cache_of_tenant(&self, tenant: &str) -> Option<CacheId> {
        self.cache
            .rules()
            .into_iter()
            .filter(|(_, r, _)| {
                self.exports
                    .get(&r.export)
                    .is_some_and(|e| e.tenant == tenant)
            })
            .min_by_key(|(id, _, _)| *id)
            .map(|(_, _, c)| c)
    }
}
