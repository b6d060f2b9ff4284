//! The write paths of a partition: write-back, write-through and write-around, and trim.
//!
//! See [`WritePolicy`]. Write-back: a partial write to a non-resident block is a
//! read-modify-write (fill the base like a read miss, merge, install dirty; retried if a
//! concurrent write changed the block meanwhile). Write-through: backend first, then the
//! cached copy is updated (whole blocks are allocated, partial ones only update a resident
//! copy). Write-around and requests that matched no rule ([`Route::Coherent`]): backend
//! first, then the cached copy is dropped (or, if dirty and partially overwritten, merged).
//! A trim discards the whole blocks it covers (dirty ones without writing them back) and
//! passes them to the backend, which then reads them as zeros; partial blocks at its ends
//! are left alone (trim is advisory in NBD).
//!
//! With a durable write log attached (`crate::write_log`), every write (whatever the write
//! policy or route) and every trim is appended to it after it is applied and before the
//! call returns, so an acknowledged write survives a crash of the node; without one,
//! write-back data not yet flushed lives in memory only.

use super::{seg, CachePartition, Inner, Route};
use crate::error::{CacheError, Result};
use crate::stats::OpOutcome;
use crate::volume::{lock, Volume};
use crate::write_log::WriteLog;
use crate::write_policy::WritePolicy;
use policy::Key;
use std::ops::Range;
use std::sync::Arc;

/// A failure of the durable write log, naming it.
pub(crate) fn log_err(log: &WriteLog, e: std::io::Error) -> CacheError {
    CacheError::Log {
        path: log.base().display().to_string(),
        source: e,
    }
}

impl Inner {
    /// Places dirty data for `key`; if admission declines it goes to the write-back table.
    pub(super) fn insert_dirty(&mut self, key: Key, data: &[u8], victims: &mut Vec<Key>) {
        self.st.wb.remove(&key);
        if !self.insert(key, data, true, victims) {
            self.st.push_wb(key, Arc::from(data));
            victims.push(key);
        }
    }

    /// Applies a write-back write of `src` at `in_off` of block `key`. `Some(hit)` if
    /// applied, `None` if the block's old bytes are needed first (partial, not in memory).
    pub(super) fn apply_back(
        &mut self,
        key: Key,
        in_off: usize,
        src: &[u8],
        block_len: usize,
        victims: &mut Vec<Key>,
    ) -> Option<bool> {
        if let Some(slot) = self.bc.lookup(key) {
            self.bc.access(key, |_, _| {});
            self.st.touch(key);
            self.st.patch(slot, key, in_off, src, true);
            return Some(true);
        }
        if let Some(e) = self.st.wb.get(&key) {
            let mut blk = e.data.to_vec();
            blk[in_off..in_off + src.len()].copy_from_slice(src);
            self.st.touch(key);
            self.insert_dirty(key, &blk, victims);
            return Some(true);
        }
        if in_off == 0 && src.len() == block_len {
            self.st.touch(key);
            if src.len() == self.st.bs {
                self.insert_dirty(key, src, victims);
            } else {
                let mut blk = vec![0u8; self.st.bs];
                blk[..src.len()].copy_from_slice(src);
                self.insert_dirty(key, &blk, victims);
            }
            return Some(false);
        }
        None
    }
}

impl CachePartition {
    /// Writes `data` to `vol` at `offset` under the partition's write policy (writes that
    /// matched no rule, [`Route::Coherent`], go around). With `fua`, returns only after the
    /// covered blocks are on the backend and the backend has flushed.
    pub fn write(
        &self,
        vol: &Volume,
        offset: u64,
        data: &[u8],
        fua: bool,
        route: Route,
    ) -> Result<OpOutcome> {
        let bs = self.bs as u64;
        let mut out = OpOutcome::default();
        if !data.is_empty() {
            loop {
                let mode = match route {
                    Route::Coherent => WritePolicy::WriteAround,
                    Route::Cached => lock(&self.inner).st.write_policy,
                };
                let done = match mode {
                    WritePolicy::ReadOnly => return Err(CacheError::ReadOnly(self.id)),
                    WritePolicy::WriteBack => self.write_cached(vol, offset, data)?,
                    WritePolicy::WriteThrough => {
                        Some(self.write_sync(vol, offset, data, true, route)?)
                    }
                    WritePolicy::WriteAround => {
                        Some(self.write_sync(vol, offset, data, false, route)?)
                    }
                };
                if let Some(o) = done {
                    out = o;
                    break;
                }
            }
        }
        if !data.is_empty() {
            self.log_write(vol, offset, data)?;
        }
        if fua {
            if !data.is_empty() {
                let (first, last) = (offset / bs, (offset + data.len() as u64 - 1) / bs);
                for b in first..=last {
                    let _g = vol.lock_block(b);
                    out.writebacks += u64::from(self.settle(vol, b)?);
                }
            }
            vol.backend().flush().map_err(|e| vol.io_err(e))?;
        }
        Ok(out)
    }

