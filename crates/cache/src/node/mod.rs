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
//!
//! ## Files
//! This file holds the node's state (the routing table, the control mutex) and the
//! helpers every path shares: finding an export and checking a request's range, splitting
//! a request into runs by rule, counting a tenant's request. `control.rs` is the control
//! plane (exports, caches, rules, counters), `data.rs` the data path (read, write, flush,
//! trim, allocation status, demotions), `durability.rs` write logs, cleaning and recovery
//! files.

use crate::error::{CacheError, Result};
use crate::ids::{CacheId, RuleId};
use crate::partition::{CachePartition, DirtyLimits};
use crate::rules::{Op, RuleTable, Target};
use crate::stats::{OpOutcome, TenantStats};
use crate::volume::{Volume, VolumeTable};
use crate::write_policy::WritePolicy;
use policy::{AdmissionPolicy, EvictionSpec};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

mod control;
mod data;
mod durability;

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
    part: Arc<CachePartition>,
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

    fn allocated(r: &Routing) -> usize {
        r.caches.values().map(|c| c.part.capacity()).sum()
    }

    fn partition(&self, id: CacheId) -> Result<Arc<CachePartition>> {
        read_lock(&self.routing)
            .caches
            .get(&id)
            .map(|c| c.part.clone())
            .ok_or(CacheError::UnknownCache(id))
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

    fn part_of(r: &Routing, id: CacheId) -> Result<&CachePartition> {
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
}
