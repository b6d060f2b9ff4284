//! Exclusive levels live (Moirai's scale-out, DEMOTE): a level-1 node sends the clean
//! blocks its exclusive caches evict to the level-2 node(s) its export is served by, so
//! the two levels act as one LRU; the level-2 cache drops the blocks it serves back (see
//! `cache::partition`'s `demote` module for both ends inside the cache).
//!
//! ## Transport
//! An authenticated HTTP endpoint on the level-2 node, `POST /v1/demote/{export}` (the
//! API's bearer token; see [`crate::api`]), whose body is a batch of records
//! `offset: u64 LE, length: u32 LE, bytes` ([`encode`] / [`decode`]). HTTP rather than
//! NBD because NBD has no command that means "keep these bytes clean, do not write the
//! disk": a write would reach the disk, and a private NBD extension would have to be
//! taught to the `nbd` crate's both ends and to every other client and server on the
//! path; the control API already has authentication and a blocking client (`ureq`).
//!
//! ## Level 1: the queue ([`Demoter`])
//! The cache hands each clean victim to [`Demoter::sink`] under its partition's lock: the
//! sink maps the export's offset to the level-2 member (through the stripe map for a
//! striped export) and appends `(member, member offset, bytes)` to one bounded queue
//! ([`QUEUE_BYTES`]); when the queue is full the block is dropped and counted — the read
//! path never waits. One sender thread takes batches of up to [`BATCH_BYTES`] for one
//! member and posts them.
//!
//! ## Never stale
//! A demoted copy must never be older than what level 2 holds or will be written. Every
//! upstream member backend of an export with `upstream_api` is wrapped in a [`Guarded`]
//! backend: before a write or trim of a range goes to level 2, the queued demotions it
//! overlaps are cancelled, and it waits until a batch in flight that overlaps it has been
//! answered (applied at level 2); a read cancels overlapping queued demotions (level 1
//! holds the block again). The cache queues a demotion under the block's stripe and never
//! while a write of the block is in flight (see `cache`), so a write reaching level 2
//! after a demotion of the same block was queued always lands after it: level 2's
//! write policy then updates or drops the demoted copy as for any write. Dirty blocks are
//! never demoted (write-back writes them back). Known limit: a batch whose HTTP request
//! times out ([`SEND_TIMEOUT`]) is taken as not applied; a level 2 that applies it later
//! still could install a copy a later write already replaced.

use crate::error::NodeError;
use cache::{Backend, DemoteSink};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::Duration;

/// Most bytes of demoted blocks queued at level 1; past it new demotions are dropped.
pub const QUEUE_BYTES: usize = 32 << 20;
/// Most bytes of block data in one batch (one HTTP request).
pub const BATCH_BYTES: usize = 1 << 20;
/// How long a batch may take to be answered.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a record's header (`offset: u64`, `length: u32`, little-endian).
const HEADER: usize = 12;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A level-2 node's API where one upstream member's demotions go.
#[derive(Clone, Debug)]
pub struct DemoteTarget {
    /// `http://HOST:PORT`.
    pub url: String,
    /// The level-2 node's API token.
    pub token: String,
    /// The export on the level-2 node.
    pub export: String,
}

/// How a level-1 export's offsets map to members (one, or striped by `unit`).
struct Route {
    members: Vec<usize>,
    unit: u64,
}

impl Route {
    fn locate(&self, offset: u64) -> (usize, u64) {
        let n = self.members.len() as u64;
        if n == 1 {
            return (self.members[0], offset);
        }
        let s = offset / self.unit;
        (
            self.members[(s % n) as usize],
            (s / n) * self.unit + offset % self.unit,
        )
    }
}

struct Entry {
    target: usize,
    offset: u64,
    data: Box<[u8]>,
}

impl Entry {
    fn overlaps(&self, target: usize, start: u64, end: u64) -> bool {
        self.target == target && self.offset < end && start < self.offset + self.data.len() as u64
    }
}

#[derive(Default)]
struct Queue {
    entries: VecDeque<Entry>,
    bytes: usize,
    /// The batch being sent: its member and block ranges.
    in_flight: Option<(usize, Vec<(u64, u64)>)>,
    stop: bool,
}

/// Counters of the demote path at level 1 (`GET /v1/node`'s `demote`): the contract's
/// type.
pub use api::node::DemoteCounters;

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    dropped: AtomicU64,
    no_target: AtomicU64,
    cancelled: AtomicU64,
    sent: AtomicU64,
    failed: AtomicU64,
    batches: AtomicU64,
}

struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
    targets: RwLock<Vec<DemoteTarget>>,
    routes: RwLock<BTreeMap<String, Route>>,
    counters: Counters,
}

