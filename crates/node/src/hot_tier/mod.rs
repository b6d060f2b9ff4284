//! SANCACHE's hot-chunk tier: a fast backend holding the hottest chunks of a slow one.
//!
//! Owns: which chunks of the slow backend have a copy on the fast backend (placement by
//! an [`AdmissionPolicy`], eviction by LRU through [`policy::BlockCache`], the same
//! lookup loop the RAM cache and the simulator use), copying chunks up (migration) under a rate
//! limit, keeping the fast copies exact under concurrent writes and trims, and the tier's
//! counters ([`HotTierStats`]). Does not own: the RAM cache above it (in the node: RAM
//! partition -> hot tier -> slow backend; the tier sees only the RAM cache's misses and
//! write-throughs), per-volume IOPS or latency goals, or choosing the chunk size and
//! capacity (the controller does).
//!
//! How it works:
//! * The slow backend is cut into chunks of `chunk_size` bytes (the last may be partial);
//!   the fast backend into `capacity_chunks` slots of the same size. A resident chunk
//!   lives in one slot; the directory (a [`BlockCache`] keyed by chunk number, whose
//!   slots are the fast slots and whose policy is LRU) sits under one mutex that is never
//!   held across I/O. The admission policy is built once from its spec
//!   ([`build_admission`]) and consulted by the tier itself, because an admitted miss
//!   must also get a migration token before the chunk is placed.
//! * Every read, write or trim is split at chunk boundaries; each read/write piece
//!   *touches* its chunk once: the admission policy sees `access(chunk, resident)`, a hit
//!   refreshes the chunk's LRU position, and a miss the policy admits takes a token from the
//!   migration bucket (`max_migrations_per_sec`, burst of one second's worth; 0 means
//!   unlimited; see `clock`). Without a token the admission is counted as throttled and
//!   deferred: the policy is told (`AdmissionPolicy::deferred`), the chunk keeps its
//!   count and is placed at a later access. The policy reads the tier's clock
//!   (`AdmissionPolicy::tick`), so its periods (cooling, the adaptive rule) are of time.
//! * A migration places the chunk in the directory (a free slot, or the least recently
//!   touched chunk's, whose eviction the admission policy is told of), then copies the
//!   chunk slow -> fast holding the slot's lock for writing, and only then names the
//!   chunk as the slot's owner; a failed copy takes the chunk out again. Reads of resident
//!   chunks come from the fast copy.
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
//!   slot (so a reader that finds the chunk placed but not yet copied waits for the
//!   copy). Dropping a chunk clears the slot's owner before it frees the slot. Lock
//!   order: chunk stripe, then slot, then directory. No call holds two chunk stripes or
//!   two slots.
//!
//! Where it falls short: the tier is not kept exclusive of the RAM cache (SANCACHE keeps
//! its tier exclusive of the array cache; here a chunk's blocks may sit in both);
//! migrations run synchronously on the request that triggered them
//! (the request pays for copying a whole chunk); a trim takes the chunk locks one chunk at
//! a time and trims the slow backend chunk by chunk, so trimming a huge range costs one
//! slow call per chunk; a fast-device error fails the request rather than degrading to
//! slow-only; the rate limit counts migrations, not bytes; a chunk being copied already
//! counts as resident (a concurrent touch of it is a hit that waits for the copy, and
//! under heavy concurrent migration it may itself be chosen as an LRU victim).

mod clock;
#[cfg(test)]
mod tests;

pub use clock::{ManualClock, MonotonicClock, TimeSource};

use cache::{Backend, CacheError, Result};
use clock::TokenBucket;
use policy::admission::build_admission;
use policy::eviction::lru::Lru;
use policy::{Access, AdmissionPolicy, BlockCache, Params};
use serde::Serialize;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

const CHUNK_STRIPES: usize = 256;

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
    /// The placement policy's threshold now (`None` for `demand`).
    pub threshold: Option<u32>,
    /// Keys the placement policy holds counts for (`None` for `demand`).
    pub candidates: Option<u64>,
    /// Placing chunks (boosting on for the volume).
    pub enabled: bool,
    /// The threshold was set from outside ([`HotTier::set_threshold`]).
    pub controlled: bool,
}