    /// Write-back write; `None` if the policy changed before it could start.
    pub(super) fn write_cached(
        &self,
        vol: &Volume,
        offset: u64,
        data: &[u8],
    ) -> Result<Option<OpOutcome>> {
        let bs = self.bs as u64;
        let len = data.len();
        let (first, last) = (offset / bs, (offset + len as u64 - 1) / bs);
        let mut out = OpOutcome::default();
        let mut victims = Vec::new();
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let mut evictions = 0;
        // Within the dirty limits (may clean, or refuse with the backend's error).
        self.throttle(vol, first..=last)?;
        {
            let mut g = lock(&self.inner);
            if g.st.write_policy != WritePolicy::WriteBack {
                return Ok(None);
            }
            let ev0 = g.st.stats.evictions;
            for b in first..=last {
                let key = vol.key(b);
                let (in_off, src) = seg(b, offset, len, bs);
                if let Some(o) = g.st.observer.as_mut() {
                    o.observe(key);
                }
                match g.apply_back(key, in_off, &data[src], vol.block_len(b), &mut victims) {
                    Some(true) => out.hits += 1,
                    Some(false) => out.misses += 1,
                    None => {
                        let gen = g.st.begin_fill(key);
                        pending.push((b, gen));
                        out.misses += 1;
                    }
                }
            }
            g.st.stats.hits += out.hits;
            g.st.stats.misses += out.misses;
            g.st.stats.write_bytes += len as u64;
            evictions += g.st.stats.evictions - ev0;
        }
        while !pending.is_empty() {
            // As in `read`: hold the stripes while the old bytes are read and merged.
            let lo = pending.iter().map(|p| p.0).min().unwrap_or(0);
            let hi = pending.iter().map(|p| p.0).max().unwrap_or(0);
            let stripes = vol.lock_blocks(lo, hi);
            let mut scratch = vec![0u8; pending.len() * self.bs];
            let mut err = None;
            for (i, &(b, _)) in pending.iter().enumerate() {
                if let Err(e) = vol.read_blocks(b, &mut scratch[i * self.bs..(i + 1) * self.bs]) {
                    err = Some(e);
                    break;
                }
            }
            let mut g = lock(&self.inner);
            let ev0 = g.st.stats.evictions;
            let mut retry = Vec::new();
            for (i, &(b, gen)) in pending.iter().enumerate() {
                let key = vol.key(b);
                let valid = g.st.end_fill(key, gen);
                if err.is_some() {
                    continue;
                }
                let (in_off, src) = seg(b, offset, len, bs);
                let src = &data[src];
                if valid && g.bc.lookup(key).is_none() && !g.st.wb.contains_key(&key) {
                    let base = &mut scratch[i * self.bs..(i + 1) * self.bs];
                    base[in_off..in_off + src.len()].copy_from_slice(src);
                    g.st.touch(key);
                    g.insert_dirty(key, base, &mut victims);
                } else if g
                    .apply_back(key, in_off, src, vol.block_len(b), &mut victims)
                    .is_none()
                {
                    retry.push((b, g.st.begin_fill(key)));
                }
            }
            evictions += g.st.stats.evictions - ev0;
            drop(g);
            drop(stripes);
            if let Some(e) = err {
                self.drain(victims);
                return Err(e);
            }
            pending = retry;
        }
        out.evictions = evictions;
        out.writebacks += self.drain(victims).0;
        Ok(Some(out))
    }

