//! Write-back of a partition: writing dirty blocks (from the write-back table or dirty
//! resident slots, see `store`) to the backend — evicted ones after the request that
//! evicted them, covered ones on FUA, all of them on flush, on leaving write-back and
//! before blocks leave the partition.
//!
//! Every backend write of a block holds the block's stripe, and takes its bytes (from the
//! table or the slot) while holding it, so it always writes the newest bytes; sequence
//! numbers and slot versions tell whether the bytes written are still the newest
//! afterwards, and only then is the block marked clean. A failed write leaves the data
//! where it was, to be retried by the next flush.

use super::{block_of, CachePartition};
use crate::error::{CacheError, Result};
use crate::volume::{lock, Volume, BLOCK_BITS};
use policy::{Key, Slot};
use std::sync::Arc;

impl CachePartition {
    /// Writes the newest in-memory dirty copy of `block` (write-back table first, else a
    /// dirty resident slot) to the backend. The caller holds the block's stripe. Returns
    /// whether anything was written.
    pub(super) fn settle(&self, vol: &Volume, block: u64) -> Result<bool> {
        let key = vol.key(block);
        enum Src {
            Table(Arc<[u8]>, u64),
            Slot(Slot, u64, Vec<u8>),
        }
        let src = {
            let g = lock(&self.inner);
            if let Some(e) = g.st.wb.get(&key) {
                Src::Table(e.data.clone(), e.seq)
            } else if let Some(s) = g.bc.lookup(key) {
                let m = g.st.meta[s as usize];
                if !m.dirty {
                    return Ok(false);
                }
                Src::Slot(s, m.version, g.st.block(s).to_vec())
            } else {
                return Ok(false);
            }
        };
        let res = match &src {
            Src::Table(d, _) => vol.write_block(block, d),
            Src::Slot(_, _, d) => vol.write_block(block, d),
        };
        let mut g = lock(&self.inner);
        if let Err(e) = res {
            g.st.stats.writeback_errors += 1;
            return Err(e);
        }
        g.st.stats.writebacks += 1;
        match src {
            Src::Table(_, seq) => {
                if g.st.wb.get(&key).map(|e| e.seq) == Some(seq) {
                    g.st.wb.remove(&key);
                }
            }
            Src::Slot(s, version, _) => {
                if g.bc.lookup(key) == Some(s) && g.st.meta[s as usize].version == version {
                    g.st.set_dirty(s, key, false);
                }
            }
        }
        Ok(true)
    }

    /// Writes back evicted dirty blocks. Errors leave the data in the write-back table (it
    /// is retried by the next flush) and are returned as the first one seen.
    pub(super) fn drain(&self, victims: Vec<Key>) -> (u64, Option<CacheError>) {
        let mut n = 0;
        let mut first_err = None;
        for key in victims {
            let Some(vol) = self.volumes.of_key(key) else {
                continue;
            };
            let b = block_of(key);
            let _g = vol.lock_block(b);
            match self.settle(&vol, b) {
                Ok(w) => n += u64::from(w),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        (n, first_err)
    }

    /// The dirty keys of `vol` (or of every volume), in ascending order: a volume's
    /// blocks by offset, so a write-back reaches the backend as one sweep (a disk seeks
    /// once, not once a block, as for the hash order they are kept in).
    fn dirty_keys_of(&self, vol: Option<&Volume>) -> Vec<Key> {
        let g = lock(&self.inner);
        let want = |k: &Key| vol.is_none_or(|v| k >> BLOCK_BITS == u64::from(v.id()));
        let mut keys: Vec<Key> =
            g.st.dirty
                .iter()
                .chain(g.st.wb.keys())
                .copied()
                .filter(want)
                .collect();
        drop(g);
        keys.sort_unstable();
        keys
    }

    /// Writes back the blocks of `keys`, one after another; the blocks written, the
    /// volumes written to, and the first error (the blocks after it are not tried).
    fn settle_keys(&self, keys: &[Key]) -> (u64, Vec<Arc<Volume>>, Option<CacheError>) {
        let mut written = 0;
        let mut vols: Vec<Arc<Volume>> = Vec::new();
        for &key in keys {
            let Some(v) = self.volumes.of_key(key) else {
                continue;
            };
            let b = block_of(key);
            let _g = v.lock_block(b);
            match self.settle(&v, b) {
                Ok(true) => {
                    written += 1;
                    if !vols.iter().any(|x| x.id() == v.id()) {
                        vols.push(v.clone());
                    }
                }
                Ok(false) => {}
                Err(e) => return (written, vols, Some(e)),
            }
        }
        (written, vols, None)
    }

    /// Writes every dirty block of `vol` (or of every volume) to its backend and flushes
    /// the backends written to. Returns the number of blocks written.
    pub fn write_back(&self, vol: Option<&Volume>) -> Result<u64> {
        self.write_back_parallel(vol, 1)
    }

    /// [`CachePartition::write_back`] with the dirty blocks split into `workers` batches written
    /// back at once, each on a thread of its own (so a slow backend costs one write's time
    /// per batch position, not per block). Every batch runs to its end or its first error;
    /// the first error is returned after all have finished, and the backends are flushed
    /// only if none failed.
    pub fn write_back_parallel(&self, vol: Option<&Volume>, workers: usize) -> Result<u64> {
        let keys = self.dirty_keys_of(vol);
        let workers = workers.clamp(1, keys.len().max(1));
        let (written, vols, err) = if workers == 1 {
            self.settle_keys(&keys)
        } else {
            let per = keys.len().div_ceil(workers);
            let results: Vec<_> = std::thread::scope(|s| {
                let batches: Vec<_> = keys
                    .chunks(per)
                    .map(|batch| s.spawn(move || self.settle_keys(batch)))
                    .collect();
                batches
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            let e = CacheError::Invalid("a write-back thread panicked".into());
                            (0, Vec::new(), Some(e))
                        })
                    })
                    .collect()
            });
            let mut all: (u64, Vec<Arc<Volume>>, Option<CacheError>) = (0, Vec::new(), None);
            for (n, vs, e) in results {
                all.0 += n;
                for v in vs {
                    if !all.1.iter().any(|x| x.id() == v.id()) {
                        all.1.push(v);
                    }
                }
                if all.2.is_none() {
                    all.2 = e;
                }
            }
            all
        };
        if let Some(e) = err {
            return Err(e);
        }
        for v in vols {
            v.backend().flush().map_err(|e| v.io_err(e))?;
        }
        Ok(written)
    }
}
