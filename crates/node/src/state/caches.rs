//! The node's caches and rules through its verbs (`createCache`, `configureCache`,
//! `removeCache`, `createRule`, `removeRule`, `getCacheStats`): each request's names,
//! sizes and policies checked and turned into the cache crate's calls, and the caches,
//! rules and curves as the API shows them. A cache's curve is its tenant's, from the
//! tenant's one profiler ([`crate::observe`]).

use super::{lock, ControlPlane};
use crate::config::{CacheSpec, RuleSpec};
use crate::error::NodeError;
use api::node::{CacheInfo, CachePatch, RuleInfo};
use cache::{CacheConfig, CacheId, CacheStats, RoutingRule, RuleId, WritePolicy};
use mrc::HitRatioCurve;
use policy::EvictionSpec;

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

impl ControlPlane {
    /// Creates a cache (`createCache`), with its profiler if asked. A durable write log
    /// left by an earlier run is replayed and must reach the backends (see
    /// [`ControlPlane::create_cache_at_start`] for the start's caches).
    pub fn create_cache(&self, spec: &CacheSpec) -> Result<CacheId, NodeError> {
        self.create(spec, false)
    }

    /// [`ControlPlane::create_cache`] for a cache of the node's configuration, before the
    /// start replays the recovery file: a write log whose records the backend refuses
    /// goes into that file instead of failing the start.
    pub(crate) fn create_cache_at_start(&self, spec: &CacheSpec) -> Result<CacheId, NodeError> {
        self.create(spec, true)
    }

    fn create(&self, spec: &CacheSpec, at_start: bool) -> Result<CacheId, NodeError> {
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
            if let Err(e) = self.open_log(id, &path, at_start) {
                let _ = self.cache.remove_cache(id);
                return Err(e);
            }
        }
        if spec.profile {
            lock(&self.profiled).insert(id);
        }
        tracing::info!(id, name = %spec.name, blocks, eviction = %spec.eviction, "cache created");
        Ok(id)
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
        if let Some(wp) = write_policy.filter(|wp| *wp != WritePolicy::ReadOnly) {
            self.check_writable(id, wp)?;
        }
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
        lock(&self.profiled).remove(&id);
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
        if let (Some((start, end)), Some(e)) = (spec.range, self.export(&spec.export)) {
            if start >= end || end > e.size {
                return Err(NodeError::Invalid(format!(
                    "range: [{start}, {end}) is not a non-empty range within export `{}` of {} bytes",
                    spec.export, e.size
                )));
            }
        }
        let id = self.cache.create_rule(
            RoutingRule {
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

    /// Refuses a writing policy `wp` for cache `id` while a rule routes a read-only export
    /// to it: its backend takes no writes, so the policy could not be honoured.
    fn check_writable(&self, id: CacheId, wp: WritePolicy) -> Result<(), NodeError> {
        let ro = self.cache.rules().into_iter().find_map(|(_, r, c)| {
            (c == id && self.export(&r.export).is_some_and(|e| e.read_only)).then_some(r.export)
        });
        match ro {
            Some(export) => Err(NodeError::Invalid(format!(
                "write_policy: `{}` needs a backend that takes writes, and export `{export}` \
                 routed to this cache is read-only (use `read-only`)",
                wp.name()
            ))),
            None => Ok(()),
        }
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
    /// windowed curve, recent accesses only): the LRU curve of the tenant whose exports'
    /// rules route to it. `None` before that tenant's first access, or while no rule
    /// routes to the cache (no data, rather than a made-up curve). A cache that several
    /// tenants share has no one tenant's curve: that is a conflict naming them (each
    /// tenant's curves are in the observations).
    pub fn curve(
        &self,
        id: CacheId,
        windowed: bool,
        points: usize,
    ) -> Result<Option<HitRatioCurve>, NodeError> {
        let view = self.cache(id)?;
        if !lock(&self.profiled).contains(&id) {
            return Err(NodeError::NotFound(format!("cache {id} has no profiler")));
        }
        let tenants = self.tenants_of_cache(id);
        let observer = match tenants.as_slice() {
            [] => return Ok(None),
            [t] => self.observer(t),
            several => {
                return Err(NodeError::Conflict(format!(
                    "cache `{}` serves tenants {}: its curve is not one tenant's; each \
                     tenant's curves are in GET /v1/observations",
                    view.name,
                    several.join(", ")
                )))
            }
        };
        let Some(observer) = observer else {
            return Ok(None);
        };
        let points = points.clamp(2, 1000) as u64;
        let top = (view.stats.capacity * 4).max(points);
        let sizes: Vec<u64> = (1..=points).map(|i| top * i / points).collect();
        Ok(observer.lru_curve(&sizes, windowed))
    }
}
