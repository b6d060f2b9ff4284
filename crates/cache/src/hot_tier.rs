//! SANCACHE's hot-chunk tier: a fast backend holding the hottest chunks of a slow one.
//!
//! Owns: which chunks of the slow backend have a copy on the fast backend (placement by
//! an [`AdmissionPolicy`], eviction by LRU), copying chunks up (migration) under a rate
//! limit, keeping the fast copies exact under concurrent writes and trims, and the tier's
//! counters ([`HotTierStats`]). Does not own: the RAM cache above it (in the node: RAM
//! partition -> hot tier -> slow backend; the tier sees only the RAM cache's misses and
//! write-throughs), per-volume IOPS or latency goals, or choosing the chunk size and
//! capacity (the controller does).
//!
//! How it works:
//! * The slow backend is cut into chunks of `chunk_size` bytes (the last may be partial);
//!   the fast backend into `capacity_chunks` slots of the same size. A resident chunk
//!   lives in one slot; the directory (chunk -> slot, plus an LRU order by last-touch
//!   stamp, a `BTreeMap`) sits under one mutex that is never held across I/O.
//! * Every read, write or trim is split at chunk boundaries; each read/write piece
//!   *touches* its chunk once: the admission policy sees `access(chunk, resident)`, a hit
//!   refreshes the LRU stamp, and a miss the policy admits takes a token from the
//!   migration bucket (`max_migrations_per_sec`, burst of one second's worth; 0 means
//!   unlimited). Without a token the admission is counted as throttled and dropped —
//!   MRFU has already forgotten the chunk's count, so it must earn its place again.
//! * A migration picks a free slot or evicts the least recently touched chunk (calling
//!   the policy's `on_evict`), copies the chunk slow -> fast and only then publishes it in
//!   the directory. Reads of resident chunks come from the fast copy.
//! * Writes are write-through: slow first, then the fast copy if the chunk is resident.
//!   Trim trims slow and drops the chunk from the tier. Flush flushes both.
//!
//! Data safety. Two lock families keep a fast copy from ever being stale:
//! * per-chunk striped mutexes (256): a write or trim holds its chunk's stripe across the
//!   slow I/O and the fast update; a migration holds it across the slow read, the fast
//!   write and the publication. So a write either finishes before the migration reads
//!   slow, or finds the chunk resident and updates the fast copy.
//! * per-slot `RwLock<Option<chunk>>` naming the slot's current owner: readers and
//!   writers of the fast copy hold it (read / write) and check the owner is still their
//!   chunk, falling back to slow (reads) or skipping the fast update (writes) when the
//!   chunk was evicted meanwhile; a migration holds it for writing while it refills the
//!   slot. Lock order: chunk stripe, then slot, then directory. No call holds two chunk
//!   stripes or two slots.
//!
//! Where it falls short: the tier is not kept exclusive of the RAM cache (SANCACHE keeps
//! its tier exclusive of the array cache; here a chunk's blocks may sit in both); a
//! throttled admission still counts as a migration inside `adaptive` (the policy cannot
//! be told it was refused), which biases its hits-per-migration ratio downwards while
//! the rate limit bites; migrations run synchronously on the request that triggered them
//! (the request pays for copying a whole chunk); a trim takes the chunk locks one chunk at
//! a time and trims the slow backend chunk by chunk, so trimming a huge range costs one
//! slow call per chunk; a fast-device error fails the request rather than degrading to
//! slow-only; the LRU directory costs O(log n) per touch; the rate limit counts
//! migrations, not bytes.

use crate::backend::Backend;
use crate::error::{CacheError, Result};
use crate::volume::lock;
use policy::admission::adaptive::Adaptive;
use policy::admission::build_admission;
use policy::{AdmissionPolicy, Params};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

const CHUNK_STRIPES: usize = 256;

/// A monotonic time source, injectable so rate limits can be tested deterministically.
pub trait Clock: Send + Sync {
    /// Time elapsed since an arbitrary fixed origin.
    fn now(&self) -> Duration;
}

