//! Single-cache trace simulation: replay requests through one [`BlockCache`] and count.
//!
//! Semantics (chosen to match libCacheSim where it has a notion, and written down here
//! because they decide every miss ratio):
//! * reads and writes are lookups (write-allocate), counted in `accesses`;
//! * a trim removes the covered keys and is not a lookup; a flush is neither;
//! * object mode: one lookup per request, its bytes the request length; block mode: one
//!   lookup per covered block, each `block_size` bytes;
//! * `miss_ratio = misses / accesses`, `byte_miss_ratio = miss_bytes / bytes`.

use crate::dirmap::Hashed;
use crate::policy::{EvictionPolicy, Slot};
use crate::{with_policy, BlockCache, PolicyError, PolicyVisitor};
use serde::Serialize;
use std::time::Instant;
use trace::{KeyMode, Op, Plain, Request, RequestStream, TraceError, BATCH};

/// Counts from one simulation.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SimStats {
    /// Requests read from the trace (all ops).
    pub requests: u64,
    /// Cache lookups (one per request in object mode, one per block in block mode).
    pub accesses: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// Bytes looked up.
    pub bytes: u64,
    /// Bytes that missed.
    pub miss_bytes: u64,
    /// Wall-clock seconds of the replay (reading the trace included).
    pub seconds: f64,
}

impl SimStats {
    /// Misses per lookup (0 for an empty trace).
    pub fn miss_ratio(&self) -> f64 {
        if self.accesses == 0 {
            0.0
        } else {
            self.misses as f64 / self.accesses as f64
        }
    }
    /// Missed bytes per byte looked up (0 for an empty trace).
    pub fn byte_miss_ratio(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.miss_bytes as f64 / self.bytes as f64
        }
    }
    /// Requests per second of wall-clock time.
    pub fn requests_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.requests as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// An error of a simulation: a bad policy spec or a bad trace.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The policy spec is wrong.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// How often (in requests) the progress callback is called.
pub const PROGRESS_EVERY: u64 = 1 << 20;

/// How many requests ahead of the one being served the replay starts loading a lookup's
/// directory bucket ([`BlockCache::prefetch`]), in object mode.
pub const PREFETCH_DIR: usize = 16;

/// How many requests ahead the replay starts loading a resident key's slot metadata
/// ([`BlockCache::prefetch_slot`]), for policies whose hits touch it.
pub const PREFETCH_SLOT: usize = 8;

/// How many requests ahead the replay starts loading a resident key's list neighbours
/// ([`BlockCache::prefetch_neighbours`]), for policies whose hits touch them.
pub const PREFETCH_NEIGHBOURS: usize = 4;

/// Slots found by the second prefetch stage, kept for the third (a power of two above
/// [`PREFETCH_SLOT`]).
const RING: usize = 16;

