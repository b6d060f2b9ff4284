//! The control plane of a node's caches (Moirai's API): exports registered and removed,
//! caches created, configured (size, eviction, write policy, admission, dirty limits) and
//! removed, rules created and removed, and the counters read. Every call takes the control
//! mutex, so the capacity sum is checked and changed atomically; calls that change routing
//! also take the routing table for writing (see the parent module's locking).

use super::{read_lock, CacheConfig, CacheEntry, CacheNode, Export};
use crate::backend::Backend;
use crate::error::{CacheError, Result};
use crate::ids::{CacheId, RuleId};
use crate::partition::{CachePartition, DirtyLimits};
use crate::rules::{Entry, RoutingRule, RuleTable};
use crate::stats::{AccessObserver, CacheStats, TenantSnapshot};
use crate::volume::{lock, Volume, BLOCK_BITS};
use crate::write_policy::WritePolicy;
use policy::EvictionSpec;
use std::sync::{Arc, RwLock};

impl CacheNode {
    /// Registers an export served by `backend`.
    pub fn add_export(&self, name: &str, backend: Arc<dyn Backend>) -> Result<()> {
        let _c = lock(&self.control);
        let mut r = self.write_routing();
        if r.exports.contains_key(name) {
            return Err(CacheError::ExportExists(name.into()));
        }
        if backend.size() / self.block_size as u64 >= 1 << BLOCK_BITS {
            return Err(CacheError::Invalid(format!(
                "export `{name}` has more than 2^{BLOCK_BITS} blocks"
            )));
        }
        let vol = self
            .volumes
            .add(|id| Volume::new(id, name, backend, self.block_size));
        r.exports.insert(
            name.into(),
            Export {
                vol,
                tenants: RwLock::default(),
            },
        );
        Ok(())
    }

    /// Unregisters an export no rule names.
    pub fn remove_export(&self, name: &str) -> Result<()> {
        let _c = lock(&self.control);
        let mut r = self.write_routing();
        let ex = r
            .exports
            .get(name)
            .ok_or_else(|| CacheError::UnknownExport(name.into()))?;
        let rules = r.rules.of_vol(ex.vol.id()).len();
        if rules > 0 {
            return Err(CacheError::ExportInUse {
                export: name.into(),
                rules,
            });
        }
        let id = ex.vol.id();
        r.exports.remove(name);
        self.volumes.remove(id);
        Ok(())
    }

    /// Creates a cache of `size` blocks (Moirai's `createCache`).
    pub fn create_cache(
        &self,
        name: &str,
        size: usize,
        eviction: &EvictionSpec,
        write_policy: WritePolicy,
    ) -> Result<CacheId> {
        let mut c = lock(&self.control);
        if size == 0 {
            return Err(CacheError::ZeroSize);
        }
        let available = self.total_blocks - Self::allocated(&read_lock(&self.routing));
        if size > available {
            return Err(CacheError::Oversized {
                requested: size,
                available,
                total: self.total_blocks,
            });
        }
        let id = c.next_cache;
        let part = CachePartition::new(
            id,
            size,
            self.block_size,
            eviction,
            write_policy,
            self.volumes.clone(),
        )?;
        c.next_cache += 1;
        self.write_routing().caches.insert(
            id,
            CacheEntry {
                name: name.into(),
                part: Arc::new(part),
            },
        );
        Ok(id)
    }

    /// Removes a cache and the rules that name it, writing its dirty blocks back first.
    /// If they cannot be written the cache stays, with its data, and the error is
    /// [`CacheError::DirtyUnwritable`].
    pub fn remove_cache(&self, id: CacheId) -> Result<()> {
        let _c = lock(&self.control);
        let part = self.partition(id)?;
        let unwritable = |e: CacheError| CacheError::DirtyUnwritable {
            cache: id,
            blocks: part.dirty_blocks(),
            reason: e.to_string(),
        };
        part.write_back(None).map_err(unwritable)?;
        let mut r = self.write_routing();
        part.write_back(None).map_err(unwritable)?;
        if let Some(log) = part.log() {
            // Every logged write is on the backends once they flush; then the log goes.
            Self::flush_exports(&r, &log.exports(true)).map_err(unwritable)?;
            log.remove_all()
                .map_err(|e| crate::partition::log_err(&log, e))?;
            part.set_log(None);
        }
        for rule in r.rules.of_cache(id) {
            r.rules.remove(rule);
        }
        r.caches.remove(&id);
        Ok(())
    }

    /// Changes a cache online (Moirai's `configureCache`). Every setting is checked before
    /// any is applied (the eviction spec was checked when it was parsed).
    pub fn configure_cache(&self, id: CacheId, config: CacheConfig) -> Result<()> {
        let _c = lock(&self.control);
        let part = self.partition(id)?;
        if let Some(size) = config.size {
            if size == 0 {
                return Err(CacheError::ZeroSize);
            }
            let others = Self::allocated(&read_lock(&self.routing)) - part.capacity();
            let available = self.total_blocks - others;
            if size > available {
                return Err(CacheError::Oversized {
                    requested: size,
                    available,
                    total: self.total_blocks,
                });
            }
        }
        if let Some(d) = &config.dirty {
            d.check()?;
        }
        if let Some(wp) = config.write_policy {
            part.set_write_policy(wp)?;
        }
        if let Some(d) = config.dirty {
            part.set_dirty_limits(d)?;
        }
        if let Some(spec) = &config.eviction {
            part.switch_policy(spec)?;
        }
        if let Some(a) = config.admission {
            part.set_admission(a)?;
        }
        if let Some(size) = config.size {
            part.resize(size)?;
        }
        Ok(())
    }