/// The production clock: [`Instant`] since construction.
pub struct MonotonicClock {
    origin: Instant,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to (tests, simulations).
#[derive(Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(n, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

/// Configuration of a [`HotTier`].
#[derive(Clone, Debug)]
pub struct HotTierConfig {
    /// Bytes per chunk (SANCACHE uses 128 KiB to 1 MiB).
    pub chunk_size: u64,
    /// Chunks the fast backend holds.
    pub capacity_chunks: u64,
    /// Admission spec for [`policy::admission::build_admission`] (`mrfu`, `adaptive:...`, ...).
    pub admission: String,
    /// Migrations allowed per second (0 = unlimited).
    pub max_migrations_per_sec: u64,
}

impl Default for HotTierConfig {
    /// 1 MiB chunks, 1024 of them, `mrfu`, unlimited migrations.
    fn default() -> Self {
        HotTierConfig {
            chunk_size: 1 << 20,
            capacity_chunks: 1024,
            admission: "mrfu".into(),
            max_migrations_per_sec: 0,
        }
    }
}

/// Counters of a [`HotTier`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HotTierStats {
    /// Chunk touches (read or write pieces) that found the chunk resident.
    pub hits: u64,
    /// Chunk touches that did not.
    pub misses: u64,
    /// Chunks copied slow -> fast.
    pub migrations: u64,
    /// Admitted misses dropped by the migration rate limit.
    pub throttled: u64,
    /// Resident chunks evicted to make room.
    pub evictions: u64,
    /// Chunks resident now.
    pub resident_chunks: u64,
    /// The adaptive policy's current threshold (`None` for other policies).
    pub threshold: Option<u32>,
}

enum Admission {
    Adaptive(Box<Adaptive>),
    Other(Box<dyn AdmissionPolicy>),
}

impl Admission {
    fn build(spec: &str) -> Result<Self> {
        let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
        if name.trim().eq_ignore_ascii_case("adaptive") {
            let p = Params::parse("adaptive", params)?;
            Ok(Admission::Adaptive(Box::new(Adaptive::from_params(&p)?)))
        } else {
            Ok(Admission::Other(build_admission(spec)?))
        }
    }
    fn policy(&mut self) -> &mut dyn AdmissionPolicy {
        match self {
            Admission::Adaptive(a) => &mut **a,
            Admission::Other(o) => &mut **o,
        }
    }
    fn threshold(&self) -> Option<u32> {
        match self {
            Admission::Adaptive(a) => Some(a.state().threshold),
            Admission::Other(_) => None,
        }
    }
}

/// Token bucket over migrations.
struct Bucket {
    rate: u64,
    tokens: f64,
    last: Duration,
}

