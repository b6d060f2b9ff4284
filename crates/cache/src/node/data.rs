//! The data path of a node's caches: every request is split into maximal runs of blocks
//! that go to one target (a cache, a cache read coherently, or the backend directly) by
//! the rules, under the routing table's read lock held for the whole request. Reads,
//! writes (FUA included), flushes, trims, allocation status, demotions from the level
//! above (`insert_clean`) and hits served without backend I/O (`with_resident`).

use super::{read_lock, CacheNode};
use crate::error::Result;
use crate::ids::CacheId;
use crate::partition::{Lent, Route};
use crate::rules::{Op, Target};
use crate::stats::OpOutcome;

impl CacheNode {
    /// Reads like [`CacheNode::read`] but only if the request goes to one cache and every
    /// block is in memory, so it needs no backend I/O; `Ok(false)` (nothing read, nothing
    /// counted) otherwise. The node serves such hits inline instead of handing them to a
    /// blocking thread.
    pub fn read_if_resident(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool> {
        let copied =
            self.with_resident(export, client, offset, buf.len(), |lent| lent.copy_to(buf))?;
        Ok(copied.is_some())
    }

    /// Like [`CacheNode::read_if_resident`], lending `f` the data in the cache's memory
    /// instead of copying it ([`CachePartition::with_resident`](crate::CachePartition::with_resident): `f` runs under the partition's
    /// lock and must not block); `Ok(None)` when it cannot (`f` not called).
    pub fn with_resident<R>(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        len: usize,
        f: impl FnOnce(Lent<'_>) -> R,
    ) -> Result<Option<R>> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len as u64)?;
        let vol = &*ex.vol;
        let mut runs = 0;
        let mut target = Target::Direct;
        Self::for_each_run(&r, vol, client, Op::Read, offset, len as u64, |_, _, t| {
            runs += 1;
            target = t;
            Ok(())
        })?;
        let Target::Cached(c) = target else {
            return Ok(None);
        };
        if runs != 1 {
            return Ok(None);
        }
        match Self::part_of(&r, c)?.with_resident(vol, offset, len, f) {
            Some((value, out)) => {
                Self::record(ex, client, false, len as u64, out);
                Ok(Some(value))
            }
            None => Ok(None),
        }
    }

    /// Reads `buf.len()` bytes of `export` at `offset` for `client`.
    pub fn read(&self, export: &str, client: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_outcome(export, client, offset, buf).map(|_| ())
    }