    /// Write-through (`allocate`) or write-around: backend first, then the cache.
    pub(super) fn write_sync(
        &self,
        vol: &Volume,
        offset: u64,
        data: &[u8],
        allocate: bool,
        route: Route,
    ) -> Result<OpOutcome> {
        let bs = self.bs as u64;
        let len = data.len();
        let (first, last) = (offset / bs, (offset + len as u64 - 1) / bs);
        let cached = route == Route::Cached;
        let mut out = OpOutcome::default();
        let mut victims = Vec::new();
        let guards = vol.lock_blocks(first, last);
        vol.backend()
            .write_at(offset, data)
            .map_err(|e| vol.io_err(e))?;
        {
            let mut g = lock(&self.inner);
            let ev0 = g.st.stats.evictions;
            for b in first..=last {
                let key = vol.key(b);
                let (in_off, src) = seg(b, offset, len, bs);
                let src = &data[src];
                let full = in_off == 0 && src.len() == vol.block_len(b);
                if cached {
                    if let Some(o) = g.st.observer.as_mut() {
                        o.observe(key);
                    }
                }
                g.st.touch(key);
                if let Some(slot) = g.bc.lookup(key) {
                    if cached {
                        g.bc.access(key, |_, _| {});
                    }
                    let dirty = !full && g.st.meta[slot as usize].dirty;
                    g.st.patch(slot, key, in_off, src, dirty);
                    if !allocate && !dirty {
                        g.bc.remove(key);
                    }
                    out.hits += 1;
                } else if let Some(d) = g.st.wb.get(&key).map(|e| e.data.clone()) {
                    if full {
                        g.st.wb.remove(&key);
                    } else {
                        let mut blk = d.to_vec();
                        blk[in_off..in_off + src.len()].copy_from_slice(src);
                        g.st.push_wb(key, Arc::from(blk));
                    }
                    out.hits += 1;
                } else {
                    if allocate && full && cached {
                        if src.len() == self.bs {
                            g.insert(key, src, false, &mut victims);
                        } else {
                            let mut blk = vec![0u8; self.bs];
                            blk[..src.len()].copy_from_slice(src);
                            g.insert(key, &blk, false, &mut victims);
                        }
                    }
                    out.misses += 1;
                }
            }
            if cached {
                g.st.stats.hits += out.hits;
                g.st.stats.misses += out.misses;
                g.st.stats.write_bytes += len as u64;
            } else {
                g.st.stats.coherent_ops += 1;
            }
            out.evictions = g.st.stats.evictions - ev0;
        }
        drop(guards);
        out.writebacks += self.drain(victims).0;
        Ok(out)
    }

    /// Discards the whole blocks inside `[offset, offset + len)` of `vol` from the cache
    /// (dirty ones without writing them back) and trims them on the backend.
    pub fn trim(&self, vol: &Volume, offset: u64, len: u64) -> Result<()> {
        let bs = self.bs as u64;
        let Range { start: first, end } = vol.whole_blocks(offset, len);
        if first >= end {
            return Ok(());
        }
        let _guards = vol.lock_blocks(first, end - 1);
        {
            let mut g = lock(&self.inner);
            for key in g.keys_in(vol, first, end) {
                if let Some(slot) = g.bc.lookup(key) {
                    g.st.set_dirty(slot, key, false);
                    g.bc.remove(key);
                }
                g.st.wb.remove(&key);
            }
            g.st.touch_range(vol, first, end);
        }
        let start = first * bs;
        let stop = (end * bs).min(vol.size());
        let res = vol.backend().trim(start, stop - start);
        lock(&self.inner).st.touch_range(vol, first, end);
        res.map_err(|e| vol.io_err(e))?;
        if let Some(log) = self.log() {
            log.append_trim(vol.name(), start, stop - start)
                .map_err(|e| log_err(&log, e))?;
        }
        Ok(())
    }

    /// Attaches (or detaches) the durable write log: from now on every write and trim the
    /// partition applies is appended to it before it returns.
    pub fn set_log(&self, log: Option<Arc<WriteLog>>) {
        *self.log.write().unwrap_or_else(|e| e.into_inner()) = log;
    }

    /// The durable write log, if attached.
    pub fn log(&self) -> Option<Arc<WriteLog>> {
        self.log.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Appends an applied write to the log (if any) and waits until it is durable.
    fn log_write(&self, vol: &Volume, offset: u64, data: &[u8]) -> Result<()> {
        if let Some(log) = self.log() {
            log.append_write(vol.name(), offset, data)
                .map_err(|e| log_err(&log, e))?;
        }
        Ok(())
    }
}