impl Shared {
    /// Cancels queued demotions overlapping `[start, end)` of `target`; with `wait`, also
    /// waits until no batch in flight overlaps it.
    fn clear(&self, target: usize, start: u64, end: u64, wait: bool) {
        let mut q = lock(&self.q);
        if q.entries.iter().any(|e| e.overlaps(target, start, end)) {
            let before = q.entries.len();
            let mut freed = 0;
            q.entries.retain(|e| {
                let hit = e.overlaps(target, start, end);
                if hit {
                    freed += e.data.len();
                }
                !hit
            });
            q.bytes -= freed;
            let n = (before - q.entries.len()) as u64;
            self.counters.cancelled.fetch_add(n, Ordering::Relaxed);
        }
        while wait
            && q.in_flight.as_ref().is_some_and(|(t, ranges)| {
                *t == target && ranges.iter().any(|&(s, e)| s < end && start < e)
            })
        {
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The level-1 end of the demote path: the bounded queue and its sender thread.
pub struct Demoter {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Default for Demoter {
    fn default() -> Self {
        Self::new()
    }
}

impl Demoter {
    /// An empty demoter: no targets, no thread until the first target is added.
    pub fn new() -> Self {
        Demoter {
            shared: Arc::new(Shared {
                q: Mutex::default(),
                cv: Condvar::new(),
                targets: RwLock::default(),
                routes: RwLock::default(),
                counters: Counters::default(),
            }),
            thread: Mutex::default(),
        }
    }

    /// Registers level-1 export `export` served by `members` (one per upstream, in stripe
    /// order, striped every `unit` bytes when there are several), each wrapped so that
    /// writes and reads keep demotions coherent; returns the wrapped members.
    pub fn add_export(
        &self,
        export: &str,
        members: Vec<(Arc<dyn Backend>, DemoteTarget)>,
        unit: u64,
    ) -> Result<Vec<Arc<dyn Backend>>, NodeError> {
        let mut out: Vec<Arc<dyn Backend>> = Vec::new();
        let mut idx = Vec::new();
        {
            let mut targets = self
                .shared
                .targets
                .write()
                .unwrap_or_else(|e| e.into_inner());
            for (backend, target) in members {
                let t = targets.len();
                targets.push(target);
                idx.push(t);
                out.push(Arc::new(Guarded {
                    inner: backend,
                    shared: self.shared.clone(),
                    target: t,
                }));
            }
        }
        self.shared
            .routes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                export.to_string(),
                Route {
                    members: idx,
                    unit: unit.max(1),
                },
            );
        let mut th = lock(&self.thread);
        if th.is_none() {
            let shared = self.shared.clone();
            *th = Some(
                std::thread::Builder::new()
                    .name("demote".into())
                    .spawn(move || sender(&shared))?,
            );
        }
        Ok(out)
    }

    /// The sink an upper exclusive cache hands its clean victims to.
    pub fn sink(&self) -> Arc<dyn DemoteSink> {
        Arc::new(Sink(self.shared.clone()))
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> DemoteCounters {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DemoteCounters {
            queued: get(&c.queued),
            dropped: get(&c.dropped),
            no_target: get(&c.no_target),
            cancelled: get(&c.cancelled),
            sent: get(&c.sent),
            failed: get(&c.failed),
            batches: get(&c.batches),
            queue_blocks: lock(&self.shared.q).entries.len() as u64,
        }
    }

    /// Whether nothing is queued or in flight (tests wait for it).
    pub fn idle(&self) -> bool {
        let q = lock(&self.shared.q);
        q.entries.is_empty() && q.in_flight.is_none()
    }
}

impl Drop for Demoter {
    fn drop(&mut self) {
        lock(&self.shared.q).stop = true;
        self.shared.cv.notify_all();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

struct Sink(Arc<Shared>);

impl DemoteSink for Sink {
    fn demote(&self, export: &str, offset: u64, data: &[u8]) -> bool {
        let s = &self.0;
        let located = s
            .routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(export)
            .map(|r| r.locate(offset));
        let Some((target, offset)) = located else {
            s.counters.no_target.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let mut q = lock(&s.q);
        if q.stop || q.bytes + data.len() > QUEUE_BYTES {
            s.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        q.bytes += data.len();
        q.entries.push_back(Entry {
            target,
            offset,
            data: data.into(),
        });
        drop(q);
        s.counters.queued.fetch_add(1, Ordering::Relaxed);
        s.cv.notify_all();
        true
    }
}

/// The sender thread: one batch for one member at a time.
fn sender(s: &Shared) {
    let agent = ureq::AgentBuilder::new().timeout(SEND_TIMEOUT).build();
    loop {
        let (target, batch) = {
            let mut q = lock(&s.q);
            while q.entries.is_empty() && !q.stop {
                q = s.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if q.stop {
                return;
            }
            let target = q.entries[0].target;
            let mut batch = Vec::new();
            let mut bytes = 0;
            let mut rest = VecDeque::with_capacity(q.entries.len());
            while let Some(e) = q.entries.pop_front() {
                if e.target == target && bytes + e.data.len() <= BATCH_BYTES.max(e.data.len()) {
                    bytes += e.data.len();
                    batch.push(e);
                } else {
                    rest.push_back(e);
                }
            }
            q.entries = rest;
            q.bytes -= bytes;
            let ranges = batch
                .iter()
                .map(|e| (e.offset, e.offset + e.data.len() as u64))
                .collect();
            q.in_flight = Some((target, ranges));
            (target, batch)
        };
        let t = s.targets.read().unwrap_or_else(|e| e.into_inner())[target].clone();
        let body = encode(batch.iter().map(|e| (e.offset, &e.data[..])));
        let url = format!("{}/v1/demote/{}", t.url.trim_end_matches('/'), t.export);
        let res = agent
            .post(&url)
            .set("authorization", &format!("Bearer {}", t.token))
            .set("content-type", "application/octet-stream")
            .send_bytes(&body);
        let n = batch.len() as u64;
        s.counters.batches.fetch_add(1, Ordering::Relaxed);
        match res {
            Ok(_) => {
                s.counters.sent.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                s.counters.failed.fetch_add(n, Ordering::Relaxed);
                tracing::warn!(%url, blocks = n, error = %e, "demote batch failed");
            }
        }
        lock(&s.q).in_flight = None;
        s.cv.notify_all();
    }
}

/// An upstream member of an export that demotes: writes and reads keep the demotions
/// queued or in flight coherent with what level 2 is sent (see the module doc).
pub struct Guarded {
    inner: Arc<dyn Backend>,
    shared: Arc<Shared>,
    target: usize,
}

impl Backend for Guarded {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.shared
            .clear(self.target, offset, offset + buf.len() as u64, false);
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.shared
            .clear(self.target, offset, offset + data.len() as u64, true);
        self.inner.write_at(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.shared.clear(self.target, offset, offset + len, true);
        self.inner.trim(offset, len)
    }
}

/// Encodes a batch of `(offset, bytes)` records.
pub fn encode<'a>(records: impl Iterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (off, data) in records {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// Decodes a batch; the error names the record and the byte where it went wrong.
pub(crate) fn decode(body: &[u8]) -> Result<Vec<(u64, &[u8])>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let i = out.len();
        if body.len() - at < HEADER {
            return Err(format!(
                "record {i} at byte {at}: {} bytes left, a record header is {HEADER}",
                body.len() - at
            ));
        }
        let mut off = [0u8; 8];
        off.copy_from_slice(&body[at..at + 8]);
        let mut len = [0u8; 4];
        len.copy_from_slice(&body[at + 8..at + HEADER]);
        let len = u32::from_le_bytes(len) as usize;
        let start = at + HEADER;
        if body.len() - start < len {
            return Err(format!(
                "record {i} at byte {at}: length {len} runs past the body's end ({} bytes)",
                body.len()
            ));
        }
        out.push((u64::from_le_bytes(off), &body[start..start + len]));
        at = start + len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stripes_map_like_the_striped_backend() {
        let r = Route {
            members: vec![3, 4],
            unit: 1 << 20,
        };
        assert_eq!(r.locate(0), (3, 0));
        assert_eq!(r.locate((1 << 20) + 4096), (4, 4096));
        assert_eq!(r.locate((2 << 20) + 8192), (3, (1 << 20) + 8192));
        let one = Route {
            members: vec![0],
            unit: 1 << 20,
        };
        assert_eq!(one.locate(5 << 20), (0, 5 << 20));
    }

    #[test]
    fn bad_batches_name_the_record() {
        let mut b = encode([(4096u64, &[1u8; 8][..])].into_iter());
        b.extend_from_slice(&[0u8; 5]);
        let e = decode(&b).unwrap_err();
        assert!(e.contains("record 1 at byte 20"), "{e}");
        let mut b = encode([(0u64, &[1u8; 8][..])].into_iter());
        b.truncate(15);
        let e = decode(&b).unwrap_err();
        assert!(e.contains("record 0 at byte 0: length 8 runs past"), "{e}");
    }

    #[test]
    fn a_write_cancels_a_queued_demotion_and_a_full_queue_drops() {
        let d = Demoter::new();
        // A route without a sender thread: entries stay queued.
        d.shared.routes.write().unwrap().insert(
            "v".into(),
            Route {
                members: vec![0],
                unit: 1,
            },
        );
        let sink = d.sink();
        assert!(sink.demote("v", 0, &[1u8; 4096]));
        assert!(sink.demote("v", 4096, &[2u8; 4096]));
        assert!(!sink.demote("other", 0, &[1u8; 4096]));
        d.shared.clear(0, 4000, 4100, true);
        let c = d.counters();
        assert_eq!(
            (c.queued, c.cancelled, c.queue_blocks, c.no_target),
            (2, 2, 0, 1)
        );
        let big = vec![0u8; 1 << 20];
        for i in 0..(QUEUE_BYTES >> 20) as u64 {
            assert!(sink.demote("v", i << 20, &big));
        }
        assert!(!sink.demote("v", 1 << 40, &big));
        assert_eq!(d.counters().dropped, 1);
    }

    proptest! {
        #[test]
        fn batches_round_trip(recs in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u8>(), 0..64)), 0..20)) {
            let b = encode(recs.iter().map(|(o, d)| (*o, &d[..])));
            let back = decode(&b).unwrap();
            prop_assert_eq!(back.len(), recs.len());
            for ((o, d), (bo, bd)) in recs.iter().zip(back) {
                prop_assert_eq!(*o, bo);
                prop_assert_eq!(&d[..], bd);
            }
        }
    }
}