    /// Reads like [`CacheNode::read`] and says how many blocks were found in memory and
    /// how many were not (the node splits its latency by it).
    pub fn read_outcome(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<OpOutcome> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, buf.len() as u64)?;
        let vol = &*ex.vol;
        let mut out = OpOutcome::default();
        let bs = self.block_size as u64;
        Self::for_each_run(
            &r,
            vol,
            client,
            Op::Read,
            offset,
            buf.len() as u64,
            |off, n, t| {
                let dst = &mut buf[(off - offset) as usize..(off - offset + n) as usize];
                match t {
                    Target::Cached(c) => {
                        out.add(Self::part_of(&r, c)?.read(vol, off, dst, Route::Cached)?)
                    }
                    Target::Coherent(c) => {
                        Self::part_of(&r, c)?.read(vol, off, dst, Route::Coherent)?;
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                    Target::Direct => {
                        vol.backend().read_at(off, dst).map_err(|e| vol.io_err(e))?;
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                }
                Ok(())
            },
        )?;
        Self::record(ex, client, false, buf.len() as u64, out);
        Ok(out)
    }

    /// Writes `data` to `export` at `offset` for `client`; with `fua` it returns only once
    /// the data is durable on the backend.
    pub fn write(
        &self,
        export: &str,
        client: &str,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<()> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, data.len() as u64)?;
        let vol = &*ex.vol;
        let mut out = OpOutcome::default();
        let bs = self.block_size as u64;
        Self::for_each_run(
            &r,
            vol,
            client,
            Op::Write,
            offset,
            data.len() as u64,
            |off, n, t| {
                let src = &data[(off - offset) as usize..(off - offset + n) as usize];
                match t {
                    Target::Cached(c) => {
                        out.add(Self::part_of(&r, c)?.write(vol, off, src, fua, Route::Cached)?)
                    }
                    Target::Coherent(c) => {
                        Self::part_of(&r, c)?.write(vol, off, src, fua, Route::Coherent)?;
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                    Target::Direct => {
                        vol.backend()
                            .write_at(off, src)
                            .map_err(|e| vol.io_err(e))?;
                        if fua {
                            vol.backend().flush().map_err(|e| vol.io_err(e))?;
                        }
                        out.misses += (off + n).div_ceil(bs) - off / bs;
                    }
                }
                Ok(())
            },
        )?;
        Self::record(ex, client, true, data.len() as u64, out);
        drop(r);
        if fua && self.recovery_names(export) {
            // A FUA write is durable once acknowledged: the recovery file must not hold
            // older bytes of it by then (see `crate::recovery`).
            self.flush(export)?;
        }
        Ok(())
    }

    /// Makes every acknowledged write to `export` durable: writes back the dirty blocks of
    /// the export held by any cache, then flushes the backend.
    pub fn flush(&self, export: &str) -> Result<()> {
        self.flush_parallel(export, 1)
    }

    /// [`CacheNode::flush`] writing the dirty blocks back in `workers` parallel batches
    /// (see [`CachePartition::write_back_parallel`](crate::CachePartition::write_back_parallel)); a stop uses it to bound its time.
    pub fn flush_parallel(&self, export: &str, workers: usize) -> Result<()> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, 0, 0)?;
        let mut caches: Vec<CacheId> = r
            .rules
            .of_vol(ex.vol.id())
            .iter()
            .map(|e| e.cache)
            .collect();
        caches.sort_unstable();
        caches.dedup();
        for c in caches {
            Self::part_of(&r, c)?.write_back_parallel(Some(&ex.vol), workers)?;
        }
        ex.vol.backend().flush().map_err(|e| ex.vol.io_err(e))?;
        drop(r);
        self.settle_recovery(export)
    }

    /// A demotion from the level above: inserts the whole blocks of `data` (bytes of
    /// `export` at `offset`) clean into the cache a read rule routes each block to
    /// (whatever the client), without writing the backend
    /// ([`CachePartition::insert_clean`](crate::CachePartition::insert_clean)). Blocks no read rule routes to a cache are skipped.
    pub fn insert_clean(
        &self,
        export: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<crate::DemoteOutcome> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, data.len() as u64)?;
        let vol = &*ex.vol;
        let mut out = crate::DemoteOutcome::default();
        if data.is_empty() {
            return Ok(out);
        }
        let bs = self.block_size as u64;
        let rules = r.rules.of_vol(vol.id());
        let (first, last) = (offset / bs, (offset + data.len() as u64 - 1) / bs);
        let cache_of = |b: u64| {
            rules
                .iter()
                .find(|e| e.blocks.contains(&b) && e.rule.op != Some(Op::Write))
                .map(|e| e.cache)
        };
        let mut b = first;
        while b <= last {
            let target = cache_of(b);
            let mut e = b + 1;
            while e <= last && cache_of(e) == target {
                e += 1;
            }
            let lo = (b * bs).max(offset);
            let hi = (e * bs).min(offset + data.len() as u64);
            let part = &data[(lo - offset) as usize..(hi - offset) as usize];
            match target {
                Some(c) => {
                    let o = Self::part_of(&r, c)?.insert_clean(vol, lo, part)?;
                    out.inserted += o.inserted;
                    out.refreshed += o.refreshed;
                    out.skipped += o.skipped;
                }
                None => out.skipped += e - b,
            }
            b = e;
        }
        Ok(out)
    }

    /// Whether a write of `len` bytes at `offset` of `export` by `client` would be
    /// recorded in a durable write log (every block goes to a cache that has one).
    pub fn logged(&self, export: &str, client: &str, offset: u64, len: u64) -> Result<bool> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len)?;
        let mut all = true;
        Self::for_each_run(&r, &ex.vol, client, Op::Write, offset, len, |_, _, t| {
            all &= match t {
                Target::Cached(c) | Target::Coherent(c) => Self::part_of(&r, c)?.log().is_some(),
                Target::Direct => false,
            };
            Ok(())
        })?;
        Ok(all)
    }

    /// The allocation of `[offset, offset + len)` of `export` as seen through the caches:
    /// consecutive runs from `offset`, each `(length, hole)`, where a hole is unallocated
    /// on the backend ([`Backend::allocation`](crate::Backend::allocation)) and no cache holds newer bytes of it, so
    /// it reads as zeros. Blocks a cache holds dirty (not yet written back) are always
    /// allocated; clean ones hold what the backend holds. The caches are asked before the
    /// backend, so a block written back meanwhile is found on one or the other. The runs
    /// may stop short of `len`.
    pub fn block_status(&self, export: &str, offset: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len)?;
        let vol = &*ex.vol;
        if len == 0 {
            return Ok(Vec::new());
        }
        let bs = self.block_size as u64;
        let (first, end) = (offset / bs, (offset + len).div_ceil(bs));
        let mut held: Vec<u64> = r
            .caches
            .values()
            .flat_map(|c| c.part.unwritten_blocks(vol, first, end))
            .collect();
        held.sort_unstable();
        held.dedup();
        let runs = vol
            .backend()
            .allocation(offset, len)
            .map_err(|e| vol.io_err(e))?;
        // Split each hole around the held blocks inside it.
        let mut out: Vec<(u64, bool)> = Vec::with_capacity(runs.len());
        let mut push = |n: u64, hole: bool| match out.last_mut() {
            Some(last) if last.1 == hole => last.0 += n,
            _ if n > 0 => out.push((n, hole)),
            _ => {}
        };
        let mut at = offset;
        let mut next = 0; // first held block not yet passed
        for (n, hole) in runs {
            let stop = at + n;
            if !hole {
                push(n, false);
                at = stop;
                continue;
            }
            while next < held.len() && (held[next] + 1) * bs <= at {
                next += 1;
            }
            while at < stop {
                match held.get(next) {
                    Some(&b) if b * bs < stop => {
                        let (bstart, bend) = ((b * bs).max(at), ((b + 1) * bs).min(stop));
                        push(bstart - at, true);
                        push(bend - bstart, false);
                        at = bend;
                        if (b + 1) * bs <= bend {
                            next += 1;
                        }
                    }
                    _ => {
                        push(stop - at, true);
                        at = stop;
                    }
                }
            }
        }
        Ok(out)
    }

    /// Discards the whole blocks of `[offset, offset + len)` of `export`; they read back
    /// as zeros. Partial blocks at the ends are left alone.
    pub fn trim(&self, export: &str, client: &str, offset: u64, len: u64) -> Result<()> {
        let r = read_lock(&self.routing);
        let ex = Self::export(&r, export, offset, len)?;
        let vol = &*ex.vol;
        let bs = self.block_size as u64;
        Self::for_each_run(
            &r,
            vol,
            client,
            Op::Write,
            offset,
            len,
            |off, n, t| match t {
                Target::Cached(c) | Target::Coherent(c) => Self::part_of(&r, c)?.trim(vol, off, n),
                Target::Direct => {
                    let blocks = vol.whole_blocks(off, n);
                    if blocks.is_empty() {
                        return Ok(());
                    }
                    let start = blocks.start * bs;
                    let stop = (blocks.end * bs).min(vol.size());
                    vol.backend()
                        .trim(start, stop - start)
                        .map_err(|e| vol.io_err(e))
                }
            },
        )
    }
}
