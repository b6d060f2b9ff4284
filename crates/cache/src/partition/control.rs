//! Control of a partition while requests keep flowing: resize, eviction-policy switch,
//! admission and write-policy changes, and dropping blocks a rule no longer routes here.
//!
//! Resize evicts the policy's victims and leaves the dirty ones to the cleaner;
//! switching policy is SOPA's reconstruction (no block moves, nothing is written);
//! leaving write-back writes every dirty block back. Shrinking keeps the arena's memory
//! until the partition empties (slots above the new capacity are reused, not freed).

use super::{block_of, CachePartition, Inner};
use crate::error::Result;
use crate::stats::OpOutcome;
use crate::volume::{lock, Volume};
use crate::write_policy::WritePolicy;
use policy::{AdmissionPolicy, BlockCache, EvictionSpec};

impl CachePartition {
    /// Writes back and drops every block of `vol` in `first..end` (a rule stopped sending
    /// them here). No data request for these blocks may run concurrently.
    pub fn drop_blocks(&self, vol: &Volume, first: u64, end: u64) -> Result<()> {
        let keys = {
            let g = lock(&self.inner);
            g.keys_in(vol, first, end)
        };
        for key in keys {
            let b = block_of(key);
            let _s = vol.lock_block(b);
            loop {
                self.settle(vol, b)?;
                let mut g = lock(&self.inner);
                if g.st.wb.contains_key(&key) {
                    continue;
                }
                if let Some(slot) = g.bc.lookup(key) {
                    if g.st.meta[slot as usize].dirty {
                        continue;
                    }
                    g.bc.remove(key);
                }
                g.st.touch(key);
                break;
            }
        }
        vol.backend().flush().map_err(|e| vol.io_err(e))
    }

    /// Changes the capacity. Shrinking evicts the policy's victims at once; the dirty ones
    /// wait in the write-back table for the cleaner (`dirty`), so a shrink returns without
    /// waiting for the backend and writers past the new high watermark are throttled, not
    /// stopped.
    pub fn resize(&self, capacity: usize) -> Result<OpOutcome> {
        let mut victims = Vec::new();
        let evictions = {
            let mut g = lock(&self.inner);
            let ev0 = g.st.stats.evictions;
            let Inner { bc, st } = &mut *g;
            bc.resize(capacity, |k, s| st.evicted(k, s, &mut victims));
            if bc.is_empty() {
                st.arena = Vec::new();
                st.meta = Vec::new();
            }
            st.stats.evictions - ev0
        };
        Ok(OpOutcome {
            evictions,
            ..Default::default()
        })
    }

    /// Switches the eviction policy by reconstruction (no block moves, nothing is written).
    pub fn switch_policy(&self, spec: &EvictionSpec) -> Result<()> {
        let new = spec.build()?;
        let mut g = lock(&self.inner);
        g.bc.switch_policy(new);
        g.st.eviction = spec.clone();
        Ok(())
    }

    /// Replaces the admission policy.
    pub fn set_admission(&self, admission: Box<dyn AdmissionPolicy>) -> Result<()> {
        let placeholder = policy::build("lru")?;
        let mut g = lock(&self.inner);
        let bc = std::mem::replace(&mut g.bc, BlockCache::new(0, placeholder));
        g.bc = bc.with_admission(admission);
        Ok(())
    }

    /// Changes the write policy; leaving write-back writes every dirty block back first.
    pub fn set_write_policy(&self, wp: WritePolicy) -> Result<()> {
        let old = std::mem::replace(&mut lock(&self.inner).st.write_policy, wp);
        if old == WritePolicy::WriteBack && wp != WritePolicy::WriteBack {
            // Writes that began under write-back may still land dirty; a few rounds catch
            // them (later ones would be written back by flush or eviction anyway).
            for _ in 0..4 {
                self.write_back(None)?;
                if self.dirty_blocks() == 0 {
                    break;
                }
            }
        }
        Ok(())
    }
}
