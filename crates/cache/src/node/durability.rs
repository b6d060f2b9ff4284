//! What keeps acknowledged writes durable beyond the partitions: durable write logs
//! checkpointed (a new generation, every dirty block written back, the backends flushed,
//! the older generations deleted), the background cleaner, every dirty block collected for
//! a recovery file, and the recovery file adopted at start and settled export by export
//! as flushes succeed (see [`crate::recovery`]).

use super::{read_lock, CacheNode, Routing, LOG_CHECKPOINT_BYTES};
use crate::error::{CacheError, Result};
use crate::ids::CacheId;
use crate::partition::CachePartition;
use crate::volume::{lock, BLOCK_BITS};
use std::sync::Arc;

impl CacheNode {
    /// Flushes the backends of the exports called `names` (unknown ones are skipped).
    pub(super) fn flush_exports(r: &Routing, names: &[String]) -> Result<()> {
        for n in names {
            if let Some(ex) = r.exports.get(n) {
                ex.vol.backend().flush().map_err(|e| ex.vol.io_err(e))?;
            }
        }
        Ok(())
    }

    /// Checkpoints a cache's durable write log: starts a new generation, writes every
    /// dirty block back, flushes the backends of the exports the older generations name
    /// and deletes those. `Ok(false)` if the cache has no log.
    pub fn checkpoint(&self, id: CacheId) -> Result<bool> {
        let r = read_lock(&self.routing);
        let part = Self::part_of(&r, id)?;
        Self::checkpoint_with(&r, part)
    }

    pub(super) fn checkpoint_with(r: &Routing, part: &CachePartition) -> Result<bool> {
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

    /// Every dirty block of every cache, for a recovery file ([`crate::recovery`]).
    pub fn dirty_data(&self) -> Vec<crate::DirtyBlock> {
        let parts: Vec<Arc<CachePartition>> = read_lock(&self.routing)
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

    /// Dirty blocks of every cache, resident or evicted and not yet written back.
    pub fn dirty_blocks(&self) -> usize {
        read_lock(&self.routing)
            .caches
            .values()
            .map(|c| c.part.dirty_blocks())
            .sum()
    }

    /// [`CacheNode::dirty_blocks`] per export (exports without any are left out).
    pub fn dirty_by_export(&self) -> std::collections::BTreeMap<String, usize> {
        let parts: Vec<Arc<CachePartition>> = read_lock(&self.routing)
            .caches
            .values()
            .map(|c| c.part.clone())
            .collect();
        let mut by_vol: std::collections::HashMap<u32, usize> = Default::default();
        for p in parts {
            for key in p.dirty_keys(usize::MAX) {
                *by_vol.entry((key >> BLOCK_BITS) as u32).or_default() += 1;
            }
        }
        by_vol
            .into_iter()
            .filter_map(|(id, n)| Some((self.volumes.get(id)?.name().to_string(), n)))
            .collect()
    }

    /// Background cleaning: every cache past its low dirty watermark writes dirty blocks
    /// back, at most `budget` blocks each (see `partition::DirtyLimits`). Returns the
    /// blocks written; failures are counted in each cache's `writeback_errors`.
    pub fn clean(&self, budget: usize) -> u64 {
        let parts: Vec<Arc<CachePartition>> = read_lock(&self.routing)
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
    pub(super) fn recovery_names(&self, export: &str) -> bool {
        lock(&self.recovery)
            .as_ref()
            .is_some_and(|p| p.names(export))
    }

    /// After a successful flush of `export`: drops its blocks from the recovery file.
    pub(super) fn settle_recovery(&self, export: &str) -> Result<()> {
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
}
