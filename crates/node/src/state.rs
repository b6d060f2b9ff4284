//! The node's control plane: the [`cache::CacheNode`] plus what the node adds around it —
//! cache names, online profilers, per-tenant latency histograms and exports' owners.
//!
//! Every API verb and every start-up step from `node.toml` goes through [`NodeState`], so
//! the file and the API can never disagree about what a verb does. Data-path requests go
//! to `cache::CacheNode` directly (see `export`); this module only adds latency timing.

use crate::config::{CacheSpec, RuleSpec};
use crate::hot_tier::HotTier;
use crate::latency::Latency;
use crate::NodeError;
use cache::{
    AccessObserver, CacheConfig, CacheId, CacheNode, CacheStats, Rule, RuleId, WritePolicy,
};
use mrc::profiler::OnlineProfiler;
use mrc::HitRatioCurve;
use policy::EvictionSpec;
use serde::Serialize;
use std::collections::BTreeMap;
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

/// A change to a cache through the API; absent fields stay.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachePatch {
    /// New capacity (bytes, or a string with a unit).
    #[serde(default)]
    pub size: Option<crate::units::ByteSize>,
    /// New eviction policy (switched online by reconstruction), checked when parsed.
    #[serde(default)]
    pub eviction: Option<EvictionSpec>,
    /// New write policy.
    #[serde(default)]
    pub write_policy: Option<String>,
    /// New admission policy spec.
    #[serde(default)]
    pub admission: Option<String>,
}

/// One cache as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct CacheView {
    /// Id.
    pub id: CacheId,
    /// Name.
    pub name: String,
    /// Bytes of capacity.
    pub size_bytes: u64,
    /// Counters and settings.
    pub stats: CacheStats,
    /// Hits per lookup.
    pub hit_ratio: f64,
}

/// One rule as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct RuleView {
    /// Id.
    pub id: RuleId,
    /// Cache id.
    pub cache: CacheId,
    /// What it matches.
    #[serde(flatten)]
    pub rule: Rule,
}

/// One tenant (export, client) as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct TenantView {
    /// Export.
    pub export: String,
    /// Owning tenant of the export.
    pub tenant: String,
    /// Client address.
    pub client: String,
    /// Counters from the cache.
    #[serde(flatten)]
    pub counters: cache::TenantSnapshot,
    /// Hits per block lookup at this node's level.
    pub hit_ratio: f64,
    /// Latency summary.
    pub latency: crate::latency::LatencySummary,
}

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
    /// Bandwidth shares between tenants (unlimited when the node sets no bandwidth).
    pub bandwidth: crate::share::Share,
}

impl NodeState {
    /// A node with `total_blocks` blocks of `block_size` bytes and no exports yet.
    pub fn new(
        total_blocks: usize,
        block_size: usize,
        level: u8,
        bandwidth: u64,
    ) -> Result<Self, NodeError> {
        Ok(NodeState {
            cache: Arc::new(CacheNode::new(total_blocks, block_size)?),
            level,
            started: Instant::now(),
            exports: BTreeMap::new(),
            hot_tiers: BTreeMap::new(),
            profilers: Mutex::default(),
            latency: Mutex::default(),
            bandwidth: crate::share::Share::new(bandwidth),
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
        if spec.name.is_empty() {
            return Err(NodeError::Invalid("name: must not be empty".into()));
        }
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

    /// Changes a cache online (`configureCache`).
    pub fn configure_cache(&self, id: CacheId, patch: &CachePatch) -> Result<(), NodeError> {
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
        self.cache.configure_cache(
            id,
            CacheConfig {
                size,
                eviction: patch.eviction.clone(),
                write_policy,
                admission,
                dirty: None,
            },
        )?;
        tracing::info!(id, ?patch, "cache configured");
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

    /// Resolves a cache given by id or name.
    pub fn resolve_cache(&self, key: &str) -> Result<CacheId, NodeError> {
        if let Ok(id) = key.parse::<CacheId>() {
            if self.cache.caches().iter().any(|(c, _)| *c == id) {
                return Ok(id);
            }
        }
        self.cache_id(key)
            .ok_or_else(|| NodeError::NotFound(format!("no cache has id or name `{key}`")))
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
    pub fn caches(&self) -> Vec<CacheView> {
        self.cache
            .caches()
            .into_iter()
            .filter_map(|(id, name)| self.cache_view(id, name).ok())
            .collect()
    }

    /// One cache with its counters.
    pub fn cache(&self, id: CacheId) -> Result<CacheView, NodeError> {
        let name = self
            .cache
            .caches()
            .into_iter()
            .find(|(c, _)| *c == id)
            .map(|(_, n)| n)
            .ok_or(cache::CacheError::UnknownCache(id))?;
        self.cache_view(id, name)
    }

    fn cache_view(&self, id: CacheId, name: String) -> Result<CacheView, NodeError> {
        let stats = self.cache.get_cache_stats(id)?;
        Ok(CacheView {
            id,
            name,
            size_bytes: stats.capacity as u64 * self.cache.block_size() as u64,
            hit_ratio: stats.hit_ratio(),
            stats,
        })
    }

    /// The rules.
    pub fn rules(&self) -> Vec<RuleView> {
        self.cache
            .rules()
            .into_iter()
            .map(|(id, rule, cache)| RuleView { id, cache, rule })
            .collect()
    }

    /// A cache's hit-ratio curve at `points` sizes up to four times its capacity (or the
    /// windowed curve, recent accesses only).
    pub fn curve(
        &self,
        id: CacheId,
        windowed: bool,
        points: usize,
    ) -> Result<HitRatioCurve, NodeError> {
        let view = self.cache(id)?;
        let p = lock(&self.profilers)
            .get(&id)
            .cloned()
            .ok_or_else(|| NodeError::NotFound(format!("cache {id} has no profiler")))?;
        let points = points.clamp(2, 1000) as u64;
        let top = (view.stats.capacity as u64 * 4).max(points);
        let sizes: Vec<u64> = (1..=points).map(|i| top * i / points).collect();
        let p = lock(&p);
        Ok(if windowed {
            p.windowed_curve(&sizes)
        } else {
            p.curve(&sizes)
        })
    }

    /// The latency recorder of a tenant (export, client).
    pub fn latency(&self, export: &str, client: &str) -> Arc<Latency> {
        lock(&self.latency)
            .entry((export.to_string(), client.to_string()))
            .or_default()
            .clone()
    }

    /// Every tenant that sent a request.
    pub fn tenants(&self) -> Vec<TenantView> {
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
                TenantView {
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
                    counters,
                    latency: l.summary(),
                    export,
                    client,
                }
            })
            .collect()
    }
}
