//! A partition: one cache of fixed-size blocks with its own capacity, eviction policy,
//! optional admission policy and write policy, safe to use from many threads.
//!
//! ## Layout
//! [`policy::BlockCache`] does the bookkeeping (directory key → [`Slot`], the policy, the
//! LRU history for switching by reconstruction). The data of slot `s` lives at
//! `arena[s * block_size ..]` in one `Vec<u8>` that grows on demand up to capacity × block
//! size, so a hit costs a lock, two hash probes and one `memcpy`, with no allocation. Each
//! slot has a dirty bit and a version (bumped on every change of its bytes). The partition
//! never holds more blocks than its capacity once a call returns (`BlockCache`'s invariant).
//!
//! ## Concurrency
//! One mutex per partition guards the `BlockCache` and all metadata; it is never held
//! across backend I/O. Three side tables make that safe:
//! * **write-back table** (`key → bytes`): a dirty block that is evicted (by a miss, a
//!   shrink, admission declining a write) moves here under the lock and is written to the
//!   backend after the lock is released. Reads and partial writes consult it before the
//!   backend, so the data is never invisible. A block is resident, or in this table, or
//!   neither — never both (a write to a block in the table takes its bytes into a new slot).
//! * **fill table** (`key → (readers, generation)`): a read miss registers here, reads the
//!   backend outside the lock, and installs the block only if the generation did not change
//!   meanwhile. Every write, trim or invalidation of a block bumps its generation, so a
//!   fill that raced with a write never installs stale bytes (it may still return them:
//!   the read overlapped the write, so either value is correct).
//! * **block locks** (striped mutexes of the [`Volume`]): every backend *write* of a block
//!   (write-through, write-around, write-back of a dirty block, trim) holds the block's
//!   stripe from before the backend call until the metadata update after it, so backend
//!   writes of one block happen in the order the cache sees them. A write-back takes its
//!   bytes from the table or the slot *while holding the stripe*, so it always writes the
//!   newest bytes and an older write-back can never land after a newer one. Write-back
//!   writes that only touch memory take no stripe. Evicted blocks are written back after
//!   the request has released its own stripes (no lock-order cycles).
//!
//! ## Writes
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
//! ## Control
//! Resize evicts the policy's victims and writes the dirty ones back before returning;
//! switching policy is SOPA's reconstruction (no block moves, nothing is written);
//! leaving write-back writes every dirty block back. Shrinking keeps the arena's memory
//! until the partition empties (slots above the new capacity are reused, not freed).

use crate::error::{CacheError, Result};
use crate::stats::{AccessObserver, CacheStats, Counters, OpOutcome};
use crate::volume::{lock, Volume, VolumeTable, BLOCK_BITS};
use crate::write_policy::WritePolicy;
use policy::{Access, AdmissionPolicy, BlockCache, Key, Slot};
use rustc_hash::{FxHashMap, FxHashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// How a request reaches a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// A rule sent it here: it is counted, the policy sees it, and it may be cached.
    Cached,
    /// It matched no rule but its blocks may be held here: it is served coherently (memory
    /// copies are read, writes go around), without accounting or placement.
    Coherent,
}

#[derive(Clone, Copy, Default)]
struct SlotMeta {
    dirty: bool,
    version: u64,
}

struct WbEntry {
    data: Arc<[u8]>,
    seq: u64,
}

struct Fill {
    readers: u32,
    gen: u64,
}

/// Everything but the `BlockCache`, so eviction callbacks can borrow it.
struct Store {
    bs: usize,
    arena: Vec<u8>,
    meta: Vec<SlotMeta>,
    dirty: FxHashSet<Key>,
    wb: FxHashMap<Key, WbEntry>,
    fills: FxHashMap<Key, Fill>,
    next_seq: u64,
    stats: Counters,
    write_policy: WritePolicy,
    eviction: String,
    observer: Option<Box<dyn AccessObserver>>,
    /// The arena runs of the last lent read, kept so lending a hit allocates nothing.
    lent_runs: Vec<Range<usize>>,
}

