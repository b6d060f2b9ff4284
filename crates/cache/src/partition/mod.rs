//! A partition: one cache of fixed-size blocks with its own capacity, eviction policy,
//! optional admission policy and write policy, safe to use from many threads.
//!
//! This module holds the type, its construction, accessors and stats; the rest is split by
//! what it does:
//! * `store`: the in-memory state under the lock — the slot store (the arena of block
//!   data, per-slot metadata), dirty tracking and the write-back table, the fill table of
//!   in-flight read misses;
//! * `read`: the read path (hits lent or copied, misses filled from the backend);
//! * `write`: the three write paths (write-back, write-through, write-around) and trim;
//! * `write_back`: writing dirty blocks to the backend (after eviction, on FLUSH/FUA, on
//!   demand);
//! * `dirty`: dirty limits, background cleaning, throttling writers near the limit;
//! * `control`: resize, policy switch, admission and write-policy changes, dropping
//!   blocks a rule no longer routes here;
//! * `demote`: exclusive levels — clean victims handed to a demote sink, blocks inserted
//!   clean by a demotion, reads that do not keep what they serve.
//!
//! The submodules depend on `store` and `write_back`, never on each other otherwise;
//! `store` depends on none of its siblings.
//!
//! ## Layout
//! [`policy::BlockCache`] does the bookkeeping (directory key → [`Slot`](policy::Slot),
//! the policy, the LRU history for switching by reconstruction). The data of slot `s`
//! lives at `arena[s * block_size ..]` in one `Vec<u8>` that grows on demand up to
//! capacity × block size, so a hit costs a lock, one hash probe per block (the slot found
//! is the one whose hit is counted, [`BlockCache::access_slot`]) and one `memcpy`, with no
//! allocation. Each slot has a dirty bit and a version (bumped on every change of its
//! bytes). The partition never holds more blocks than its capacity once a call returns
//! (`BlockCache`'s invariant).
//!
//! ## Concurrency
//! One mutex per partition guards the `BlockCache` and all metadata; it is never held
//! across backend I/O. Three side tables make that safe:
//! * **write-back table** (`key → bytes`): a dirty block that is evicted (by a miss, a
//!   shrink, admission declining a write) moves here under the lock and is written to the
//!   backend after the lock is released. Reads and partial writes consult it before the
//!   backend, so the data is never invisible. A block is resident, or in this table, or
//!   neither — never both (a write to a block in the table takes its bytes into a new slot).
//! * **fill table** (`key → (readers, generation)`): a read miss registers here, reads the
//!   backend outside the lock, and installs the block only if the generation did not change
//!   meanwhile. Every write, trim or invalidation of a block bumps its generation, so a
//!   fill that raced with a write never installs stale bytes (it may still return them:
//!   the read overlapped the write, so either value is correct).
//! * **block locks** (striped mutexes of the [`Volume`](crate::volume::Volume)): every
//!   backend *write* of a block (write-through, write-around, write-back of a dirty
//!   block, trim) holds the block's stripe from before the backend call until the
//!   metadata update after it, so backend writes of one block happen in the order the
//!   cache sees them. A write-back takes its
//!   bytes from the table or the slot *while holding the stripe*, so it always writes the
//!   newest bytes and an older write-back can never land after a newer one. Write-back
//!   writes that only touch memory take no stripe. Evicted blocks are written back after
//!   the request has released its own stripes (no lock-order cycles).

mod control;
mod demote;
mod dirty;
mod exclusive;
mod read;
mod store;
mod write;
mod write_back;

pub use demote::DemoteOutcome;
pub use dirty::DirtyLimits;
pub use exclusive::{DemoteSink, Exclusive};
pub use read::Lent;
pub(crate) use write::log_err;

use crate::error::{CacheError, Result};
use crate::stats::{AccessObserver, CacheStats, Counters};
use crate::volume::{lock, Volume, VolumeTable, BLOCK_BITS};
use crate::write_policy::WritePolicy;
use policy::{BlockCache, EvictionSpec, Key};
use rustc_hash::{FxHashMap, FxHashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use store::Store;

/// How a request reaches a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// A rule sent it here: it is counted, the policy sees it, and it may be cached.
    Cached,
    /// It matched no rule but its blocks may be held here: it is served coherently (memory
    /// copies are read, writes go around), without accounting or placement.
    Coherent,
}

struct Inner {
    bc: BlockCache,
    st: Store,
}

/// Byte range of block `b` that a request `[offset, offset + len)` covers: the offset in
/// the block and the range in the request's buffer.
#[inline]
fn seg(b: u64, offset: u64, len: usize, bs: u64) -> (usize, Range<usize>) {
    let bstart = b * bs;
    let s = offset.max(bstart);
    let e = (offset + len as u64).min(bstart + bs);
    (
        (s - bstart) as usize,
        (s - offset) as usize..(e - offset) as usize,
    )
}