impl Bucket {
    fn take(&mut self, now: Duration) -> bool {
        if self.rate == 0 {
            return true;
        }
        let burst = self.rate as f64;
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.rate as f64).min(burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

struct Entry {
    slot: u64,
    stamp: u64,
}

struct Dir {
    admission: Admission,
    map: FxHashMap<u64, Entry>,
    lru: BTreeMap<u64, u64>,
    free: Vec<u64>,
    stamp: u64,
    bucket: Bucket,
    stats: HotTierStats,
}

impl Dir {
    fn bump(&mut self, chunk: u64) {
        self.stamp += 1;
        let s = self.stamp;
        if let Some(e) = self.map.get_mut(&chunk) {
            self.lru.remove(&e.stamp);
            e.stamp = s;
            self.lru.insert(s, chunk);
        }
    }
}

enum Touch {
    Hit(u64),
    Miss,
    Migrate,
}

/// A slow backend with a fast chunk tier in front; itself a [`Backend`].
pub struct HotTier {
    slow: Arc<dyn Backend>,
    fast: Arc<dyn Backend>,
    chunk: u64,
    capacity: u64,
    size: u64,
    clock: Arc<dyn Clock>,
    chunk_locks: Box<[Mutex<()>]>,
    slots: Box<[RwLock<Option<u64>>]>,
    dir: Mutex<Dir>,
}

impl HotTier {
    /// A tier of `config.capacity_chunks` chunks on `fast` in front of `slow`, timed by
    /// [`MonotonicClock`].
    pub fn new(
        slow: Arc<dyn Backend>,
        fast: Arc<dyn Backend>,
        config: HotTierConfig,
    ) -> Result<Self> {
        Self::with_clock(slow, fast, config, Arc::new(MonotonicClock::default()))
    }

    /// Like [`new`](Self::new) with an explicit clock. Errors: zero chunk size or
    /// capacity, a fast backend smaller than `capacity_chunks * chunk_size`, a capacity
    /// over 2^26 chunks, or a bad admission spec.
    pub fn with_clock(
        slow: Arc<dyn Backend>,
        fast: Arc<dyn Backend>,
        config: HotTierConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        if config.chunk_size == 0 {
            return Err(CacheError::Invalid(
                "hot tier: chunk size must be at least one byte".into(),
            ));
        }
        if config.capacity_chunks == 0 {
            return Err(CacheError::Invalid(
                "hot tier: capacity must be at least one chunk".into(),
            ));
        }
        let need = config.capacity_chunks.checked_mul(config.chunk_size);
        match need {
            Some(n) if n <= fast.size() => {}
            _ => {
                return Err(CacheError::Invalid(format!(
                    "hot tier: {} chunks of {} bytes do not fit the fast backend of {} bytes",
                    config.capacity_chunks,
                    config.chunk_size,
                    fast.size()
                )))
            }
        }
        let slots_n = usize::try_from(config.capacity_chunks)
            .ok()
            .filter(|&n| n <= 1 << 26)
            .ok_or_else(|| {
                CacheError::Invalid(format!(
                    "hot tier: {} chunks is more than the 2^26 a tier indexes; use larger chunks",
                    config.capacity_chunks
                ))
            })?;
        let admission = Admission::build(&config.admission)?;
        let rate = config.max_migrations_per_sec;
        let now = clock.now();
        Ok(HotTier {
            size: slow.size(),
            slow,
            fast,
            chunk: config.chunk_size,
            capacity: config.capacity_chunks,
            clock,
            chunk_locks: (0..CHUNK_STRIPES).map(|_| Mutex::new(())).collect(),
            slots: (0..slots_n).map(|_| RwLock::new(None)).collect(),
            dir: Mutex::new(Dir {
                admission,
                map: FxHashMap::default(),
                lru: BTreeMap::new(),
                free: (0..config.capacity_chunks).rev().collect(),
                stamp: 0,
                bucket: Bucket {
                    rate,
                    tokens: rate as f64,
                    last: now,
                },
                stats: HotTierStats::default(),
            }),
        })
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> u64 {
        self.chunk
    }

    /// Chunks the fast backend holds.
    pub fn capacity_chunks(&self) -> u64 {
        self.capacity
    }

    /// The counters now.
    pub fn stats(&self) -> HotTierStats {
        let d = lock(&self.dir);
        HotTierStats {
            resident_chunks: d.map.len() as u64,
            threshold: d.admission.threshold(),
            ..d.stats
        }
    }

    /// The resident chunks and their slots (fast offset = slot * chunk size), by chunk.
    pub fn resident(&self) -> Vec<(u64, u64)> {
        let d = lock(&self.dir);
        let mut v: Vec<(u64, u64)> = d.map.iter().map(|(&c, e)| (c, e.slot)).collect();
        v.sort_unstable();
        v
    }

    fn chunk_len(&self, c: u64) -> usize {
        (self.size - c * self.chunk).min(self.chunk) as usize
    }

    fn chunk_lock(&self, c: u64) -> std::sync::MutexGuard<'_, ()> {
        let i = (c.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % CHUNK_STRIPES;
        lock(&self.chunk_locks[i])
    }

    fn check(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("range {offset}+{len} beyond hot tier size {}", self.size),
            )),
        }
    }

