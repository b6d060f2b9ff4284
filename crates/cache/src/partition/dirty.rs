//! Dirty limits of a write-back partition: how much dirty data it may hold, cleaning in
//! the background from a low watermark, writers throttled near the high one, and writers
//! told when the backend cannot take the data.
//!
//! * **Limits.** [`DirtyLimits`]: a ratio of the capacity and, optionally, a number of
//!   bytes; the high watermark is the smaller of the two (at least one block), the low
//!   watermark half of it. Dirty blocks are counted resident or in the write-back table
//!   (evicted, not yet written), so blocks the backend refuses count too.
//! * **Background cleaning.** [`CachePartition::clean`] writes back every evicted dirty block
//!   (the write-back table: reads and shrinks leave theirs there rather than wait for the
//!   backend) and resident dirty blocks until the partition is at its low watermark (the
//!   node runs it periodically for every cache, `CacheNode::clean`). It takes each
//!   block's stripe and the partition's lock only to copy the block's bytes, never
//!   across the backend write, so hits are not delayed.
//! * **Throttling.** Before a write-back write is applied (`CachePartition::throttle`) the
//!   writer cleans blocks itself in proportion to how far past the midpoint between the
//!   watermarks the partition is (as the kernel's dirty throttling does): none up to the
//!   midpoint, a growing share of a block per block written after it (shares carry over
//!   between writes), one per block at the high watermark, plus whatever it takes to stay
//!   at the high watermark. So writers slow down smoothly, and at 100 % dirty they write
//!   at the backend's pace. With the default limits (the whole capacity) writers only
//!   clean what they must to stay within it, as an eviction of a dirty block always did,
//!   and background cleaning alone works from the low watermark. A partition already
//!   past its high watermark (a shrink or a lower limit just took effect) has its writers
//!   clean one block per block they dirty, so it never grows, and leaves the excess to
//!   the cleaner: no writer waits for it all.
//! * **Memory.** Dirty blocks (resident or evicted) pass the high watermark only just
//!   after a shrink or a lower limit, so a partition holds at most its capacity plus its
//!   high watermark (its old capacity while a shrink's victims drain).
//! * **Backend failure.** A writer that must clean to stay within the high watermark and
//!   cannot (the backend fails: a full disk, an I/O error) gets that error and its write
//!   is not applied: dirty data stays bounded by the limit, and nothing is acknowledged
//!   that the cache could not keep. Below the high watermark a failed clean is counted
//!   (`writeback_errors`) and retried later.

use super::CachePartition;
use crate::error::{CacheError, Result};
use crate::volume::{lock, Volume};
use policy::Key;
use std::ops::RangeInclusive;

/// How much dirty data a write-back partition may hold (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DirtyLimits {
    /// Most dirty blocks as a fraction of the capacity, in (0, 1] (default 1: the whole
    /// capacity, so evicted dirty blocks the backend refuses can never pile up beyond it).
    pub ratio: f64,
    /// Most dirty bytes; 0: the ratio alone (default).
    pub bytes: u64,
}

impl Default for DirtyLimits {
    fn default() -> Self {
        DirtyLimits {
            ratio: 1.0,
            bytes: 0,
        }
    }
}

impl DirtyLimits {
    /// Check the values: the error names the field.
    pub fn check(&self) -> Result<()> {
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(CacheError::Invalid(format!(
                "dirty_ratio {} must be in (0, 1]",
                self.ratio
            )));
        }
        Ok(())
    }

    /// The high watermark, in blocks, of a partition of `capacity` blocks of `bs` bytes.
    pub fn high(&self, capacity: usize, bs: usize) -> usize {
        let by_ratio = (capacity as f64 * self.ratio).floor() as usize;
        let by_bytes = if self.bytes == 0 {
            usize::MAX
        } else {
            usize::try_from(self.bytes / bs as u64).unwrap_or(usize::MAX)
        };
        by_ratio.min(by_bytes).max(1)
    }

    /// Whether limits tighter than the whole capacity were set (only then are writers
    /// throttled before the limit).
    pub fn set(&self) -> bool {
        self.ratio < 1.0 || self.bytes > 0
    }

    /// The low watermark, in blocks: background cleaning brings the partition down to it.
    pub fn low(&self, capacity: usize, bs: usize) -> usize {
        self.high(capacity, bs) / 2
    }
}