fn block_of(key: Key) -> u64 {
    key & ((1u64 << BLOCK_BITS) - 1)
}

/// One cache: capacity, policies, data, dirty tracking and write-back.
pub struct CachePartition {
    id: u64,
    bs: usize,
    volumes: Arc<VolumeTable>,
    inner: Mutex<Inner>,
    /// The durable write log, if the cache has one (see `crate::write_log`).
    log: std::sync::RwLock<Option<Arc<crate::write_log::WriteLog>>>,
}

impl CachePartition {
    /// A partition of `capacity` blocks of `block_size` bytes evicting by the policy
    /// `eviction`. `volumes` resolves the export of an evicted key.
    pub fn new(
        id: u64,
        capacity: usize,
        block_size: usize,
        eviction: &EvictionSpec,
        write_policy: WritePolicy,
        volumes: Arc<VolumeTable>,
    ) -> Result<Self> {
        if block_size == 0 {
            return Err(CacheError::Invalid("block size must be positive".into()));
        }
        let policy = eviction.build()?;
        Ok(CachePartition {
            id,
            bs: block_size,
            volumes: volumes.clone(),
            inner: Mutex::new(Inner {
                bc: BlockCache::new(capacity, policy).with_history(),
                st: Store {
                    bs: block_size,
                    arena: Vec::new(),
                    meta: Vec::new(),
                    dirty: FxHashSet::default(),
                    wb: FxHashMap::default(),
                    fills: FxHashMap::default(),
                    next_seq: 0,
                    stats: Counters::default(),
                    write_policy,
                    eviction: eviction.clone(),
                    observer: None,
                    lent_runs: Vec::new(),
                    lent_slots: Vec::new(),
                    dirty_limits: DirtyLimits::default(),
                    clean_debt: 0.0,
                    exclusive: Exclusive::Off,
                    vols: volumes,
                },
            }),
            log: std::sync::RwLock::new(None),
        })
    }

    /// The cache id this partition was created with.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Capacity in blocks.
    pub fn capacity(&self) -> usize {
        lock(&self.inner).bc.capacity()
    }

    /// Resident blocks.
    pub fn len(&self) -> usize {
        lock(&self.inner).bc.len()
    }

    /// Whether no block is resident.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The write policy.
    pub fn write_policy(&self) -> WritePolicy {
        lock(&self.inner).st.write_policy
    }

    /// Dirty blocks in memory (resident or waiting for write-back).
    pub fn dirty_blocks(&self) -> usize {
        let g = lock(&self.inner);
        g.st.dirty.len() + g.st.wb.len()
    }

    /// A snapshot of state and counters.
    pub fn stats(&self) -> CacheStats {
        let g = lock(&self.inner);
        let c = &g.st.stats;
        CacheStats {
            capacity: g.bc.capacity(),
            resident: g.bc.len(),
            dirty: g.st.dirty.len(),
            writing_back: g.st.wb.len(),
            eviction: g.st.eviction.name().into(),
            admission: g.bc.admission().map_or("demand".into(), |a| a.name()),
            write_policy: g.st.write_policy.name().into(),
            hits: c.hits,
            misses: c.misses,
            read_bytes: c.read_bytes,
            write_bytes: c.write_bytes,
            evictions: c.evictions,
            writebacks: c.writebacks,
            writeback_errors: c.writeback_errors,
            coherent_ops: c.coherent_ops,
            exclusive: g.st.exclusive.name().into(),
            demoted: c.demoted,
            demote_dropped: c.demote_dropped,
            demote_skipped: c.demote_skipped,
            demoted_in: c.demoted_in,
            demote_refreshed: c.demote_refreshed,
            dropped_on_read: c.dropped_on_read,
        }
    }

    /// Installs (or removes) the observer that sees every looked-up key.
    pub fn set_observer(&self, observer: Option<Box<dyn AccessObserver>>) {
        lock(&self.inner).st.observer = observer;
    }

    /// The blocks `first..end` of `vol` whose newest bytes this partition holds and the
    /// backend may not have yet: dirty resident blocks and those waiting in the
    /// write-back table, unsorted. A block missing here has its newest acknowledged bytes
    /// on the backend (a write-back writes before it marks the block clean or lets go).
    pub fn unwritten_blocks(&self, vol: &Volume, first: u64, end: u64) -> Vec<u64> {
        let g = lock(&self.inner);
        g.keys_in(vol, first, end)
            .into_iter()
            .filter(|k| match g.bc.lookup(*k) {
                Some(s) => g.st.meta[s as usize].dirty,
                None => true, // in the write-back table
            })
            .map(block_of)
            .collect()
    }

    /// Whether `key` is resident (tests and diagnostics).
    pub fn contains(&self, key: Key) -> bool {
        lock(&self.inner).bc.lookup(key).is_some()
    }
}