    /// Calls `f(chunk, offset in chunk, range of the request)` per chunk piece.
    fn pieces(
        &self,
        offset: u64,
        len: u64,
        mut f: impl FnMut(u64, u64, std::ops::Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut done = 0u64;
        while done < len {
            let pos = offset + done;
            let n = (self.chunk - pos % self.chunk).min(len - done);
            f(
                pos / self.chunk,
                pos % self.chunk,
                done as usize..(done + n) as usize,
            )?;
            done += n;
        }
        Ok(())
    }

    /// One access to chunk `c`: feeds the policy, counts, refreshes LRU, takes a
    /// migration token for an admitted miss.
    fn touch(&self, c: u64) -> Touch {
        let now = self.clock.now();
        let mut d = lock(&self.dir);
        let slot = d.map.get(&c).map(|e| e.slot);
        let admit = d.admission.policy().access(c, slot.is_some());
        match slot {
            Some(s) => {
                d.stats.hits += 1;
                d.bump(c);
                Touch::Hit(s)
            }
            None => {
                d.stats.misses += 1;
                if !admit {
                    Touch::Miss
                } else if d.bucket.take(now) {
                    Touch::Migrate
                } else {
                    d.stats.throttled += 1;
                    Touch::Miss
                }
            }
        }
    }

    /// Copies chunk `c` to the fast tier. The caller holds `c`'s chunk lock. Returns the
    /// chunk's bytes if it migrated, `None` if it was already resident or no slot could be
    /// freed (every slot is mid-migration).
    fn migrate_locked(&self, c: u64) -> io::Result<Option<Vec<u8>>> {
        let slot = {
            let mut d = lock(&self.dir);
            if d.map.contains_key(&c) {
                return Ok(None);
            }
            if let Some(s) = d.free.pop() {
                s
            } else if let Some((&stamp, &victim)) = d.lru.iter().next() {
                d.lru.remove(&stamp);
                let Some(e) = d.map.remove(&victim) else {
                    return Ok(None);
                };
                d.admission.policy().on_evict(victim);
                d.stats.evictions += 1;
                e.slot
            } else {
                return Ok(None);
            }
        };
        let slot_lock = &self.slots[slot as usize];
        let mut owner = slot_lock.write().unwrap_or_else(|e| e.into_inner());
        *owner = None;
        let mut buf = vec![0u8; self.chunk_len(c)];
        let copied = self
            .slow
            .read_at(c * self.chunk, &mut buf)
            .and_then(|()| self.fast.write_at(slot * self.chunk, &buf));
        let mut d = lock(&self.dir);
        if let Err(e) = copied {
            d.free.push(slot);
            return Err(e);
        }
        *owner = Some(c);
        d.stamp += 1;
        let stamp = d.stamp;
        d.map.insert(c, Entry { slot, stamp });
        d.lru.insert(stamp, c);
        d.stats.migrations += 1;
        Ok(Some(buf))
    }

    /// Reads from the fast copy in `slot` if it still belongs to `c`; `false` if not.
    fn read_fast(&self, c: u64, slot: u64, in_chunk: u64, buf: &mut [u8]) -> io::Result<bool> {
        let owner = self.slots[slot as usize]
            .read()
            .unwrap_or_else(|e| e.into_inner());
        if *owner != Some(c) {
            return Ok(false);
        }
        self.fast.read_at(slot * self.chunk + in_chunk, buf)?;
        Ok(true)
    }

    /// Reads one piece without touching the policy: fast if resident, else slow.
    fn read_plain(&self, c: u64, in_chunk: u64, buf: &mut [u8]) -> io::Result<()> {
        let slot = lock(&self.dir).map.get(&c).map(|e| e.slot);
        if let Some(s) = slot {
            if self.read_fast(c, s, in_chunk, buf)? {
                return Ok(());
            }
        }
        self.slow.read_at(c * self.chunk + in_chunk, buf)
    }

    /// Drops chunk `c` from the tier if resident (the caller holds its chunk lock).
    fn drop_locked(&self, c: u64) {
        let slot = {
            let mut d = lock(&self.dir);
            let Some(e) = d.map.remove(&c) else { return };
            d.lru.remove(&e.stamp);
            d.admission.policy().on_evict(c);
            e.slot
        };
        let mut owner = self.slots[slot as usize]
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *owner = None;
        lock(&self.dir).free.push(slot);
    }
}

impl Backend for HotTier {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len() as u64)?;
        self.pieces(offset, buf.len() as u64, |c, in_chunk, r| {
            let out = &mut buf[r];
            match self.touch(c) {
                Touch::Hit(s) => {
                    if self.read_fast(c, s, in_chunk, out)? {
                        return Ok(());
                    }
                    self.slow.read_at(c * self.chunk + in_chunk, out)
                }
                Touch::Miss => self.slow.read_at(c * self.chunk + in_chunk, out),
                Touch::Migrate => {
                    let _g = self.chunk_lock(c);
                    match self.migrate_locked(c)? {
                        Some(data) => {
                            let at = in_chunk as usize;
                            out.copy_from_slice(&data[at..at + out.len()]);
                            Ok(())
                        }
                        None => self.read_plain(c, in_chunk, out),
                    }
                }
            }
        })
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check(offset, data.len() as u64)?;
        self.pieces(offset, data.len() as u64, |c, in_chunk, r| {
            let piece = &data[r];
            let _g = self.chunk_lock(c);
            self.slow.write_at(c * self.chunk + in_chunk, piece)?;
            match self.touch(c) {
                Touch::Hit(s) => {
                    let mut owner = self.slots[s as usize]
                        .write()
                        .unwrap_or_else(|e| e.into_inner());
                    if *owner == Some(c) {
                        if let Err(e) = self.fast.write_at(s * self.chunk + in_chunk, piece) {
                            // The fast copy may be half-written: never serve it again.
                            *owner = None;
                            drop(owner);
                            self.drop_locked(c);
                            return Err(e);
                        }
                    }
                    Ok(())
                }
                Touch::Miss => Ok(()),
                Touch::Migrate => self.migrate_locked(c).map(|_| ()),
            }
        })
    }

    fn flush(&self) -> io::Result<()> {
        self.slow.flush()?;
        self.fast.flush()
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check(offset, len)?;
        self.pieces(offset, len, |c, in_chunk, r| {
            let _g = self.chunk_lock(c);
            self.slow
                .trim(c * self.chunk + in_chunk, (r.end - r.start) as u64)?;
            self.drop_locked(c);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemBackend;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use std::thread;

    struct Rig {
        slow: Arc<MemBackend>,
        fast: Arc<MemBackend>,
        clock: Arc<ManualClock>,
        tier: HotTier,
    }

    /// A backend that stalls every few calls, so racing threads interleave inside the
    /// tier's copy and write-through windows.
    struct Jittery {
        inner: Arc<MemBackend>,
        calls: AtomicU64,
    }

    impl Jittery {
        fn stall(&self) {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(3) {
                thread::sleep(Duration::from_micros(20));
            } else {
                thread::yield_now();
            }
        }
    }

    impl Backend for Jittery {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.stall();
            let r = self.inner.read_at(offset, buf);
            self.stall();
            r
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.stall();
            let r = self.inner.write_at(offset, data);
            self.stall();
            r
        }
        fn flush(&self) -> io::Result<()> {
            self.inner.flush()
        }
        fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
            self.inner.trim(offset, len)
        }
    }

    fn rig(slow_size: u64, chunk: u64, capacity: u64, spec: &str, rate: u64) -> Rig {
        rig_with(slow_size, chunk, capacity, spec, rate, false)
    }

    fn rig_with(
        slow_size: u64,
        chunk: u64,
        capacity: u64,
        spec: &str,
        rate: u64,
        jitter: bool,
    ) -> Rig {
        let slow = Arc::new(MemBackend::new(slow_size));
        let fast = Arc::new(MemBackend::new(chunk * capacity));
        let clock = Arc::new(ManualClock::new());
        let slow_dyn: Arc<dyn Backend> = if jitter {
            Arc::new(Jittery {
                inner: slow.clone(),
                calls: AtomicU64::new(0),
            })
        } else {
            slow.clone()
        };
        let tier = HotTier::with_clock(
            slow_dyn,
            fast.clone(),
            HotTierConfig {
                chunk_size: chunk,
                capacity_chunks: capacity,
                admission: spec.into(),
                max_migrations_per_sec: rate,
            },
            clock.clone(),
        )
        .unwrap();
        Rig {
            slow,
            fast,
            clock,
            tier,
        }
    }

    /// Every resident chunk's fast copy equals the slow bytes.
    fn assert_fast_copies_exact(r: &Rig) {
        let slow = r.slow.snapshot();
        let fast = r.fast.snapshot();
        let cs = r.tier.chunk_size() as usize;
        for (c, s) in r.tier.resident() {
            let c = c as usize;
            let n = cs.min(slow.len() - c * cs);
            let s = s as usize;
            assert_eq!(
                &fast[s * cs..s * cs + n],
                &slow[c * cs..c * cs + n],
                "chunk {c}"
            );
        }
    }

    #[test]
    fn a_hot_set_ends_up_served_from_fast() {
        let r = rig(64 * 4096, 4096, 8, "mrfu", 0);
        let pattern: Vec<u8> = (0..64 * 4096u32).map(|i| (i % 253) as u8).collect();
        r.tier.write_at(0, &pattern).unwrap();
        let hot = [3u64, 17, 40, 9];
        let mut buf = vec![0u8; 512];
        let mut round = |k: u64| {
            for &c in &hot {
                let off = c * 4096 + (k * 512) % 4096;
                r.tier.read_at(off, &mut buf).unwrap();
                assert_eq!(buf, pattern[off as usize..off as usize + 512]);
            }
        };
        // Two rounds: MRFU (threshold 2) admits each hot chunk on its second miss.
        round(0);
        round(1);
        let s = r.tier.stats();
        assert_eq!(s.migrations, 4);
        assert_eq!(s.resident_chunks, 4);
        let slow_reads = r.slow.calls().0;
        for k in 2..102 {
            round(k);
        }
        assert_eq!(r.slow.calls().0, slow_reads, "slow reads kept growing");
        let s2 = r.tier.stats();
        assert_eq!(s2.hits - s.hits, 400);
        assert_eq!(s2.migrations, 4);
        assert_eq!(r.fast.calls().0, 400);
        assert_eq!(s2.threshold, None);
        assert_fast_copies_exact(&r);
    }

    #[test]
    fn a_scan_with_mrfu_threshold_two_migrates_nothing() {
        for (spec, migrations) in [
            ("mrfu:threshold=2", 0),
            ("mrfu:threshold=2,sequential=0", 64),
        ] {
            let r = rig(64 * 4096, 4096, 8, spec, 0);
            let mut buf = vec![0u8; 1024];
            for i in 0..256u64 {
                r.tier.read_at(i * 1024, &mut buf).unwrap();
            }
            let s = r.tier.stats();
            assert_eq!(s.migrations, migrations, "{spec}");
            assert_eq!(s.hits + s.misses, 256, "{spec}");
            if migrations == 0 {
                assert_eq!(r.fast.calls(), (0, 0, 0));
                assert_eq!(r.slow.calls().0, 256);
                assert_eq!(s.resident_chunks, 0);
            } else {
                assert_eq!(s.evictions, 64 - 8);
                assert_eq!(s.resident_chunks, 8);
            }
        }
    }

    #[test]
    fn rate_limit_caps_migrations_per_second() {
        let r = rig(200 * 512, 512, 64, "demand", 5);
        let mut buf = [0u8; 16];
        let read_chunks = |range: std::ops::Range<u64>, buf: &mut [u8]| {
            for c in range {
                r.tier.read_at(c * 512 + 7, buf).unwrap();
            }
        };
        read_chunks(0..40, &mut buf);
        let s = r.tier.stats();
        assert_eq!((s.migrations, s.throttled), (5, 35));
        r.clock.advance(Duration::from_secs(1));
        read_chunks(40..80, &mut buf);
        let s = r.tier.stats();
        assert_eq!((s.migrations, s.throttled), (10, 70));
        r.clock.advance(Duration::from_millis(200));
        read_chunks(80..90, &mut buf);
        assert_eq!(r.tier.stats().migrations, 11);
        // Idle time refills at most one second's worth.
        r.clock.advance(Duration::from_secs(10));
        read_chunks(90..110, &mut buf);
        let s = r.tier.stats();
        assert_eq!((s.migrations, s.throttled), (16, 94));
        assert_eq!(s.resident_chunks, 16);
        assert_eq!(r.fast.calls().1, 16);
    }

    #[test]
    fn writes_update_resident_copies_and_trim_drops_them() {
        let r = rig(10 * 100 + 30, 100, 3, "demand", 0);
        assert_eq!(r.tier.size(), 1030);
        // Chunk 10 is partial (30 bytes).
        r.tier.write_at(990, &[5u8; 40]).unwrap();
        let mut buf = [0u8; 40];
        r.tier.read_at(990, &mut buf).unwrap();
        assert_eq!(buf, [5u8; 40]);
        assert_eq!(r.tier.resident(), vec![(9, 0), (10, 1)]);
        r.tier.write_at(1000, &[6u8; 30]).unwrap();
        r.tier.read_at(990, &mut buf).unwrap();
        assert_eq!(&buf[..10], &[5u8; 10]);
        assert_eq!(&buf[10..], &[6u8; 30]);
        assert_fast_copies_exact(&r);
        r.tier.trim(995, 10).unwrap();
        assert!(r.tier.resident().is_empty());
        r.tier.read_at(990, &mut buf).unwrap();
        assert_eq!(&buf[..5], &[5u8; 5]);
        assert_eq!(&buf[5..15], &[0u8; 10]);
        assert_eq!(&buf[15..], &[6u8; 25]);
        r.tier.flush().unwrap();
        assert_eq!((r.slow.calls().2, r.fast.calls().2), (1, 1));
        let json = serde_json::to_string(&r.tier.stats()).unwrap();
        // Write misses migrated chunks 9 and 10; the read after the trim migrated them
        // again (from the trimmed slow bytes).
        assert!(
            json.contains(r#""hits":5,"misses":4,"migrations":4,"#),
            "{json}"
        );
        assert!(
            json.contains(r#""resident_chunks":2,"threshold":null"#),
            "{json}"
        );
        assert_fast_copies_exact(&r);
    }

    #[test]
    fn errors_name_the_problem() {
        let slow: Arc<dyn Backend> = Arc::new(MemBackend::new(1000));
        let fast: Arc<dyn Backend> = Arc::new(MemBackend::new(1000));
        let cfg = |chunk, cap, spec: &str| HotTierConfig {
            chunk_size: chunk,
            capacity_chunks: cap,
            admission: spec.into(),
            max_migrations_per_sec: 0,
        };
        let make = |c| HotTier::new(slow.clone(), fast.clone(), c);
        assert!(matches!(
            make(cfg(0, 1, "mrfu")),
            Err(CacheError::Invalid(_))
        ));
        assert!(matches!(
            make(cfg(100, 0, "mrfu")),
            Err(CacheError::Invalid(_))
        ));
        assert!(matches!(
            make(cfg(100, 11, "mrfu")),
            Err(CacheError::Invalid(_))
        ));
        assert!(matches!(
            make(cfg(u64::MAX, 2, "mrfu")),
            Err(CacheError::Invalid(_))
        ));
        assert!(matches!(
            make(cfg(100, 10, "psychic")),
            Err(CacheError::Policy(_))
        ));
        assert!(matches!(
            make(cfg(100, 10, "adaptive:decay=3")),
            Err(CacheError::Policy(_))
        ));
        let t = make(cfg(100, 10, "Adaptive:threshold=3")).unwrap();
        assert_eq!(t.stats().threshold, Some(3));
        let mut buf = [0u8; 10];
        assert!(t.read_at(995, &mut buf).is_err());
        assert!(t.write_at(u64::MAX - 3, &buf).is_err());
        assert!(t.trim(1000, 1).is_err());
        assert!(t.read_at(1000, &mut []).is_ok());
        assert_eq!(t.stats().hits + t.stats().misses, 0);
    }

    #[test]
    fn concurrent_writers_and_migrations_never_read_stale_data() {
        const WORDS: usize = 512;
        const WRITERS: usize = 4;
        let r = Arc::new(rig_with(WORDS as u64 * 8, 256, 4, "demand", 0, true));
        let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WORDS).map(|_| AtomicU64::new(0)).collect());
        let mut handles = Vec::new();
        for t in 0..WRITERS {
            let (r, acked) = (r.clone(), acked.clone());
            handles.push(thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
                let mut seq = vec![0u64; WORDS];
                for _ in 0..1500 {
                    let w = rng.gen_range(0..WORDS / WRITERS) * WRITERS + t;
                    seq[w] += 1;
                    r.tier
                        .write_at(w as u64 * 8, &seq[w].to_le_bytes())
                        .unwrap();
                    acked[w].store(seq[w], Ordering::SeqCst);
                    let mut b = [0u8; 8];
                    r.tier.read_at(w as u64 * 8, &mut b).unwrap();
                    assert_eq!(u64::from_le_bytes(b), seq[w], "word {w} read back stale");
                }
            }));
        }
        for t in 0..3u64 {
            let (r, acked) = (r.clone(), acked.clone());
            handles.push(thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(100 + t);
                for _ in 0..1500 {
                    let first = rng.gen_range(0..WORDS);
                    let n = rng.gen_range(1..=(WORDS - first).min(90));
                    let before: Vec<u64> = (first..first + n)
                        .map(|w| acked[w].load(Ordering::SeqCst))
                        .collect();
                    let mut b = vec![0u8; n * 8];
                    r.tier.read_at(first as u64 * 8, &mut b).unwrap();
                    for (i, word) in b.chunks_exact(8).enumerate() {
                        let v = u64::from_le_bytes(word.try_into().unwrap());
                        assert!(
                            v >= before[i],
                            "word {} stale: {v} < {}",
                            first + i,
                            before[i]
                        );
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        let mut all = vec![0u8; WORDS * 8];
        r.tier.read_at(0, &mut all).unwrap();
        for (w, word) in all.chunks_exact(8).enumerate() {
            assert_eq!(
                u64::from_le_bytes(word.try_into().unwrap()),
                acked[w].load(Ordering::SeqCst)
            );
        }
        let s = r.tier.stats();
        assert!(s.migrations > 100 && s.evictions > 100, "{s:?}");
        assert_fast_copies_exact(&r);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, Vec<u8>),
        Read(u64, u64),
        Trim(u64, u64),
        Tick(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..1000, proptest::collection::vec(1u8..=255, 0..200))
                .prop_map(|(o, d)| Op::Write(o, d)),
            4 => (0u64..1000, 0u64..300).prop_map(|(o, l)| Op::Read(o, l)),
            1 => (0u64..1000, 0u64..300).prop_map(|(o, l)| Op::Trim(o, l)),
            1 => (0u64..2000).prop_map(Op::Tick),
        ]
    }

    proptest! {
        #[test]
        fn bytes_match_a_flat_model(
            spec in prop::sample::select(vec![
                "demand", "mrfu:threshold=2,period=8", "adaptive:period=4,sequential=0",
                "threshold:n=3",
            ]),
            chunk in 1u64..150,
            capacity in 1u64..5,
            rate in 0u64..4,
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let r = rig(937, chunk, capacity, spec, rate);
            let model = MemBackend::new(937);
            for op in ops {
                match op {
                    Op::Write(o, d) => {
                        prop_assert_eq!(r.tier.write_at(o, &d).is_ok(), model.write_at(o, &d).is_ok());
                    }
                    Op::Read(o, l) => {
                        let (mut x, mut y) = (vec![0u8; l as usize], vec![0u8; l as usize]);
                        prop_assert_eq!(r.tier.read_at(o, &mut x).is_ok(), model.read_at(o, &mut y).is_ok());
                        prop_assert_eq!(x, y);
                    }
                    Op::Trim(o, l) => {
                        prop_assert_eq!(r.tier.trim(o, l).is_ok(), model.trim(o, l).is_ok());
                    }
                    Op::Tick(ms) => r.clock.advance(Duration::from_millis(ms)),
                }
                prop_assert!(r.tier.stats().resident_chunks <= capacity);
            }
            assert_fast_copies_exact(&r);
            prop_assert_eq!(r.slow.snapshot(), model.snapshot());
            let mut all = vec![0u8; 937];
            r.tier.read_at(0, &mut all).unwrap();
            prop_assert_eq!(all, model.snapshot());
        }
    }
}