struct Inner {
    bc: BlockCache,
    st: Store,
}

/// Byte range of block `b` that a request `[offset, offset + len)` covers: the offset in
/// the block and the range in the request's buffer.
#[inline]
fn seg(b: u64, offset: u64, len: usize, bs: u64) -> (usize, Range<usize>) {
    let bstart = b * bs;
    let s = offset.max(bstart);
    let e = (offset + len as u64).min(bstart + bs);
    (
        (s - bstart) as usize,
        (s - offset) as usize..(e - offset) as usize,
    )
}

fn block_of(key: Key) -> u64 {
    key & ((1u64 << BLOCK_BITS) - 1)
}

impl Store {
    #[inline]
    fn block(&self, slot: Slot) -> &[u8] {
        let s = slot as usize * self.bs;
        &self.arena[s..s + self.bs]
    }

    fn ensure(&mut self, slot: Slot, capacity: usize) {
        let need = (slot as usize + 1) * self.bs;
        if self.arena.len() < need {
            let target = need.max((self.arena.len() * 2).min(capacity * self.bs));
            self.arena.resize(target, 0);
        }
        if self.meta.len() <= slot as usize {
            let target = (slot as usize + 1).max((self.meta.len() * 2).min(capacity));
            self.meta.resize(target, SlotMeta::default());
        }
    }

    fn set_dirty(&mut self, slot: Slot, key: Key, dirty: bool) {
        let m = &mut self.meta[slot as usize];
        if m.dirty != dirty {
            m.dirty = dirty;
            if dirty {
                self.dirty.insert(key);
            } else {
                self.dirty.remove(&key);
            }
        }
    }

    /// Copies a whole block into `slot` and records its state.
    fn place(&mut self, slot: Slot, key: Key, data: &[u8], dirty: bool, capacity: usize) {
        self.ensure(slot, capacity);
        let s = slot as usize * self.bs;
        self.arena[s..s + self.bs].copy_from_slice(data);
        self.meta[slot as usize].version += 1;
        self.set_dirty(slot, key, dirty);
    }

    /// Writes `src` at `in_off` of a resident slot.
    fn patch(&mut self, slot: Slot, key: Key, in_off: usize, src: &[u8], dirty: bool) {
        let s = slot as usize * self.bs + in_off;
        self.arena[s..s + src.len()].copy_from_slice(src);
        self.meta[slot as usize].version += 1;
        self.set_dirty(slot, key, dirty);
    }

    /// Called by `BlockCache` for every evicted block, before its slot is reused.
    fn evicted(&mut self, key: Key, slot: Slot, victims: &mut Vec<Key>) {
        self.stats.evictions += 1;
        if self.meta[slot as usize].dirty {
            let data: Arc<[u8]> = Arc::from(self.block(slot));
            self.set_dirty(slot, key, false);
            self.push_wb(key, data);
            victims.push(key);
        }
    }

    fn push_wb(&mut self, key: Key, data: Arc<[u8]>) {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.wb.insert(key, WbEntry { data, seq });
    }

    /// A block changed (write, trim, invalidation): in-flight fills must not install.
    #[inline]
    fn touch(&mut self, key: Key) {
        if !self.fills.is_empty() {
            if let Some(f) = self.fills.get_mut(&key) {
                f.gen += 1;
            }
        }
    }

    fn begin_fill(&mut self, key: Key) -> u64 {
        let f = self.fills.entry(key).or_insert(Fill { readers: 0, gen: 0 });
        f.readers += 1;
        f.gen
    }

    /// Ends a fill; true if no change touched the block since it began.
    fn end_fill(&mut self, key: Key, gen: u64) -> bool {
        let Some(f) = self.fills.get_mut(&key) else {
            return false;
        };
        let valid = f.gen == gen;
        f.readers -= 1;
        if f.readers == 0 {
            self.fills.remove(&key);
        }
        valid
    }
}

