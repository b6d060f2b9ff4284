//! The programmable cache of a node (Moirai's API): caches are created, configured and
//! removed online, rules route requests to them, and the data path splits every request
//! into per-block runs by rule.
//!
//! ## Locking
//! One `RwLock` (the *routing table*: exports, caches, rules) is read-held by every data
//! request for its whole duration and write-held by rule changes, cache creation and
//! removal, and export registration. Holding it across the request is what makes rule
//! changes safe: when a rule is removed, no request that was routed by it is still
//! running, so its blocks can be written back and dropped without racing a write.
//! Resize, policy switch and write-policy change do not touch routing: they work on the
//! partition while requests keep flowing (see `partition`). A control mutex serialises
//! control calls so the capacity sum is checked and changed atomically.
//!
//! ## Capacity
//! The node has a total cache size in blocks; the caches' capacities never sum to more.
//! Creating or growing a cache past it fails with the number of blocks still free.
//!
//! ## Durable write logs
//! A cache may have a durable write log (`crate::write_log`): every write and trim it
//! applies is logged before the call returns. The cleaner thread checkpoints a log once it
//! holds [`LOG_CHECKPOINT_BYTES`] or its cache is clean ([`CacheNode::checkpoint_logs`]);
//! removing a rule checkpoints its cache's log (writes no longer routed there bypass it),
//! removing a cache deletes its log after the final write-back and flush.
//!
//! ## Removal
//! `remove_cache` writes the cache's dirty blocks back once while requests still run, then
//! takes the routing table, removes the cache's rules, writes back what was dirtied
//! meanwhile, and drops the cache. `remove_rule` writes back and drops the blocks that no
//! longer belong to the cache, so a cache only ever holds blocks some rule routes to it.

use crate::backend::Backend;
use crate::error::{CacheError, Result};
use crate::ids::{CacheId, RuleId};
use crate::partition::{DirtyLimits, Lent, Partition, Route};
use crate::rules::{Entry, Op, Rule, RuleTable, Target};
use crate::stats::{AccessObserver, CacheStats, OpOutcome, TenantSnapshot, TenantStats};
use crate::volume::{lock, Volume, VolumeTable, BLOCK_BITS};
use crate::write_policy::WritePolicy;
use policy::{AdmissionPolicy, EvictionSpec};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

/// Bytes a durable write log grows to before the cleaner checkpoints it.
pub const LOG_CHECKPOINT_BYTES: u64 = 64 << 20;

/// Changes to one cache; `None` leaves a setting as it is.
#[derive(Default)]
pub struct CacheConfig {
    /// New capacity in blocks (shrinking writes back evicted dirty blocks).
    pub size: Option<usize>,
    /// New eviction policy (switched by reconstruction).
    pub eviction: Option<EvictionSpec>,
    /// New write policy (leaving write-back writes dirty blocks back first).
    pub write_policy: Option<WritePolicy>,
    /// New admission policy.
    pub admission: Option<Box<dyn AdmissionPolicy>>,
    /// New dirty limits (see `partition::DirtyLimits`).
    pub dirty: Option<DirtyLimits>,
}

struct Export {
    vol: Arc<Volume>,
    tenants: RwLock<FxHashMap<String, Arc<TenantStats>>>,
}

struct CacheEntry {
    name: String,
    part: Arc<Partition>,
}

#[derive(Default)]
struct Routing {
    exports: FxHashMap<String, Export>,
    caches: BTreeMap<CacheId, CacheEntry>,
    rules: RuleTable,
}

#[derive(Default)]
struct Control {
    next_cache: CacheId,
    next_rule: RuleId,
}

/// A node's caches, rules and data path.
pub struct CacheNode {
    block_size: usize,
    total_blocks: usize,
    volumes: Arc<VolumeTable>,
    routing: RwLock<Routing>,
    control: Mutex<Control>,
    /// A recovery file replayed at start, not settled yet (see [`crate::recovery`]).
    recovery: Mutex<Option<crate::recovery::Pending>>,
}

fn read_lock<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

