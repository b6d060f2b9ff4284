//! Counters of partitions and tenants, and the hook for an online profiler.
//!
//! A partition keeps plain counters inside its lock (`Counters`); a snapshot is a
//! [`CacheStats`]. Per-tenant counters ([`TenantStats`], keyed by export and client in the
//! node) are atomics, updated once per request from the [`OpOutcome`] a partition returns.
//! A hit is a block found in memory (resident, or waiting in the write-back table); a
//! miss is a block looked up and not found. Bytes count what the client asked for.
//!
//! [`AccessObserver`] is where a profiler may see every key a partition looks up, under
//! the partition's lock (the node profiles each tenant at its NBD face instead, once per
//! block, and plugs none in).

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Sees every block key a partition looks up (for online hit-ratio curves).
pub trait AccessObserver: Send {
    /// One lookup of `key`.
    fn observe(&mut self, key: u64);
}

/// Counters of one partition (kept under its lock).
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub hits: u64,
    pub misses: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub evictions: u64,
    pub writebacks: u64,
    pub writeback_errors: u64,
    pub coherent_ops: u64,
    pub demoted: u64,
    pub demote_dropped: u64,
    pub demote_skipped: u64,
    pub demoted_in: u64,
    pub demote_refreshed: u64,
    pub dropped_on_read: u64,
}

/// A snapshot of one partition's state and counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Capacity in blocks.
    pub capacity: usize,
    /// Resident blocks.
    pub resident: usize,
    /// Resident dirty blocks.
    pub dirty: usize,
    /// Evicted dirty blocks whose write-back has not completed.
    pub writing_back: usize,
    /// Eviction policy name, canonical ([`policy::EvictionSpec::name`]: `lru` whether
    /// `LRU` or ` lru` was given).
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
    /// Requests that matched no rule but touched blocks this cache holds (served
    /// coherently, not counted as hits or misses).
    pub coherent_ops: u64,
    /// Exclusive mode (`off`, `upper`: clean victims are demoted, `lower`: blocks served
    /// to reads are dropped; see `partition::Exclusive`).
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

impl CacheStats {
    /// Hits per lookup (0 without lookups).
    pub fn hit_ratio(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// What one data-path call did, for per-tenant accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpOutcome {
    /// Blocks found in memory.
    pub hits: u64,
    /// Blocks not found.
    pub misses: u64,
    /// Blocks evicted to make room.
    pub evictions: u64,
    /// Dirty blocks written to the backend by this call.
    pub writebacks: u64,
}

impl OpOutcome {
    pub(crate) fn add(&mut self, o: OpOutcome) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.evictions += o.evictions;
        self.writebacks += o.writebacks;
    }
}

/// Counters of one tenant (an export as used by one client).
#[derive(Debug, Default)]
pub struct TenantStats {
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    writebacks: AtomicU64,
}

/// A snapshot of a tenant's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenantSnapshot {
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
}

impl std::ops::AddAssign for TenantSnapshot {
    /// Sums two tenants' counters (a tenant's over its exports and clients).
    fn add_assign(&mut self, o: TenantSnapshot) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.hits += o.hits;
        self.misses += o.misses;
        self.evictions += o.evictions;
        self.writebacks += o.writebacks;
    }
}

impl TenantStats {
    /// Adds one request.
    pub fn record(&self, write: bool, bytes: u64, o: OpOutcome) {
        let r = Ordering::Relaxed;
        if write {
            self.writes.fetch_add(1, r);
            self.write_bytes.fetch_add(bytes, r);
        } else {
            self.reads.fetch_add(1, r);
            self.read_bytes.fetch_add(bytes, r);
        }
        if o.hits > 0 {
            self.hits.fetch_add(o.hits, r);
        }
        if o.misses > 0 {
            self.misses.fetch_add(o.misses, r);
        }
        if o.evictions > 0 {
            self.evictions.fetch_add(o.evictions, r);
        }
        if o.writebacks > 0 {
            self.writebacks.fetch_add(o.writebacks, r);
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> TenantSnapshot {
        let r = Ordering::Relaxed;
        TenantSnapshot {
            reads: self.reads.load(r),
            writes: self.writes.load(r),
            read_bytes: self.read_bytes.load(r),
            write_bytes: self.write_bytes.load(r),
            hits: self.hits.load(r),
            misses: self.misses.load(r),
            evictions: self.evictions.load(r),
            writebacks: self.writebacks.load(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_sum_field_by_field() {
        let a = TenantStats::default();
        a.record(
            false,
            4096,
            OpOutcome {
                hits: 1,
                ..OpOutcome::default()
            },
        );
        a.record(
            true,
            8192,
            OpOutcome {
                misses: 2,
                writebacks: 1,
                ..OpOutcome::default()
            },
        );
        let mut sum = a.snapshot();
        sum += a.snapshot();
        assert_eq!(
            sum,
            TenantSnapshot {
                reads: 2,
                writes: 2,
                read_bytes: 8192,
                write_bytes: 16384,
                hits: 2,
                misses: 4,
                evictions: 0,
                writebacks: 2,
            }
        );
    }
}