impl Inner {
    /// Places a whole block for a missed `key`; false if admission declined.
    fn insert(&mut self, key: Key, data: &[u8], dirty: bool, victims: &mut Vec<Key>) -> bool {
        let Inner { bc, st } = self;
        let cap = bc.capacity();
        match bc.access(key, |k, s| st.evicted(k, s, victims)) {
            Access::Inserted(s) | Access::Hit(s) => {
                st.place(s, key, data, dirty, cap);
                true
            }
            Access::Bypassed => false,
        }
    }

    /// Places dirty data for `key`; if admission declines it goes to the write-back table.
    fn insert_dirty(&mut self, key: Key, data: &[u8], victims: &mut Vec<Key>) {
        self.st.wb.remove(&key);
        if !self.insert(key, data, true, victims) {
            self.st.push_wb(key, Arc::from(data));
            victims.push(key);
        }
    }

    /// Applies a write-back write of `src` at `in_off` of block `key`. `Some(hit)` if
    /// applied, `None` if the block's old bytes are needed first (partial, not in memory).
    fn apply_back(
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

/// A resident range lent by [`Partition::with_resident`]: runs of the partition's arena,
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

/// One cache: capacity, policies, data, dirty tracking and write-back.
pub struct Partition {
    id: u64,
    bs: usize,
    volumes: Arc<VolumeTable>,
    inner: Mutex<Inner>,
}

impl Partition {
    /// A partition of `capacity` blocks of `block_size` bytes evicting by the policy spec
    /// `eviction` (see [`policy::build`]). `volumes` resolves the export of an evicted key.
    pub fn new(
        id: u64,
        capacity: usize,
        block_size: usize,
        eviction: &str,
        write_policy: WritePolicy,
        volumes: Arc<VolumeTable>,
    ) -> Result<Self> {
        if block_size == 0 {
            return Err(CacheError::Invalid("block size must be positive".into()));
        }
        let policy = policy::build(eviction)?;
        Ok(Partition {
            id,
            bs: block_size,
            volumes,
            inner: Mutex::new(Inner {
                bc: BlockCache::new(capacity, policy).with_history(),
                st: Store {
                    bs: block_size,
                    arena: Vec::new(),
                    meta: Vec::new(),
                    dirty: FxHashSet::default(),
                    wb: FxHashMap::default(),
                    fills: FxHashMap::default(),
                    next_seq: 0,
                    stats: Counters::default(),
                    write_policy,
                    eviction: eviction.to_string(),
                    observer: None,
                    lent_runs: Vec::new(),
                },
            }),
        })
    }

    /// The cache id this partition was created with.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Capacity in blocks.
    pub fn capacity(&self) -> usize {
        lock(&self.inner).bc.capacity()
    }

    /// Resident blocks.
    pub fn len(&self) -> usize {
        lock(&self.inner).bc.len()
    }

    /// Whether no block is resident.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The write policy.
    pub fn write_policy(&self) -> WritePolicy {
        lock(&self.inner).st.write_policy
    }

    /// Dirty blocks in memory (resident or waiting for write-back).
    pub fn dirty_blocks(&self) -> usize {
        let g = lock(&self.inner);
        g.st.dirty.len() + g.st.wb.len()
    }

    /// A snapshot of state and counters.
    pub fn stats(&self) -> CacheStats {
        let g = lock(&self.inner);
        let c = &g.st.stats;
        CacheStats {
            capacity: g.bc.capacity(),
            resident: g.bc.len(),
            dirty: g.st.dirty.len(),
            writing_back: g.st.wb.len(),
            eviction: g.st.eviction.clone(),
            admission: g.bc.admission().map_or("demand".into(), |a| a.name()),
            write_policy: g.st.write_policy.name().into(),
            hits: c.hits,
            misses: c.misses,
            read_bytes: c.read_bytes,
            write_bytes: c.write_bytes,
            evictions: c.evictions,
            writebacks: c.writebacks,
            writeback_errors: c.writeback_errors,
            coherent_ops: c.coherent_ops,
        }
    }

    /// Installs (or removes) the observer that sees every looked-up key.
    pub fn set_observer(&self, observer: Option<Box<dyn AccessObserver>>) {
        lock(&self.inner).st.observer = observer;
    }

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
        if !(first..=last).all(|b| bc.lookup(vol.key(b)).is_some()) {
            return None;
        }
        // Blocks whose slots follow each other in the arena (a range written in order)
        // make one run: one slice (one large copy) instead of one per block.
        let runs = &mut st.lent_runs;
        runs.clear();
        for b in first..=last {
            let key = vol.key(b);
            let (in_off, dst) = seg(b, offset, len, bs);
            if let Some(o) = st.observer.as_mut() {
                o.observe(key);
            }
            let Some(slot) = bc.lookup(key) else {
                continue; // checked above under the same lock
            };
            bc.access(key, |_, _| {});
            let src = slot as usize * self.bs + in_off;
            match runs.last_mut() {
                Some(r) if r.end == src => r.end += dst.len(),
                _ => runs.push(src..src + dst.len()),
            }
        }
        let r = f(Lent {
            arena: &st.arena,
            runs,
        });
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
        {
            let mut g = lock(&self.inner);
            let Inner { bc, st } = &mut *g;
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
                        bc.access(key, |_, _| {});
                    }
                    let s = slot as usize * self.bs + in_off;
                    buf[dst.clone()].copy_from_slice(&st.arena[s..s + dst.len()]);
                    out.hits += 1;
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
        let mut scratch = vec![0u8; misses.len() * self.bs];
        let mut err = None;
        let mut i = 0;
        while i < misses.len() {
            let mut j = i + 1;
            while j < misses.len() && misses[j].0 == misses[j - 1].0 + 1 {
                j += 1;
            }
            if let Err(e) = vol.read_blocks(misses[i].0, &mut scratch[i * self.bs..j * self.bs]) {
                err = Some(e);
                break;
            }
            i = j;
        }
        let mut victims = Vec::new();
        {
            let mut g = lock(&self.inner);
            let ev0 = g.st.stats.evictions;
            for (idx, &(b, gen)) in misses.iter().enumerate() {
                let key = vol.key(b);
                let valid = g.st.end_fill(key, gen);
                if err.is_some() || !cached || !valid {
                    continue;
                }
                if g.bc.lookup(key).is_none() && !g.st.wb.contains_key(&key) {
                    let data = &scratch[idx * self.bs..(idx + 1) * self.bs];
                    g.insert(key, data, false, &mut victims);
                }
            }
            out.evictions = g.st.stats.evictions - ev0;
        }
        drop(stripes);
        if let Some(e) = err {
            return Err(e);
        }
        for (idx, &(b, _)) in misses.iter().enumerate() {
            let (in_off, dst) = seg(b, offset, len, bs);
            let s = idx * self.bs + in_off;
            buf[dst.clone()].copy_from_slice(&scratch[s..s + dst.len()]);
        }
        out.writebacks += self.drain(victims).0;
        Ok(out)
    }

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
    fn write_cached(&self, vol: &Volume, offset: u64, data: &[u8]) -> Result<Option<OpOutcome>> {
        let bs = self.bs as u64;
        let len = data.len();
        let (first, last) = (offset / bs, (offset + len as u64 - 1) / bs);
        let mut out = OpOutcome::default();
        let mut victims = Vec::new();
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let mut evictions = 0;
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
    fn write_sync(
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
            for key in self.keys_in(&g, vol, first, end) {
                if let Some(slot) = g.bc.lookup(key) {
                    g.st.set_dirty(slot, key, false);
                    g.bc.remove(key);
                }
                g.st.wb.remove(&key);
            }
            Self::touch_range(&mut g.st, vol, first, end);
        }
        let start = first * bs;
        let stop = (end * bs).min(vol.size());
        let res = vol.backend().trim(start, stop - start);
        Self::touch_range(&mut lock(&self.inner).st, vol, first, end);
        res.map_err(|e| vol.io_err(e))
    }

    /// Keys of `vol`'s blocks `first..end` held in memory (resident or write-back table).
    fn keys_in(&self, g: &Inner, vol: &Volume, first: u64, end: u64) -> Vec<Key> {
        let (lo, hi) = (vol.key(first), vol.key(end));
        if end - first <= (g.bc.len() + g.st.wb.len()) as u64 {
            (first..end)
                .map(|b| vol.key(b))
                .filter(|k| g.bc.lookup(*k).is_some() || g.st.wb.contains_key(k))
                .collect()
        } else {
            let mut v: Vec<Key> =
                g.bc.resident()
                    .map(|(k, _)| k)
                    .filter(|k| (lo..hi).contains(k))
                    .collect();
            v.extend(g.st.wb.keys().copied().filter(|k| (lo..hi).contains(k)));
            v
        }
    }

    fn touch_range(st: &mut Store, vol: &Volume, first: u64, end: u64) {
        let (lo, hi) = (vol.key(first), vol.key(end));
        for (k, f) in st.fills.iter_mut() {
            if (lo..hi).contains(k) {
                f.gen += 1;
            }
        }
    }

    /// Writes the newest in-memory dirty copy of `block` (write-back table first, else a
    /// dirty resident slot) to the backend. The caller holds the block's stripe. Returns
    /// whether anything was written.
    fn settle(&self, vol: &Volume, block: u64) -> Result<bool> {
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
    fn drain(&self, victims: Vec<Key>) -> (u64, Option<CacheError>) {
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

    /// Writes every dirty block of `vol` (or of every volume) to its backend and flushes
    /// the backends written to. Returns the number of blocks written.
    pub fn write_back(&self, vol: Option<&Volume>) -> Result<u64> {
        let keys: Vec<Key> = {
            let g = lock(&self.inner);
            let want = |k: &Key| vol.is_none_or(|v| k >> BLOCK_BITS == u64::from(v.id()));
            g.st.dirty
                .iter()
                .chain(g.st.wb.keys())
                .copied()
                .filter(want)
                .collect()
        };
        let mut written = 0;
        let mut vols: Vec<Arc<Volume>> = Vec::new();
        for key in keys {
            let Some(v) = self.volumes.of_key(key) else {
                continue;
            };
            let b = block_of(key);
            let _g = v.lock_block(b);
            if self.settle(&v, b)? {
                written += 1;
                if !vols.iter().any(|x| x.id() == v.id()) {
                    vols.push(v.clone());
                }
            }
        }
        for v in vols {
            v.backend().flush().map_err(|e| v.io_err(e))?;
        }
        Ok(written)
    }

    /// Writes back and drops every block of `vol` in `first..end` (a rule stopped sending
    /// them here). No data request for these blocks may run concurrently.
    pub fn drop_blocks(&self, vol: &Volume, first: u64, end: u64) -> Result<()> {
        let keys = {
            let g = lock(&self.inner);
            self.keys_in(&g, vol, first, end)
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

    /// Changes the capacity. Shrinking evicts the policy's victims and writes the dirty
    /// ones back before returning.
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
        let (writebacks, err) = self.drain(victims);
        match err {
            Some(e) => Err(e),
            None => Ok(OpOutcome {
                evictions,
                writebacks,
                ..Default::default()
            }),
        }
    }

    /// Switches the eviction policy by reconstruction (no block moves, nothing is written).
    pub fn switch_policy(&self, spec: &str) -> Result<()> {
        let new = policy::build(spec)?;
        let mut g = lock(&self.inner);
        g.bc.switch_policy(new);
        g.st.eviction = spec.to_string();
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

    /// Whether `key` is resident (tests and diagnostics).
    pub fn contains(&self, key: Key) -> bool {
        lock(&self.inner).bc.lookup(key).is_some()
    }
}