impl CacheNode {
    /// A node with `total_blocks` blocks of cache of `block_size` bytes.
    pub fn new(total_blocks: usize, block_size: usize) -> Result<Self> {
        if block_size == 0 {
            return Err(CacheError::Invalid("block size must be positive".into()));
        }
        Ok(CacheNode {
            block_size,
            total_blocks,
            volumes: Arc::default(),
            routing: RwLock::default(),
            control: Mutex::default(),
            recovery: Mutex::default(),
        })
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Total cache size in blocks.
    pub fn total_blocks(&self) -> usize {
        self.total_blocks
    }

    fn write_routing(&self) -> std::sync::RwLockWriteGuard<'_, Routing> {
        self.routing.write().unwrap_or_else(|e| e.into_inner())
    }

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

    fn allocated(r: &Routing) -> usize {
        r.caches.values().map(|c| c.part.capacity()).sum()
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
        let part = Partition::new(
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

    fn partition(&self, id: CacheId) -> Result<Arc<Partition>> {
        read_lock(&self.routing)
            .caches
            .get(&id)
            .map(|c| c.part.clone())
            .ok_or(CacheError::UnknownCache(id))
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

    /// Flushes the backends of the exports called `names` (unknown ones are skipped).
    fn flush_exports(r: &Routing, names: &[String]) -> Result<()> {
        for n in names {
            if let Some(ex) = r.exports.get(n) {
                ex.vol.backend().flush().map_err(|e| ex.vol.io_err(e))?;
            }
        }
        Ok(())
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

    /// Checkpoints a cache's durable write log: starts a new generation, writes every
    /// dirty block back, flushes the backends of the exports the older generations name
    /// and deletes those. `Ok(false)` if the cache has no log.
    pub fn checkpoint(&self, id: CacheId) -> Result<bool> {
        let r = read_lock(&self.routing);
        let part = Self::part_of(&r, id)?;
        Self::checkpoint_with(&r, part)
    }

    fn checkpoint_with(r: &Routing, part: &Partition) -> Result<bool> {
        let Some(log) = part.log() else {
            return Ok(false);
        };
        let gen = log
            .rotate()
            .map_err(|e| crate::partition::log_err(&log, e))?;
        part.write_back(None)?;
        Self::flush_exports(r, &log.exports(false))?;
        log.retire(gen)
            .map_err(|e| crate::partition::log_err(&log, e))?;
        Ok(true)
    }

    /// Checkpoints every durable write log that holds `threshold` bytes or more since its
    /// last checkpoint, or holds anything while its cache has no dirty block (so a log
    /// shrinks soon after cleaning). Returns how many were checkpointed; failures are
    /// retried on the next call.
    pub fn checkpoint_logs(&self, threshold: u64) -> usize {
        let r = read_lock(&self.routing);
        let mut n = 0;
        for c in r.caches.values() {
            let Some(log) = c.part.log() else { continue };
            let (bytes, older) = log.pending();
            let idle = c.part.dirty_blocks() == 0 && (bytes > 0 || older);
            if (bytes >= threshold || idle) && Self::checkpoint_with(&r, &c.part).is_ok() {
                n += 1;
            }
        }
        n
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
    pub fn create_rule(&self, rule: Rule, cache: CacheId) -> Result<RuleId> {
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
    pub fn rules(&self) -> Vec<(RuleId, Rule, CacheId)> {
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

    /// A demotion from the level above: inserts the whole blocks of `data` (bytes of
    /// `export` at `offset`) clean into the cache a read rule routes each block to
    /// (whatever the client), without writing the backend
    /// ([`Partition::insert_clean`]). Blocks no read rule routes to a cache are skipped.
    pub fn insert_clean(
        &self,
        export: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<crate::DemoteOutcome> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, data.len() as u64)?;
        let vol = &*ex.vol;
        let mut out = crate::DemoteOutcome::default();
        if data.is_empty() {
            return Ok(out);
        }
        let bs = self.block_size as u64;
        let rules = r.rules.of_vol(vol.id());
        let (first, last) = (offset / bs, (offset + data.len() as u64 - 1) / bs);
        let cache_of = |b: u64| {
            rules
                .iter()
                .find(|e| e.blocks.contains(&b) && e.rule.op != Some(Op::Write))
                .map(|e| e.cache)
        };
        let mut b = first;
        while b <= last {
            let target = cache_of(b);
            let mut e = b + 1;
            while e <= last && cache_of(e) == target {
                e += 1;
            }
            let lo = (b * bs).max(offset);
            let hi = (e * bs).min(offset + data.len() as u64);
            let part = &data[(lo - offset) as usize..(hi - offset) as usize];
            match target {
                Some(c) => {
                    let o = Self::part_of(&r, c)?.insert_clean(vol, lo, part)?;
                    out.inserted += o.inserted;
                    out.refreshed += o.refreshed;
                    out.skipped += o.skipped;
                }
                None => out.skipped += e - b,
            }
            b = e;
        }
        Ok(out)
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

    /// Every dirty block of every cache, for a recovery file ([`crate::recovery`]).
    pub fn dirty_data(&self) -> Vec<crate::DirtyBlock> {
        let parts: Vec<Arc<Partition>> = read_lock(&self.routing)
            .caches
            .values()
            .map(|c| c.part.clone())
            .collect();
        let mut out = Vec::new();
        for p in parts {
            for (key, mut data) in p.dirty_data() {
                let Some(vol) = self.volumes.of_key(key) else {
                    continue;
                };
                let b = key & ((1u64 << BLOCK_BITS) - 1);
                data.truncate(vol.block_len(b));
                out.push(crate::DirtyBlock {
                    export: vol.name().to_string(),
                    offset: b * self.block_size as u64,
                    data,
                });
            }
        }
        out
    }

    /// Background cleaning: every cache past its low dirty watermark writes dirty blocks
    /// back, at most `budget` blocks each (see `partition::DirtyLimits`). Returns the
    /// blocks written; failures are counted in each cache's `writeback_errors`.
    pub fn clean(&self, budget: usize) -> u64 {
        let parts: Vec<Arc<Partition>> = read_lock(&self.routing)
            .caches
            .values()
            .map(|c| c.part.clone())
            .collect();
        parts.iter().map(|p| p.clean(budget).unwrap_or(0)).sum()
    }

    /// Run [`CacheNode::clean`] on a thread of its own every `every` (sooner while it
    /// finds work) until the node is dropped.
    pub fn spawn_cleaner(
        node: &Arc<CacheNode>,
        every: std::time::Duration,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let weak = Arc::downgrade(node);
        std::thread::Builder::new()
            .name("cache-clean".into())
            .spawn(move || loop {
                let Some(node) = weak.upgrade() else { return };
                let written = node.clean(1024);
                node.checkpoint_logs(LOG_CHECKPOINT_BYTES);
                drop(node);
                if written == 0 {
                    std::thread::sleep(every);
                }
            })
    }

    fn export<'a>(r: &'a Routing, name: &str, offset: u64, len: u64) -> Result<&'a Export> {
        let ex = r
            .exports
            .get(name)
            .ok_or_else(|| CacheError::UnknownExport(name.into()))?;
        let size = ex.vol.size();
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(CacheError::OutOfRange {
                export: name.into(),
                offset,
                len,
                size,
            });
        }
        Ok(ex)
    }

    /// Calls `f(offset, len, target)` for each maximal run of blocks of the request that
    /// go to one target.
    fn for_each_run(
        r: &Routing,
        vol: &Volume,
        client: &str,
        op: Op,
        offset: u64,
        len: u64,
        mut f: impl FnMut(u64, u64, Target) -> Result<()>,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let rules = r.rules.of_vol(vol.id());
        if rules.is_empty() {
            return f(offset, len, Target::Direct);
        }
        let bs = vol.block_size() as u64;
        let end = offset + len;
        let (first, last) = (offset / bs, (end - 1) / bs);
        let mut run_start = offset;
        let mut cur = RuleTable::target(rules, client, op, first);
        for b in first + 1..=last {
            let t = RuleTable::target(rules, client, op, b);
            if t != cur {
                f(run_start, b * bs - run_start, cur)?;
                run_start = b * bs;
                cur = t;
            }
        }
        f(run_start, end - run_start, cur)
    }

    fn part_of(r: &Routing, id: CacheId) -> Result<&Partition> {
        r.caches
            .get(&id)
            .map(|c| &*c.part)
            .ok_or(CacheError::UnknownCache(id))
    }

    fn record(ex: &Export, client: &str, write: bool, bytes: u64, o: OpOutcome) {
        if let Some(t) = read_lock(&ex.tenants).get(client) {
            t.record(write, bytes, o);
            return;
        }
        let mut w = ex.tenants.write().unwrap_or_else(|e| e.into_inner());
        w.entry(client.into()).or_default().record(write, bytes, o);
    }

    /// Reads like [`CacheNode::read`] but only if the request goes to one cache and every
    /// block is in memory, so it needs no backend I/O; `Ok(false)` (nothing read, nothing
    /// counted) otherwise. The node serves such hits inline instead of handing them to a
    /// blocking thread.
    pub fn read_if_resident(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool> {
        let copied =
            self.with_resident(export, client, offset, buf.len(), |lent| lent.copy_to(buf))?;
        Ok(copied.is_some())
    }

    /// Like [`CacheNode::read_if_resident`], lending `f` the data in the cache's memory
    /// instead of copying it ([`Partition::with_resident`]: `f` runs under the partition's
    /// lock and must not block); `Ok(None)` when it cannot (`f` not called).
    pub fn with_resident<R>(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        len: usize,
        f: impl FnOnce(Lent<'_>) -> R,
    ) -> Result<Option<R>> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len as u64)?;
        let vol = &*ex.vol;
        let mut runs = 0;
        let mut target = Target::Direct;
        Self::for_each_run(&r, vol, client, Op::Read, offset, len as u64, |_, _, t| {
            runs += 1;
            target = t;
            Ok(())
        })?;
        let Target::Cached(c) = target else {
            return Ok(None);
        };
        if runs != 1 {
            return Ok(None);
        }
        match Self::part_of(&r, c)?.with_resident(vol, offset, len, f) {
            Some((value, out)) => {
                Self::record(ex, client, false, len as u64, out);
                Ok(Some(value))
            }
            None => Ok(None),
        }
    }

    /// Reads `buf.len()` bytes of `export` at `offset` for `client`.
    pub fn read(&self, export: &str, client: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_outcome(export, client, offset, buf).map(|_| ())
    }

    /// Reads like [`CacheNode::read`] and says how many blocks were found in memory and
    /// how many were not (the node splits its latency by it).
    pub fn read_outcome(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<OpOutcome> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, buf.len() as u64)?;
        let vol = &*ex.vol;
        let mut out = OpOutcome::default();
        let bs = self.block_size as u64;
        Self::for_each_run(
            &r,
            vol,
            client,
            Op::Read,
            offset,
            buf.len() as u64,
            |off, n, t| {
                let dst = &mut buf[(off - offset) as usize..(off - offset + n) as usize];
                match t {
                    Target::Cached(c) => {
                        out.add(Self::part_of(&r, c)?.read(vol, off, dst, Route::Cached)?)
                    }
                    Target::Coherent(c) => {
                        Self::part_of(&r, c)?.read(vol, off, dst, Route::Coherent)?;
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                    Target::Direct => {
                        vol.backend().read_at(off, dst).map_err(|e| vol.io_err(e))?;
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                }
                Ok(())
            },
        )?;
        Self::record(ex, client, false, buf.len() as u64, out);
        Ok(out)
    }

    /// Writes `data` to `export` at `offset` for `client`; with `fua` it returns only once
    /// the data is durable on the backend.
    pub fn write(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<()> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, data.len() as u64)?;
        let vol = &*ex.vol;
        let mut out = OpOutcome::default();
        let bs = self.block_size as u64;
        Self::for_each_run(
            &r,
            vol,
            client,
            Op::Write,
            offset,
            data.len() as u64,
            |off, n, t| {
                let src = &data[(off - offset) as usize..(off - offset + n) as usize];
                match t {
                    Target::Cached(c) => {
                        out.add(Self::part_of(&r, c)?.write(vol, off, src, fua, Route::Cached)?)
                    }
                    Target::Coherent(c) => {
                        Self::part_of(&r, c)?.write(vol, off, src, fua, Route::Coherent)?;
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                    Target::Direct => {
                        vol.backend()
                            .write_at(off, src)
                            .map_err(|e| vol.io_err(e))?;
                        if fua {
                            vol.backend().flush().map_err(|e| vol.io_err(e))?;
                        }
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                }
                Ok(())
            },
        )?;
        Self::record(ex, client, true, data.len() as u64, out);
        drop(r);
        if fua && self.recovery_names(export) {
            // A FUA write is durable once acknowledged: the recovery file must not hold
            // older bytes of it by then (see `crate::recovery`).
            self.flush(export)?;
        }
        Ok(())
    }

    /// Makes every acknowledged write to `export` durable: writes back the dirty blocks of
    /// the export held by any cache, then flushes the backend.
    pub fn flush(&self, export: &str) -> Result<()> {
        self.flush_parallel(export, 1)
    }

    /// [`CacheNode::flush`] writing the dirty blocks back in `workers` parallel batches
    /// (see [`Partition::write_back_parallel`]); a stop uses it to bound its time.
    pub fn flush_parallel(&self, export: &str, workers: usize) -> Result<()> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, 0, 0)?;
        let mut caches: Vec<CacheId> = r
            .rules
            .of_vol(ex.vol.id())
            .iter()
            .map(|e| e.cache)
            .collect();
        caches.sort_unstable();
        caches.dedup();
        for c in caches {
            Self::part_of(&r, c)?.write_back_parallel(Some(&ex.vol), workers)?;
        }
        ex.vol.backend().flush().map_err(|e| ex.vol.io_err(e))?;
        drop(r);
        self.settle_recovery(export)
    }

    /// Hands the cache node a recovery file replayed at start whose blocks are not known
    /// to be durable yet; from now on a successful flush of an export drops that export's
    /// blocks from the file before it returns (see [`crate::recovery`]).
    pub fn adopt_recovery(&self, pending: crate::recovery::Pending) {
        *lock(&self.recovery) = (!pending.blocks().is_empty()).then_some(pending);
    }

    /// The blocks of the adopted recovery file not settled yet.
    pub fn pending_recovery(&self) -> Vec<crate::DirtyBlock> {
        lock(&self.recovery)
            .as_ref()
            .map(|p| p.blocks().to_vec())
            .unwrap_or_default()
    }

    /// Writes the recovery file at `path` with `blocks` (removes it when there are none)
    /// and forgets the adopted one, under the lock that settling takes, so a flush still
    /// running (one left behind by a stop's deadline) cannot rewrite the file meanwhile
    /// or afterwards.
    pub fn keep_recovery(
        &self,
        path: &std::path::Path,
        blocks: &[crate::DirtyBlock],
    ) -> std::io::Result<()> {
        self.keep_recovery_in(path, blocks, None)
    }

    /// [`CacheNode::keep_recovery`], writing the file into `space` (a file of allocated
    /// blocks, see [`crate::recovery::write_into`]) when there is one.
    pub fn keep_recovery_in(
        &self,
        path: &std::path::Path,
        blocks: &[crate::DirtyBlock],
        space: Option<&std::path::Path>,
    ) -> std::io::Result<()> {
        let mut g = lock(&self.recovery);
        if blocks.is_empty() {
            crate::recovery::remove(path)?;
        } else {
            crate::recovery::write_into(path, blocks, space)?;
        }
        *g = None;
        Ok(())
    }

    /// Whether the adopted recovery file still holds blocks of `export`.
    fn recovery_names(&self, export: &str) -> bool {
        lock(&self.recovery)
            .as_ref()
            .is_some_and(|p| p.names(export))
    }

    /// After a successful flush of `export`: drops its blocks from the recovery file.
    fn settle_recovery(&self, export: &str) -> Result<()> {
        let mut g = lock(&self.recovery);
        let Some(p) = g.as_mut() else {
            return Ok(());
        };
        p.settle(export).map_err(|e| CacheError::Io {
            export: export.to_string(),
            source: std::io::Error::new(
                e.kind(),
                format!(
                    "the data is on the backend, but the recovery file {} could not be updated: {e}",
                    p.path().display()
                ),
            ),
        })?;
        if p.blocks().is_empty() {
            *g = None;
        }
        Ok(())
    }

    /// Whether a write of `len` bytes at `offset` of `export` by `client` would be
    /// recorded in a durable write log (every block goes to a cache that has one).
    pub fn logged(&self, export: &str, client: &str, offset: u64, len: u64) -> Result<bool> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len)?;
        let mut all = true;
        Self::for_each_run(&r, &ex.vol, client, Op::Write, offset, len, |_, _, t| {
            all &= match t {
                Target::Cached(c) | Target::Coherent(c) => Self::part_of(&r, c)?.log().is_some(),
                Target::Direct => false,
            };
            Ok(())
        })?;
        Ok(all)
    }

    /// The allocation of `[offset, offset + len)` of `export` as seen through the caches:
    /// consecutive runs from `offset`, each `(length, hole)`, where a hole is unallocated
    /// on the backend ([`Backend::allocation`]) and no cache holds newer bytes of it, so
    /// it reads as zeros. Blocks a cache holds dirty (not yet written back) are always
    /// allocated; clean ones hold what the backend holds. The caches are asked before the
    /// backend, so a block written back meanwhile is found on one or the other. The runs
    /// may stop short of `len`.
    pub fn block_status(&self, export: &str, offset: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len)?;
        let vol = &*ex.vol;
        if len == 0 {
            return Ok(Vec::new());
        }
        let bs = self.block_size as u64;
        let (first, end) = (offset / bs, (offset + len).div_ceil(bs));
        let mut held: Vec<u64> = r
            .caches
            .values()
            .flat_map(|c| c.part.unwritten_blocks(vol, first, end))
            .collect();
        held.sort_unstable();
        held.dedup();
        let runs = vol
            .backend()
            .allocation(offset, len)
            .map_err(|e| vol.io_err(e))?;
        // Split each hole around the held blocks inside it.
        let mut out: Vec<(u64, bool)> = Vec::with_capacity(runs.len());
        let mut push = |n: u64, hole: bool| match out.last_mut() {
            Some(last) if last.1 == hole => last.0 += n,
            _ if n > 0 => out.push((n, hole)),
            _ => {}
        };
        let mut at = offset;
        let mut next = 0; // first held block not yet passed
        for (n, hole) in runs {
            let stop = at + n;
            if !hole {
                push(n, false);
                at = stop;
                continue;
            }
            while next < held.len() && (held[next] + 1) * bs <= at {
                next += 1;
            }
            while at < stop {
                match held.get(next) {
                    Some(&b) if b * bs < stop => {
                        let (bstart, bend) = ((b * bs).max(at), ((b + 1) * bs).min(stop));
                        push(bstart - at, true);
                        push(bend - bstart, false);
                        at = bend;
                        if (b + 1) * bs <= bend {
                            next += 1;
                        }
                    }
                    _ => {
                        push(stop - at, true);
                        at = stop;
                    }
                }
            }
        }
        Ok(out)
    }

    /// Discards the whole blocks of `[offset, offset + len)` of `export`; they read back
    /// as zeros. Partial blocks at the ends are left alone.
    pub fn trim(&self, export: &str, client: &str, offset: u64, len: u64) -> Result<()> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len)?;
        let vol = &*ex.vol;
        let bs = self.block_size as u64;
        Self::for_each_run(
            &r,
            vol,
            client,
            Op::Write,
            offset,
            len,
            |off, n, t| match t {
                Target::Cached(c) | Target::Coherent(c) => Self::part_of(&r, c)?.trim(vol, off, n),
                Target::Direct => {
                    let blocks = vol.whole_blocks(off, n);
                    if blocks.is_empty() {
                        return Ok(());
                    }
                    let start = blocks.start * bs;
                    let stop = (blocks.end * bs).min(vol.size());
                    vol.backend()
                        .trim(start, stop - start)
                        .map_err(|e| vol.io_err(e))
                }
            },
        )
    }
}
