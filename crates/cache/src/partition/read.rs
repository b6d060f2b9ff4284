//! The read path of a partition: hits are copied (or lent, [`Lent`]) under the lock;
//! misses register in the fill table, read the backend outside the lock while holding the
//! blocks' stripes, and install what they read unless a write changed the block meanwhile.
//! A missed block the request covers whole is read straight into the caller's buffer and
//! installed from there (one copy, into its slot); only a request's partial end blocks
//! are read into a scratch block first.
//! A lower exclusive level (`demote`) keeps nothing a routed read serves: clean hits are
//! dropped once copied, misses are not installed.

use super::exclusive::Exclusive;
use super::{seg, CachePartition, Inner, Route};
use crate::error::Result;
use crate::stats::OpOutcome;
use crate::volume::{lock, Volume};
use std::ops::Range;

/// A resident range lent by [`CachePartition::with_resident`]: runs of the partition's arena,
/// in the range's order, valid while the partition's lock is held.
#[derive(Clone, Copy)]
pub struct Lent<'a> {
    arena: &'a [u8],
    runs: &'a [Range<usize>],
}

impl<'a> Lent<'a> {
    const EMPTY: Lent<'static> = Lent {
        arena: &[],
        runs: &[],
    };

    /// The runs as slices, in order.
    pub fn slices(self) -> impl ExactSizeIterator<Item = &'a [u8]> {
        self.runs.iter().map(move |r| &self.arena[r.clone()])
    }

    /// Copies the range into `buf` (of the range's length).
    pub fn copy_to(self, buf: &mut [u8]) {
        let mut at = 0;
        for s in self.slices() {
            buf[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
    }
}

impl CachePartition {
    /// Hands `f` the `len` bytes of `vol` at `offset` as runs of the arena ([`Lent`]), in
    /// order, only if every block is resident; `None` (and nothing changed, `f` not called)
    /// if any block is not. Counts as a read of those blocks. `f` runs under the
    /// partition's lock, so it must not block: the node copies small hits out of it and
    /// sends large ones straight to the client's socket, one copy fewer.
    pub fn with_resident<R>(
        &self,
        vol: &Volume,
        offset: u64,
        len: usize,
        f: impl FnOnce(Lent<'_>) -> R,
    ) -> Option<(R, OpOutcome)> {
        if len == 0 {
            return Some((f(Lent::EMPTY), OpOutcome::default()));
        }
        let bs = self.bs as u64;
        let (first, last) = (offset / bs, (offset + len as u64 - 1) / bs);
        let mut g = lock(&self.inner);
        let Inner { bc, st } = &mut *g;
        // One directory probe per block finds its slot, or finds it missing before
        // anything changed. Blocks whose slots follow each other in the arena (a range
        // written in order) make one run: one slice (one large copy) instead of one per
        // block.
        let runs = &mut st.lent_runs;
        runs.clear();
        let slots = &mut st.lent_slots;
        slots.clear();
        for b in first..=last {
            let slot = bc.lookup(vol.key(b))?;
            slots.push(slot);
            let (in_off, dst) = seg(b, offset, len, bs);
            let src = slot as usize * self.bs + in_off;
            match runs.last_mut() {
                Some(r) if r.end == src => r.end += dst.len(),
                _ => runs.push(src..src + dst.len()),
            }
        }
        // All resident: count the hits on the slots found, without probing again.
        for (b, &slot) in (first..=last).zip(slots.iter()) {
            if let Some(o) = st.observer.as_mut() {
                o.observe(vol.key(b));
            }
            bc.access_slot(slot);
        }
        let r = f(Lent {
            arena: &st.arena,
            runs,
        });
        if matches!(st.exclusive, Exclusive::Lower) {
            for (b, &slot) in (first..=last).zip(st.lent_slots.iter()) {
                if !st.meta[slot as usize].dirty {
                    bc.remove(vol.key(b));
                    st.stats.dropped_on_read += 1;
                }
            }
        }
        let hits = last - first + 1;
        st.stats.hits += hits;
        st.stats.read_bytes += len as u64;
        Some((
            r,
            OpOutcome {
                hits,
                ..OpOutcome::default()
            },
        ))
    }

    /// Reads `buf.len()` bytes of `vol` at `offset` (the caller checked the range).
    pub fn read(
        &self,
        vol: &Volume,
        offset: u64,
        buf: &mut [u8],
        route: Route,
    ) -> Result<OpOutcome> {
        let mut out = OpOutcome::default();
        if buf.is_empty() {
            return Ok(out);
        }
        let bs = self.bs as u64;
        let len = buf.len();
        let (first, last) = (offset / bs, (offset + len as u64 - 1) / bs);
        let cached = route == Route::Cached;
        let mut misses: Vec<(u64, u64)> = Vec::new();
        let keep;
        {
            let mut g = lock(&self.inner);
            let Inner { bc, st } = &mut *g;
            keep = !(cached && matches!(st.exclusive, Exclusive::Lower));
            for b in first..=last {
                let key = vol.key(b);
                let (in_off, dst) = seg(b, offset, len, bs);
                if cached {
                    if let Some(o) = st.observer.as_mut() {
                        o.observe(key);
                    }
                }
                if let Some(slot) = bc.lookup(key) {
                    if cached {
                        bc.access_slot(slot);
                    }
                    let s = slot as usize * self.bs + in_off;
                    buf[dst.clone()].copy_from_slice(&st.arena[s..s + dst.len()]);
                    out.hits += 1;
                    if !keep && !st.meta[slot as usize].dirty {
                        bc.remove(key);
                        st.stats.dropped_on_read += 1;
                    }
                } else if let Some(e) = st.wb.get(&key) {
                    buf[dst.clone()].copy_from_slice(&e.data[in_off..in_off + dst.len()]);
                    out.hits += 1;
                } else {
                    misses.push((b, st.begin_fill(key)));
                    out.misses += 1;
                }
            }
            if cached {
                st.stats.hits += out.hits;
                st.stats.misses += out.misses;
                st.stats.read_bytes += len as u64;
            } else {
                st.stats.coherent_ops += 1;
            }
        }
        if misses.is_empty() {
            return Ok(out);
        }
        // Fills hold the stripes of the missed blocks from the backend read until the data
        // is installed, like every backend write does, so a fill never reads the backend
        // in the middle of a write-back or write-through of the same block.
        let stripes = vol.lock_blocks(misses[0].0, misses[misses.len() - 1].0);
        // A missed block the request covers whole is read straight into `buf` (the reply)
        // and installed from there; only a block the request covers in part (its
        // unaligned ends, at most two) goes through `scratch`. Consecutive whole blocks
        // are one backend read.
        let end = offset + len as u64;
        let whole = |b: u64| b * bs >= offset && (b + 1) * bs <= end;
        let partial = misses.iter().filter(|&&(b, _)| !whole(b)).count();
        let mut scratch = vec![0u8; partial * self.bs];
        // Where each miss's bytes are: `Ok(at)` in `buf`, `Err(at)` in `scratch`.
        let mut at: Vec<std::result::Result<usize, usize>> = Vec::with_capacity(misses.len());
        let mut err = None;
        let mut i = 0;
        while i < misses.len() {
            let b = misses[i].0;
            let res = if whole(b) {
                let mut j = i + 1;
                while j < misses.len() && misses[j].0 == misses[j - 1].0 + 1 && whole(misses[j].0) {
                    j += 1;
                }
                let start = (b * bs - offset) as usize;
                at.extend((0..j - i).map(|k| Ok(start + k * self.bs)));
                let res = vol.read_blocks(b, &mut buf[start..start + (j - i) * self.bs]);
                i = j;
                res
            } else {
                let s = at.iter().filter(|w| w.is_err()).count() * self.bs;
                at.push(Err(s));
                i += 1;
                vol.read_blocks(b, &mut scratch[s..s + self.bs])
            };
            if let Err(e) = res {
                err = Some(e);
                break;
            }
        }
        let mut victims = Vec::new();
        {
            let mut g = lock(&self.inner);
            let ev0 = g.st.stats.evictions;
            for (idx, &(b, gen)) in misses.iter().enumerate() {
                let key = vol.key(b);
                let valid = g.st.end_fill(key, gen);
                if err.is_some() || !cached || !valid || !keep {
                    continue;
                }
                if g.bc.lookup(key).is_none() && !g.st.wb.contains_key(&key) {
                    let data = match at[idx] {
                        Ok(s) => &buf[s..s + self.bs],
                        Err(s) => &scratch[s..s + self.bs],
                    };
                    g.insert(key, data, false, &mut victims);
                }
            }
            out.evictions = g.st.stats.evictions - ev0;
        }
        drop(stripes);
        if let Some(e) = err {
            return Err(e);
        }
        for (&(b, _), w) in misses.iter().zip(&at) {
            if let Err(s) = *w {
                let (in_off, dst) = seg(b, offset, len, bs);
                buf[dst.clone()].copy_from_slice(&scratch[s + in_off..s + in_off + dst.len()]);
            }
        }
        // Dirty blocks this fill evicted wait in the write-back table for the cleaner
        // (`dirty`): a read never pays for writing back what writers dirtied.
        Ok(out)
    }
}