/// The tier's directory and counters, under one mutex.
struct Dir {
    /// Resident chunks: chunk number -> fast slot, evicting by LRU.
    chunks: BlockCache<Lru>,
    admission: Box<dyn AdmissionPolicy>,
    bucket: TokenBucket,
    stats: HotTierStats,
    /// Misses may be placed (boosting on); off, the policy is not consulted and nothing
    /// is placed, while resident chunks are still served and kept exact.
    enabled: bool,
    /// The threshold was set from outside.
    controlled: bool,
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
    clock: Arc<dyn TimeSource>,
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
        clock: Arc<dyn TimeSource>,
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
        let admission = build_admission(&config.admission)?;
        let lru = Lru::from_params(&Params::empty("lru"))?;
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
                chunks: BlockCache::new(slots_n, lru),
                admission,
                bucket: TokenBucket::new(config.max_migrations_per_sec, now),
                stats: HotTierStats::default(),
                enabled: true,
                controlled: false,
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
            resident_chunks: d.chunks.len() as u64,
            threshold: d.admission.threshold(),
            candidates: d.admission.candidates(),
            enabled: d.enabled,
            controlled: d.controlled,
            ..d.stats
        }
    }

    /// The placement policy's canonical name with its parameters now.
    pub fn admission(&self) -> String {
        lock(&self.dir).admission.name()
    }

    /// Sets the placement threshold in place (a controller's, SANCACHE's rule run
    /// centrally): every candidate keeps its count, so a change of threshold never
    /// restarts the tier's learning. An adaptive policy stops adapting its own. Errors: a
    /// threshold below one, or a policy without one (`demand`).
    pub fn set_threshold(&self, n: u32) -> Result<()> {
        if n == 0 {
            return Err(CacheError::Invalid(
                "threshold: 0 is below one (a chunk is placed after at least one access)".into(),
            ));
        }
        let mut d = lock(&self.dir);
        if !d.admission.set_threshold(n) {
            return Err(CacheError::Invalid(format!(
                "threshold: the tier's placement policy `{}` has no threshold to set",
                d.admission.name()
            )));
        }
        d.controlled = true;
        Ok(())
    }

    /// Turns placing chunks on or off (boosting per volume). Off, the policy is not fed,
    /// so candidates keep the counts they had when it was turned off.
    pub fn set_enabled(&self, on: bool) {
        lock(&self.dir).enabled = on;
    }

    /// The resident chunks and their slots (fast offset = slot * chunk size), by chunk.
    pub fn resident(&self) -> Vec<(u64, u64)> {
        let d = lock(&self.dir);
        let mut v: Vec<(u64, u64)> = d.chunks.resident().map(|(c, s)| (c, s.into())).collect();
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
        d.admission.tick(now.as_secs_f64());
        let slot = d.chunks.lookup(c);
        let admit = d.enabled && d.admission.access(c, slot.is_some());
        match slot {
            Some(s) => {
                d.stats.hits += 1;
                d.chunks.access(c, |_, _| {});
                Touch::Hit(s.into())
            }
            None => {
                d.stats.misses += 1;
                if !admit {
                    Touch::Miss
                } else if d.bucket.take(now) {
                    Touch::Migrate
                } else {
                    // Deferred, not dropped: the chunk keeps its count.
                    d.admission.deferred(c);
                    d.stats.throttled += 1;
                    Touch::Miss
                }
            }
        }
    }

    /// Copies chunk `c` to the fast tier. The caller holds `c`'s chunk lock. Returns the
    /// chunk's bytes if it migrated, `None` if it was already resident.
    fn migrate_locked(&self, c: u64) -> io::Result<Option<Vec<u8>>> {
        let placed = {
            let mut d = lock(&self.dir);
            if d.chunks.lookup(c).is_some() {
                return Ok(None);
            }
            let Dir {
                chunks,
                admission,
                stats,
                ..
            } = &mut *d;
            chunks.access(c, |victim, _| {
                admission.on_evict(victim);
                stats.evictions += 1;
            })
        };
        let Access::Inserted(placed) = placed else {
            return Ok(None);
        };
        let slot = u64::from(placed);
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
            if d.chunks.lookup(c) == Some(placed) {
                d.chunks.remove(c);
            }
            return Err(e);
        }
        *owner = Some(c);
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
        let slot = lock(&self.dir).chunks.lookup(c);
        if let Some(s) = slot {
            if self.read_fast(c, s.into(), in_chunk, buf)? {
                return Ok(());
            }
        }
        self.slow.read_at(c * self.chunk + in_chunk, buf)
    }

    /// Drops chunk `c` from the tier if resident (the caller holds its chunk lock). The
    /// slot's owner is cleared before the directory frees the slot, so a migration that
    /// takes the slot next is never undone.
    fn drop_locked(&self, c: u64) {
        let Some(slot) = lock(&self.dir).chunks.lookup(c) else {
            return;
        };
        let mut owner = self.slots[slot as usize]
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if *owner == Some(c) {
            *owner = None;
        }
        let mut d = lock(&self.dir);
        if d.chunks.lookup(c) == Some(slot) {
            d.chunks.remove(c);
            d.admission.on_evict(c);
        }
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
