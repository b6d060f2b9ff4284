//! Volumes: the cache's view of one export's backend.
//!
//! A [`Volume`] gives each export a small id, so a block's cache key is
//! `volume_id << 40 | block_number` (2^40 blocks per export, 2^24 exports), and owns the
//! export's *block locks*: a fixed array of striped mutexes that serialise every operation
//! that writes one block to the backend (write-through, write-around, write-back of a
//! dirty block, trim) and every fill that reads one from it into the cache (a read miss,
//! the old bytes of a partial write-back write). Fills used to read without them, relying
//! on generation counts alone; the stress test then saw, about once in ten runs, a block
//! read back older than a read just before it while a write of it was in flight. Holding the stripe of a block across the backend write and the
//! metadata update that follows is what keeps the backend and the cache in the same order
//! for one block. Stripes are per export, not per partition, so the ordering holds no
//! matter which partition the block is cached in. Lock order: routing table, then stripes
//! (ascending, one export at a time), then a partition's lock.
//!
//! The [`VolumeTable`] maps ids back to volumes, so a partition that evicts a dirty block
//! of any export can find where to write it.

use crate::backend::Backend;
use crate::error::{CacheError, Result};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Bits of a key that hold the block number.
pub const BLOCK_BITS: u32 = 40;
const STRIPES: usize = 256;

/// Locks `m`, ignoring poisoning (a panicked holder cannot leave a `()` inconsistent, and
/// the cache's own state is updated only in short, non-panicking sections).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One export as the cache sees it.
pub struct Volume {
    id: u32,
    name: String,
    backend: Arc<dyn Backend>,
    size: u64,
    block_size: usize,
    stripes: Box<[Mutex<()>]>,
}

impl Volume {
    /// A volume over `backend` (its size is read once, here).
    pub fn new(
        id: u32,
        name: impl Into<String>,
        backend: Arc<dyn Backend>,
        block_size: usize,
    ) -> Self {
        let size = backend.size();
        Volume {
            id,
            name: name.into(),
            backend,
            size,
            block_size,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// The volume id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The export name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Block size in bytes.
    pub fn block_size(&self) -> usize {
        self.block_size
    }
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The backend.
    pub fn backend(&self) -> &dyn Backend {
        &*self.backend
    }
    /// Number of blocks (the last may be partial).
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(self.block_size as u64)
    }
    /// Cache key of `block`.
    #[inline]
    pub fn key(&self, block: u64) -> u64 {
        (u64::from(self.id) << BLOCK_BITS) | block
    }
    /// Bytes of `block` that exist on the backend (`block_size` except for a partial last
    /// block).
    #[inline]
    pub fn block_len(&self, block: u64) -> usize {
        let start = block * self.block_size as u64;
        (self.size - start).min(self.block_size as u64) as usize
    }

    pub(crate) fn io_err(&self, source: std::io::Error) -> CacheError {
        CacheError::Io {
            export: self.name.clone(),
            source,
        }
    }

    /// Reads blocks `first..` into `buf` (a multiple of the block size); bytes past the
    /// end of the volume are zeros.
    pub(crate) fn read_blocks(&self, first: u64, buf: &mut [u8]) -> Result<()> {
        let off = first * self.block_size as u64;
        let n = (buf.len() as u64).min(self.size - off) as usize;
        buf[n..].fill(0);
        self.backend
            .read_at(off, &mut buf[..n])
            .map_err(|e| self.io_err(e))
    }

    /// Writes one whole block (clipped to the volume's end).
    pub(crate) fn write_block(&self, block: u64, data: &[u8]) -> Result<()> {
        let n = self.block_len(block);
        self.backend
            .write_at(block * self.block_size as u64, &data[..n])
            .map_err(|e| self.io_err(e))
    }

    #[inline]
    fn stripe_of(block: u64) -> usize {
        (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % STRIPES
    }

    /// Locks the stripe of one block.
    pub(crate) fn lock_block(&self, block: u64) -> MutexGuard<'_, ()> {
        lock(&self.stripes[Self::stripe_of(block)])
    }

    /// Locks the stripe of one block if no one holds it (never blocks, so it may be
    /// called under a partition's lock).
    pub(crate) fn try_lock_block(&self, block: u64) -> Option<MutexGuard<'_, ()>> {
        match self.stripes[Self::stripe_of(block)].try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Locks the stripes of blocks `first..=last`, in ascending stripe order.
    pub(crate) fn lock_blocks(&self, first: u64, last: u64) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = if last - first >= STRIPES as u64 {
            (0..STRIPES).collect()
        } else {
            (first..=last).map(Self::stripe_of).collect()
        };
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| lock(&self.stripes[i])).collect()
    }
}

/// Volume id to volume.
#[derive(Default)]
pub struct VolumeTable {
    vols: RwLock<Vec<Option<Arc<Volume>>>>,
}

impl VolumeTable {
    /// The volume of `key`, if registered.
    pub fn of_key(&self, key: u64) -> Option<Arc<Volume>> {
        self.get((key >> BLOCK_BITS) as u32)
    }
    /// The volume with `id`.
    pub fn get(&self, id: u32) -> Option<Arc<Volume>> {
        let v = self.vols.read().unwrap_or_else(|e| e.into_inner());
        v.get(id as usize).cloned().flatten()
    }
    /// Registers a volume built by `make(id)` with the lowest free id.
    pub fn add(&self, make: impl FnOnce(u32) -> Volume) -> Arc<Volume> {
        let mut v = self.vols.write().unwrap_or_else(|e| e.into_inner());
        let id = v.iter().position(|x| x.is_none()).unwrap_or(v.len());
        let vol = Arc::new(make(id as u32));
        if id == v.len() {
            v.push(Some(vol.clone()));
        } else {
            v[id] = Some(vol.clone());
        }
        vol
    }
    /// Unregisters `id`.
    pub fn remove(&self, id: u32) {
        let mut v = self.vols.write().unwrap_or_else(|e| e.into_inner());
        if let Some(x) = v.get_mut(id as usize) {
            *x = None;
        }
    }
}

impl Volume {
    /// The whole blocks inside `[offset, offset + len)`; a partial last block of the
    /// volume counts as whole when the range reaches the volume's end.
    pub fn whole_blocks(&self, offset: u64, len: u64) -> Range<u64> {
        let bs = self.block_size as u64;
        let end_byte = offset + len;
        let first = offset.div_ceil(bs);
        let end = if end_byte >= self.size {
            self.blocks()
        } else {
            end_byte / bs
        };
        first..end.max(first)
    }
}