impl CachePartition {
    /// Dirty blocks now, the (low, high) watermarks, and how many of `vol`'s blocks
    /// `blocks` are not dirty yet (what a write of them adds).
    fn dirty_state(
        &self,
        vol: Option<(&Volume, RangeInclusive<u64>)>,
    ) -> (usize, usize, usize, usize) {
        let g = lock(&self.inner);
        let (cap, bs) = (g.bc.capacity(), self.bs);
        let new = vol.map_or(0, |(vol, blocks)| {
            blocks
                .map(|b| vol.key(b))
                .filter(|k| !g.st.dirty.contains(k) && !g.st.wb.contains_key(k))
                .count()
        });
        (
            g.st.dirty.len() + g.st.wb.len(),
            g.st.dirty_limits.low(cap, bs),
            g.st.dirty_limits.high(cap, bs),
            new,
        )
    }

    /// Sets the dirty limits (checked first).
    pub fn set_dirty_limits(&self, limits: DirtyLimits) -> Result<()> {
        limits.check()?;
        lock(&self.inner).st.dirty_limits = limits;
        Ok(())
    }

    /// The dirty limits.
    pub fn dirty_limits(&self) -> DirtyLimits {
        lock(&self.inner).st.dirty_limits
    }

    /// Every dirty block in memory (resident or in the write-back table) with its key.
    pub fn dirty_data(&self) -> Vec<(Key, Vec<u8>)> {
        let g = lock(&self.inner);
        let mut out: Vec<(Key, Vec<u8>)> =
            g.st.wb.iter().map(|(k, e)| (*k, e.data.to_vec())).collect();
        for &k in &g.st.dirty {
            if let Some(s) = g.bc.lookup(k) {
                out.push((k, g.st.block(s).to_vec()));
            }
        }
        out
    }

    /// Up to `n` dirty keys, evicted ones (the write-back table) first, in ascending
    /// order (see `write_back`: one sweep over the backend).
    pub(crate) fn dirty_keys(&self, n: usize) -> Vec<Key> {
        let g = lock(&self.inner);
        let mut keys: Vec<Key> =
            g.st.wb
                .keys()
                .chain(g.st.dirty.iter())
                .take(n)
                .copied()
                .collect();
        drop(g);
        keys.sort_unstable();
        keys
    }

    /// Write back up to `n` dirty blocks; the number written and the first error.
    fn clean_some(&self, n: usize) -> (u64, Option<CacheError>) {
        if n == 0 {
            return (0, None);
        }
        self.drain(self.dirty_keys(n))
    }

    /// Background cleaning: write back every evicted dirty block and resident ones until
    /// at most the low watermark is dirty, at most `budget` blocks per call. Returns the
    /// blocks written; an error is returned only if nothing could be written.
    pub fn clean(&self, budget: usize) -> Result<u64> {
        let (dirty, low, _, _) = self.dirty_state(None);
        let evicted = lock(&self.inner).st.wb.len();
        let want = dirty.saturating_sub(low).max(evicted).min(budget);
        match self.clean_some(want) {
            (0, Some(e)) => Err(e),
            (n, _) => Ok(n),
        }
    }

    /// Before a write-back write of `vol`'s blocks `blocks`: clean in proportion to how
    /// far past the low watermark the partition is, and refuse the write with the
    /// backend's error if it would take the partition past its high watermark and
    /// cleaning fails. Blocks already dirty add nothing.
    pub(super) fn throttle(&self, vol: &Volume, blocks: RangeInclusive<u64>) -> Result<()> {
        let (dirty, low, high, incoming) = self.dirty_state(Some((vol, blocks.clone())));
        let limits = self.dirty_limits();
        let after = dirty + incoming;
        // Writers pay from the midpoint between the watermarks: a share of a block per
        // block written that grows from 0 there to 1 at the high watermark, carried over
        // between writes so the slowdown is smooth.
        let from = (low + high) / 2;
        let smooth = if after <= from || !limits.set() {
            0
        } else {
            let span = (high - from).max(1);
            let share = (after - from).min(span) as f64 / span as f64;
            let mut g = lock(&self.inner);
            g.st.clean_debt += incoming as f64 * share;
            let n = g.st.clean_debt.floor();
            g.st.clean_debt -= n;
            n as usize
        };
        // Past the high watermark already (a shrink, a lower limit), a writer cleans only as
        // much as it adds: the excess is the cleaner's.
        let needed = after.saturating_sub(high).min(incoming);
        if smooth == 0 && needed == 0 {
            return Ok(());
        }
        let (written, err) = self.clean_some(smooth.max(needed));
        match err {
            Some(e) if (written as usize) < needed => {
                // Whatever was written, the partition would pass its limit.
                let (dirty, _, high, incoming) = self.dirty_state(Some((vol, blocks)));
                if dirty + incoming > high {
                    return Err(e);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