/// Replays `requests` through `cache` in `mode`. `progress(n)` is called about every
/// [`PROGRESS_EVERY`] requests (after the batch that reaches it) with the number of
/// requests since the last call, and once at the end.
pub fn replay<P: EvictionPolicy>(
    cache: &mut BlockCache<P>,
    mode: KeyMode,
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimStats, TraceError> {
    replay_stream(cache, mode, Plain(requests), progress)
}

/// [`replay`] reading `requests` in batches ([`RequestStream::next_batch`]): the trace
/// reader decodes a batch in one tight loop and the cache runs over it in another, with
/// no per-request call through the (often boxed) stream and the progress check once a
/// batch.
pub fn replay_stream<P: EvictionPolicy>(
    cache: &mut BlockCache<P>,
    mode: KeyMode,
    mut requests: impl RequestStream,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimStats, TraceError> {
    let start = Instant::now();
    let mut s = SimStats::default();
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut hashed: Vec<Hashed> = Vec::with_capacity(BATCH);
    let mut since = 0u64;
    let deep = cache.policy().prefetches_hits();
    loop {
        batch.clear();
        let res = requests.next_batch(&mut batch, BATCH);
        s.requests += batch.len() as u64;
        since += batch.len() as u64;
        if since >= PROGRESS_EVERY {
            progress(since);
            since = 0;
        }
        let object = mode == KeyMode::Object;
        if object {
            // Each key hashed once, for its prefetch and its access.
            hashed.clear();
            hashed.extend(batch.iter().map(|r| Hashed::new(r.object_key())));
        }
        let mut ring = [None::<Slot>; RING];
        for (i, r) in batch.iter().enumerate() {
            if object {
                // Start the memory loads of later requests' lookups now (see
                // `BlockCache::prefetch`), in stages so no stage waits for a load: the
                // directory bucket of the request `PREFETCH_DIR` ahead; for a policy whose
                // hits touch per-slot metadata (`EvictionPolicy::prefetches_hits`), that
                // metadata of the one `PREFETCH_SLOT` ahead (its bucket now in cache), and
                // the list neighbours of the one `PREFETCH_NEIGHBOURS` ahead, whose slot
                // the second stage left in `ring`. Hints for trims and flushes are harmless.
                if let Some(&far) = hashed.get(i + PREFETCH_DIR) {
                    cache.prefetch(far);
                }
                if deep {
                    if let Some(&mid) = hashed.get(i + PREFETCH_SLOT) {
                        ring[(i + PREFETCH_SLOT) % RING] = cache.prefetch_slot(mid);
                    }
                    if let Some(slot) = ring[(i + PREFETCH_NEIGHBOURS) % RING].take() {
                        cache.prefetch_neighbours(slot);
                    }
                }
            }
            match r.op {
                Op::Read | Op::Write if object => {
                    let bytes = r.bytes_per_key(mode);
                    s.accesses += 1;
                    s.bytes += bytes;
                    if !cache.access_hashed(hashed[i], |_, _| {}).is_hit() {
                        s.misses += 1;
                        s.miss_bytes += bytes;
                    }
                }
                Op::Read | Op::Write => {
                    let bytes = r.bytes_per_key(mode);
                    r.for_each_key(mode, |k| {
                        s.accesses += 1;
                        s.bytes += bytes;
                        if !cache.access(k, |_, _| {}).is_hit() {
                            s.misses += 1;
                            s.miss_bytes += bytes;
                        }
                    });
                }
                Op::Trim => r.for_each_key(mode, |k| {
                    cache.remove(k);
                }),
                Op::Flush => {}
            }
        }
        // The requests before an error were replayed, as they were one by one.
        res?;
        if batch.is_empty() {
            break;
        }
    }
    progress(since);
    s.seconds = start.elapsed().as_secs_f64();
    Ok(s)
}

/// Simulates policy `spec` with `capacity` blocks over `requests`, monomorphized for the
/// policy's concrete type.
pub fn simulate<I>(
    spec: &str,
    capacity: usize,
    mode: KeyMode,
    requests: I,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimStats, SimError>
where
    I: Iterator<Item = Result<Request, TraceError>>,
{
    simulate_stream(spec, capacity, mode, Plain(requests), progress)
}

/// [`simulate`] reading `requests` in batches: what to call with a trace reader
/// ([`trace::open`], a boxed [`RequestStream`], [`trace::SkipBad`]).
pub fn simulate_stream<S: RequestStream>(
    spec: &str,
    capacity: usize,
    mode: KeyMode,
    requests: S,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimStats, SimError> {
    struct Run<'a, S> {
        capacity: usize,
        mode: KeyMode,
        requests: S,
        progress: &'a (dyn Fn(u64) + Sync),
    }
    impl<S: RequestStream> PolicyVisitor for Run<'_, S> {
        type Output = Result<SimStats, TraceError>;
        fn visit<P: EvictionPolicy + 'static>(self, policy: P) -> Self::Output {
            let mut cache = BlockCache::new(self.capacity, policy);
            replay_stream(&mut cache, self.mode, self.requests, self.progress)
        }
    }
    Ok(with_policy(
        spec,
        Run {
            capacity,
            mode,
            requests,
            progress,
        },
    )??)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_mode_counts_blocks_and_bytes() {
        // Two 8 KiB reads of the same range: 2 block misses, then 2 hits.
        let reqs = vec![Request::read(0, 8192), Request::read(0, 8192)];
        let s = simulate(
            "lru",
            4,
            KeyMode::Block { block_size: 4096 },
            reqs.into_iter().map(Ok),
            &|_| {},
        )
        .unwrap();
        assert_eq!((s.requests, s.accesses, s.misses), (2, 4, 2));
        assert_eq!((s.bytes, s.miss_bytes), (16384, 8192));
        assert_eq!(s.miss_ratio(), 0.5);
    }

    #[test]
    fn prefetching_ahead_changes_no_count() {
        // The replay prefetches lookups up to `PREFETCH_DIR` requests early; the counts
        // must be those of a plain access loop, for policies with and without hints.
        let mut x = 11u64;
        let keys: Vec<u64> = (0..20_000)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let r = (x >> 33) % 1000;
                r * r / 997 // skewed towards small keys
            })
            .collect();
        for spec in ["lru", "fifo", "clock", "arc", "lirs"] {
            let reqs = keys.iter().map(|&k| Ok(Request::read(k * 512, 512)));
            let s = simulate(spec, 64, KeyMode::Object, reqs, &|_| {}).unwrap();
            let mut cache = BlockCache::new(64, crate::build(spec).unwrap());
            let misses = keys
                .iter()
                .filter(|&&k| {
                    !cache
                        .access(Request::read(k * 512, 512).object_key(), |_, _| {})
                        .is_hit()
                })
                .count() as u64;
            assert_eq!((s.accesses, s.misses), (20_000, misses), "{spec}");
            assert!(misses > 1000 && misses < 19_000, "{spec}: {misses}");
        }
    }

    #[test]
    fn trim_invalidates() {
        let mut t = Request::read(0, 512);
        t.op = Op::Trim;
        let reqs = vec![Request::read(0, 512), t, Request::read(0, 512)];
        let s = simulate("lru", 4, KeyMode::Object, reqs.into_iter().map(Ok), &|_| {}).unwrap();
        assert_eq!((s.accesses, s.misses), (2, 2));
    }
}