    /// Routes requests matching `rule` to `cache` (Moirai's `createRule`).
    pub fn create_rule(&self, rule: RoutingRule, cache: CacheId) -> Result<RuleId> {
        let mut c = lock(&self.control);
        let mut r = self.write_routing();
        if !r.caches.contains_key(&cache) {
            return Err(CacheError::UnknownCache(cache));
        }
        let vol = r
            .exports
            .get(&rule.export)
            .ok_or_else(|| CacheError::UnknownExport(rule.export.clone()))?
            .vol
            .clone();
        let blocks = RuleTable::blocks_of(&rule, self.block_size as u64, vol.size())?;
        r.rules.check(vol.id(), &rule, cache, &blocks)?;
        let id = c.next_rule;
        c.next_rule += 1;
        r.rules.insert(
            vol.id(),
            Entry {
                id,
                rule,
                cache,
                blocks,
            },
        );
        Ok(id)
    }

    /// Removes a rule; blocks no longer routed to its cache are written back and dropped.
    pub fn remove_rule(&self, id: RuleId) -> Result<()> {
        let _c = lock(&self.control);
        let mut r = self.write_routing();
        let (vol_id, entry) = r.rules.remove(id).ok_or(CacheError::UnknownRule(id))?;
        let orphaned = r.rules.orphaned(vol_id, &entry);
        let (Some(vol), Some(c)) = (self.volumes.get(vol_id), r.caches.get(&entry.cache)) else {
            return Ok(());
        };
        for range in orphaned {
            if let Err(e) = c.part.drop_blocks(&vol, range.start, range.end) {
                // Keep the rule so the blocks stay reachable; the caller may retry.
                r.rules.insert(vol_id, entry);
                return Err(e);
            }
        }
        // Writes to the blocks no longer routed here bypass the cache's log from now on,
        // so its older records must never be replayed over them: checkpoint it now.
        if let Err(e) = Self::checkpoint_with(&r, &c.part) {
            r.rules.insert(vol_id, entry);
            return Err(e);
        }
        Ok(())
    }

    /// The rules, as `(id, rule, cache)`.
    pub fn rules(&self) -> Vec<(RuleId, RoutingRule, CacheId)> {
        read_lock(&self.routing)
            .rules
            .all()
            .map(|e| (e.id, e.rule.clone(), e.cache))
            .collect()
    }

    /// The caches, as `(id, name)`.
    pub fn caches(&self) -> Vec<(CacheId, String)> {
        read_lock(&self.routing)
            .caches
            .iter()
            .map(|(&id, c)| (id, c.name.clone()))
            .collect()
    }

    /// A cache's counters (Moirai's `getCacheStats`).
    pub fn get_cache_stats(&self, id: CacheId) -> Result<CacheStats> {
        Ok(self.partition(id)?.stats())
    }

    /// A tenant's counters (zero if it never sent a request).
    pub fn tenant_stats(&self, export: &str, client: &str) -> Result<TenantSnapshot> {
        let r = read_lock(&self.routing);
        let ex = r
            .exports
            .get(export)
            .ok_or_else(|| CacheError::UnknownExport(export.into()))?;
        let t = read_lock(&ex.tenants);
        Ok(t.get(client).map(|s| s.snapshot()).unwrap_or_default())
    }

    /// Sets a cache's exclusive mode (see `partition::Exclusive`).
    pub fn set_exclusive(&self, id: CacheId, mode: crate::Exclusive) -> Result<()> {
        self.partition(id)?.set_exclusive(mode);
        Ok(())
    }

    /// Plugs an online profiler into a cache (`None` unplugs it).
    pub fn set_observer(
        &self,
        id: CacheId,
        observer: Option<Box<dyn AccessObserver>>,
    ) -> Result<()> {
        self.partition(id)?.set_observer(observer);
        Ok(())
    }

    /// The sum of the caches' capacities in blocks.
    pub fn allocated_blocks(&self) -> usize {
        Self::allocated(&read_lock(&self.routing))
    }

    /// Attaches a durable write log to a cache (`None` detaches it); see
    /// [`crate::write_log`].
    pub fn set_log(&self, id: CacheId, log: Option<Arc<crate::write_log::WriteLog>>) -> Result<()> {
        self.partition(id)?.set_log(log);
        Ok(())
    }

    /// A cache's durable write log, if it has one.
    pub fn log(&self, id: CacheId) -> Result<Option<Arc<crate::write_log::WriteLog>>> {
        Ok(self.partition(id)?.log())
    }

    /// A cache's dirty limits.
    pub fn dirty_limits(&self, id: CacheId) -> Result<DirtyLimits> {
        Ok(self.partition(id)?.dirty_limits())
    }
}
