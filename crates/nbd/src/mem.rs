//! [`MemExport`]: a sparse in-memory block device for tests and benchmarks.
//!
//! Storage is a map from page number to a 4 KiB page, split over 16 shards by page
//! number, each behind its own `RwLock`, so concurrent requests to different pages rarely
//! contend. Pages never written read as zeroes; trim and write-zeroes drop whole pages and
//! zero the partial ends, so a trimmed range reads back as zeroes. Block status reports
//! pages not held as `HOLE | ZERO` and the rest as data. Memory is "durable" the
//! moment a write returns, so flush and FUA only count calls (see [`MemStats`]), which the
//! tests use to check that flags arrive.
//!
//! Not a cache and not persistent: it is the simplest correct [`Export`].

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use bytes::{Bytes, BytesMut};

use crate::reply::Extent;
use crate::server::{BoxFuture, Capabilities, Export};
use crate::wire::{STATE_HOLE, STATE_ZERO};

const PAGE: usize = 4096;
const SHARDS: usize = 16;

type Page = Box<[u8; PAGE]>;

/// Counters of calls a [`MemExport`] has served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemStats {
    /// Write calls.
    pub writes: u64,
    /// Write and write-zeroes calls with FUA set.
    pub fua: u64,
    /// Flush calls.
    pub flushes: u64,
    /// Trim calls.
    pub trims: u64,
    /// Write-zeroes calls.
    pub write_zeroes: u64,
}

/// A sparse in-memory export of 4 KiB pages.
pub struct MemExport {
    size: u64,
    caps: Capabilities,
    shards: Vec<RwLock<HashMap<u64, Page>>>,
    writes: AtomicU64,
    fua: AtomicU64,
    flushes: AtomicU64,
    trims: AtomicU64,
    write_zeroes: AtomicU64,
}

impl MemExport {
    /// A writable export of `size` bytes supporting every command.
    pub fn new(size: u64) -> Self {
        MemExport {
            size,
            caps: Capabilities::default(),
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            writes: AtomicU64::new(0),
            fua: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            trims: AtomicU64::new(0),
            write_zeroes: AtomicU64::new(0),
        }
    }

    /// Replace the advertised capabilities (e.g. to make the export read-only).
    pub fn with_capabilities(mut self, caps: Capabilities) -> Self {
        self.caps = caps;
        self
    }

    /// Calls served so far.
    pub fn stats(&self) -> MemStats {
        MemStats {
            writes: self.writes.load(Ordering::Relaxed),
            fua: self.fua.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            trims: self.trims.load(Ordering::Relaxed),
            write_zeroes: self.write_zeroes.load(Ordering::Relaxed),
        }
    }

    /// Number of pages currently allocated.
    pub fn resident_pages(&self) -> usize {
        self.shards.iter().map(|s| lock_read(s).len()).sum()
    }

    /// Synchronous read of `len` bytes at `offset` (zeroes where never written).
    pub fn read_sync(&self, offset: u64, len: usize) -> Bytes {
        let mut out = BytesMut::zeroed(len);
        self.read_into(offset, &mut out);
        out.freeze()
    }

    /// Synchronous read of `out.len()` bytes at `offset` into `out`.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) {
        for (page, start, range) in pages(offset, out.len()) {
            let shard = lock_read(&self.shards[shard_of(page)]);
            match shard.get(&page) {
                Some(p) => out[range.clone()].copy_from_slice(&p[start..start + range.len()]),
                None => out[range].fill(0),
            }
        }
    }

    /// Synchronous write of `data` at `offset`.
    pub fn write_sync(&self, offset: u64, data: &[u8]) {
        for (page, start, range) in pages(offset, data.len()) {
            let mut shard = lock_write(&self.shards[shard_of(page)]);
            let p = shard.entry(page).or_insert_with(|| Box::new([0u8; PAGE]));
            p[start..start + range.len()].copy_from_slice(&data[range]);
        }
    }

    /// The `base:allocation` status of `len` bytes at `offset`: pages never written (or
    /// freed by trim or write-zeroes) are holes that read as zeroes, the rest is data.
    pub fn extents_sync(&self, offset: u64, len: usize) -> Vec<Extent> {
        let mut out: Vec<Extent> = Vec::new();
        for (page, _, range) in pages(offset, len) {
            let allocated = lock_read(&self.shards[shard_of(page)]).contains_key(&page);
            let flags = if allocated {
                0
            } else {
                STATE_HOLE | STATE_ZERO
            };
            let n = range.len() as u32;
            match out.last_mut() {
                Some(e) if e.flags == flags => e.length += n,
                _ => out.push(Extent { length: n, flags }),
            }
        }
        out
    }

    /// Synchronous zeroing of `len` bytes at `offset`; whole pages are freed.
    pub fn zero_sync(&self, offset: u64, len: usize) {
        for (page, start, range) in pages(offset, len) {
            let mut shard = lock_write(&self.shards[shard_of(page)]);
            if range.len() == PAGE {
                shard.remove(&page);
            } else if let Some(p) = shard.get_mut(&page) {
                p[start..start + range.len()].fill(0);
            }
        }
    }
}

