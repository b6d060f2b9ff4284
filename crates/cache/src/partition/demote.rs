//! Exclusive levels (Moirai's scale-out, DEMOTE): two partitions on two levels acting as
//! one LRU. A partition is in one of three [`Exclusive`] modes:
//!
//! * **off** (the default): an ordinary cache.
//! * **upper** (a level-1 cache): every *clean* block the policy evicts is handed, with
//!   its bytes, to a [`DemoteSink`](super::DemoteSink) (the node's demote queue towards level 2). Dirty
//!   victims are never demoted: they are written back as always. A victim whose block
//!   stripe is held by a write in flight is not demoted either (counted as
//!   `demote_skipped`): a write-through or write-around write holds the stripe from
//!   before its backend write until the cache has its bytes, so the slot's bytes may be
//!   older than the backend's meanwhile. The sink is called under the partition's lock
//!   *and* the block's stripe, so any later write of the block reaches the backend only
//!   after the demotion was queued: a backend that sees that write can cancel or wait
//!   for the queued copy (the node's does), and a demoted copy is never older than a
//!   write that reached level 2 before it.
//! * **lower** (a level-2 cache): a read routed here does not keep what it serves — a
//!   clean hit is dropped after it is copied (dirty ones stay), a miss is not installed —
//!   since the level above now holds the block. Blocks enter by writes and by
//!   [`CachePartition::insert_clean`].
//!
//! [`CachePartition::insert_clean`] is the receiving end of a demotion: whole blocks are
//! inserted clean at the policy's MRU end without touching the backend; a block already
//! resident keeps its bytes (they are at least as new) and is only accessed (moved to
//! MRU); a block being written back or filled is left alone. It holds the blocks' stripes
//! like a fill, so it never lands inside a write's backend-then-cache window.

use super::exclusive::Exclusive;
use super::{block_of, CachePartition};
use crate::error::Result;
use crate::volume::{lock, Volume, VolumeTable};
use policy::{Key, Slot};

/// What [`CachePartition::insert_clean`] did with the blocks it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemoteOutcome {
    /// Blocks inserted clean.
    pub inserted: u64,
    /// Blocks already resident, moved to MRU.
    pub refreshed: u64,
    /// Blocks left alone (being written back or filled, or declined by admission).
    pub skipped: u64,
}

impl super::store::Store {
    /// Hands clean victim `key` (in `slot`) to the sink, if the partition is upper.
    pub(super) fn demote(&mut self, key: Key, slot: Slot, vols: &VolumeTable) {
        let Exclusive::Upper(sink) = &self.exclusive else {
            return;
        };
        let Some(vol) = vols.of_key(key) else {
            return;
        };
        let b = block_of(key);
        let Some(_stripe) = vol.try_lock_block(b) else {
            self.stats.demote_skipped += 1;
            return;
        };
        let s = slot as usize * self.bs;
        let n = vol.block_len(b);
        if sink.demote(vol.name(), b * self.bs as u64, &self.arena[s..s + n]) {
            self.stats.demoted += 1;
        } else {
            self.stats.demote_dropped += 1;
        }
    }
}

impl CachePartition {
    /// Sets the partition's exclusive mode.
    pub fn set_exclusive(&self, mode: Exclusive) {
        lock(&self.inner).st.exclusive = mode;
    }

    /// The partition's exclusive mode.
    pub fn exclusive(&self) -> Exclusive {
        lock(&self.inner).st.exclusive.clone()
    }

    /// Inserts the whole blocks of `data` (bytes of `vol` at `offset`) clean, without
    /// writing the backend: a demotion from the level above (see the module doc). Blocks
    /// only partly covered are ignored. Evicted dirty blocks are written back before it
    /// returns.
    pub fn insert_clean(&self, vol: &Volume, offset: u64, data: &[u8]) -> Result<DemoteOutcome> {
        let mut out = DemoteOutcome::default();
        let blocks = vol.whole_blocks(offset, data.len() as u64);
        if blocks.is_empty() {
            return Ok(out);
        }
        let bs = self.bs as u64;
        let stripes = vol.lock_blocks(blocks.start, blocks.end - 1);
        let mut victims = Vec::new();
        let mut pad = Vec::new();
        {
            let mut g = lock(&self.inner);
            for b in blocks {
                let key = vol.key(b);
                if g.bc.lookup(key).is_some() {
                    g.bc.access(key, |_, _| {});
                    out.refreshed += 1;
                    continue;
                }
                if g.st.wb.contains_key(&key) || g.st.fills.contains_key(&key) {
                    out.skipped += 1;
                    continue;
                }
                let start = (b * bs - offset) as usize;
                let n = vol.block_len(b);
                let src = &data[start..start + n];
                let blk = if n == self.bs {
                    src
                } else {
                    pad.clear();
                    pad.extend_from_slice(src);
                    pad.resize(self.bs, 0);
                    &pad[..]
                };
                if g.insert(key, blk, false, &mut victims) {
                    out.inserted += 1;
                } else {
                    out.skipped += 1;
                }
            }
            g.st.stats.demoted_in += out.inserted;
            g.st.stats.demote_refreshed += out.refreshed;
        }
        drop(stripes);
        let (_, err) = self.drain(victims);
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}