/// Split `[offset, offset+len)` into (page number, offset in page, range in the buffer).
fn pages(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, std::ops::Range<usize>)> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = offset + done as u64;
        let page = pos / PAGE as u64;
        let start = (pos % PAGE as u64) as usize;
        let n = (PAGE - start).min(len - done);
        let item = (page, start, done..done + n);
        done += n;
        Some(item)
    })
}

fn shard_of(page: u64) -> usize {
    (page as usize) % SHARDS
}

fn lock_read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn lock_write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl Export for MemExport {
    fn size(&self) -> u64 {
        self.size
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn read(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Bytes>> {
        Box::pin(async move { Ok(self.read_sync(offset, len as usize)) })
    }

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        self.read_into(offset, buf);
        Some(Ok(()))
    }

    fn write(&self, offset: u64, data: Bytes, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            self.write_sync(offset, &data);
            self.writes.fetch_add(1, Ordering::Relaxed);
            if fua {
                self.fua.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    }

    fn flush(&self) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            self.flushes.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    }

    fn trim(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            self.zero_sync(offset, len as usize);
            self.trims.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    }

    fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            self.zero_sync(offset, len as usize);
            self.write_zeroes.fetch_add(1, Ordering::Relaxed);
            if fua {
                self.fua.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    }

    fn block_status(&self, offset: u64, len: u32) -> BoxFuture<'_, io::Result<Vec<Extent>>> {
        Box::pin(async move { Ok(self.extents_sync(offset, len as usize)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sparse_pages_and_zeroing() {
        let m = MemExport::new(1 << 20);
        assert_eq!(&m.read_sync(100, 10)[..], &[0u8; 10]);
        m.write_sync(4090, &[7u8; 20]);
        assert_eq!(m.resident_pages(), 2);
        assert_eq!(&m.read_sync(4088, 4)[..], &[0, 0, 7, 7]);
        m.zero_sync(4096, 4096);
        assert_eq!(m.resident_pages(), 1);
        assert_eq!(&m.read_sync(4090, 20)[..6], &[7u8; 6]);
        assert_eq!(&m.read_sync(4090, 20)[6..], &[0u8; 14]);
    }

    proptest! {
        #[test]
        fn matches_a_flat_model(ops in prop::collection::vec((0u64..20_000, 1usize..9000, any::<u8>(), any::<bool>()), 1..40)) {
            let size = 32 * 1024u64;
            let m = MemExport::new(size);
            let mut model = vec![0u8; size as usize];
            for (off, len, byte, zero) in ops {
                let len = len.min((size - off) as usize);
                if zero {
                    m.zero_sync(off, len);
                    model[off as usize..off as usize + len].fill(0);
                } else {
                    m.write_sync(off, &vec![byte; len]);
                    model[off as usize..off as usize + len].fill(byte);
                }
            }
            prop_assert_eq!(&m.read_sync(0, size as usize)[..], &model[..]);
            // Block status covers the range exactly, and never calls data a hole.
            let ext = m.extents_sync(0, size as usize);
            prop_assert_eq!(ext.iter().map(|e| e.length as u64).sum::<u64>(), size);
            let mut at = 0usize;
            for e in ext {
                let part = &model[at..at + e.length as usize];
                if e.flags & STATE_ZERO != 0 {
                    prop_assert!(part.iter().all(|&b| b == 0));
                }
                at += e.length as usize;
            }
        }
    }
}
