//! Issue 17, "write-back under pressure": dirty data stays within per-cache limits, a
//! failing backend is reported to writers instead of piling acknowledged data up in
//! memory, removal of a cache whose dirty data cannot be written is refused (the node
//! answers 409), writers slow down smoothly near the limit and keep the backend's pace at
//! 100 % dirty, and background cleaning never delays hits.
//!
//! Before the limits, a write-back cache of 8 blocks over a full disk kept acknowledging
//! writes and held every evicted dirty block in its write-back table (192 MiB behind an
//! 8 MiB cache in the issue).

use cache::{
    Backend, CacheConfig, CacheError, CacheNode, DirtyLimits, MemBackend, RoutingRule, WritePolicy,
};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BS: usize = 4096;

/// A memory backend that can be made full (writes fail with ENOSPC) or slow (each write
/// sleeps), counting the writes that reached it.
struct Disk {
    mem: MemBackend,
    full: AtomicBool,
    delay_us: AtomicU64,
    writes: AtomicU64,
}

impl Disk {
    fn new(blocks: u64) -> Arc<Self> {
        Arc::new(Disk {
            mem: MemBackend::new(blocks * BS as u64),
            full: AtomicBool::new(false),
            delay_us: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        })
    }
}

impl Backend for Disk {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.mem.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        let d = self.delay_us.load(Ordering::SeqCst);
        if d > 0 {
            std::thread::sleep(Duration::from_micros(d));
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.mem.write_at(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28));
        }
        self.mem.flush()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.mem.trim(offset, len)
    }
}

/// A node with export "vol" of `blocks` blocks over `disk` and one write-back cache of
/// `cache` blocks with `limits`.
fn setup(blocks: u64, cache: usize, limits: DirtyLimits) -> (Arc<CacheNode>, Arc<Disk>, u64) {
    let node = Arc::new(CacheNode::new(1024, BS).unwrap());
    let disk = Disk::new(blocks);
    node.add_export("vol", disk.clone()).unwrap();
    let c = node
        .create_cache("c", cache, &"lru".parse().unwrap(), WritePolicy::WriteBack)
        .unwrap();
    node.configure_cache(
        c,
        CacheConfig {
            dirty: Some(limits),
            ..CacheConfig::default()
        },
    )
    .unwrap();
    node.create_rule(
        RoutingRule {
            client: None,
            op: None,
            export: "vol".into(),
            range: None,
        },
        c,
    )
    .unwrap();
    (node, disk, c)
}

fn block(b: u64) -> Vec<u8> {
    vec![(b % 251) as u8 + 1; BS]
}

fn dirty(node: &CacheNode, c: u64) -> usize {
    let s = node.get_cache_stats(c).unwrap();
    s.dirty + s.writing_back
}

#[test]
fn a_full_disk_is_reported_and_dirty_data_stays_bounded() {
    let (node, disk, c) = setup(256, 8, DirtyLimits::default());
    for b in 0..8 {
        node.write("vol", "x", b * BS as u64, &block(b), false)
            .unwrap();
    }
    // Limit 8 (the default: the whole capacity, writers pay only past it).
    assert_eq!(disk.writes.load(Ordering::SeqCst), 0, "all 8 fit, dirty");
    disk.full.store(true, Ordering::SeqCst);
    let (mut acked, mut refused) = (0, 0);
    for b in 8..200u64 {
        match node.write("vol", "x", b * BS as u64, &block(b), false) {
            Ok(()) => acked += 1,
            Err(CacheError::Io { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(28), "ENOSPC reaches the writer");
                refused += 1;
            }
            Err(e) => panic!("unexpected error {e}"),
        }
        assert!(
            dirty(&node, c) <= 8,
            "dirty {} past the limit",
            dirty(&node, c)
        );
    }
    println!("full disk behind an 8-block cache: {acked} writes acknowledged, {refused} refused");
    assert_eq!(acked, 0, "nothing acknowledged past the limit");
    assert_eq!(refused, 192);
    assert_eq!(dirty(&node, c), 8);
    // The data acknowledged before is still readable.
    let mut buf = vec![0u8; BS];
    node.read("vol", "x", 3 * BS as u64, &mut buf).unwrap();
    assert_eq!(buf, block(3));

    // What a node stopping now keeps in its recovery file, and a next start replays.
    let kept = node.dirty_data();
    assert_eq!(kept.len(), 8);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recovery.bin");
    cache::recovery::write(&file, &kept).unwrap();
    let (next, disk2, _) = setup(256, 8, DirtyLimits::default());
    for b in cache::recovery::read(&file).unwrap() {
        next.write(&b.export, "recovery", b.offset, &b.data, false)
            .unwrap();
    }
    next.flush("vol").unwrap();
    for b in 0..8 {
        let mut got = vec![0u8; BS];
        disk2.mem.read_at(b * BS as u64, &mut got).unwrap();
        assert_eq!(got, block(b), "block {b} replayed");
    }

    // Removal is refused, with the reason, and the cache keeps its data.
    let e = node.remove_cache(c).unwrap_err();
    assert!(
        matches!(e, CacheError::DirtyUnwritable { blocks: 8, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("8 dirty block(s)"), "{e}");
    assert_eq!(node.caches().len(), 1);
    // Once the disk has room again, removal writes everything back.
    disk.full.store(false, Ordering::SeqCst);
    node.remove_cache(c).unwrap();
    for b in 0..8 {
        let mut got = vec![0u8; BS];
        disk.mem.read_at(b * BS as u64, &mut got).unwrap();
        assert_eq!(got, block(b), "block {b} on the disk");
    }
}

#[test]
fn writers_are_throttled_smoothly_and_cleaning_stops_at_the_low_watermark() {
    // 64 blocks, at most half dirty: high 32, low 16.
    let limits = DirtyLimits {
        ratio: 0.5,
        bytes: 0,
    };
    let (node, disk, c) = setup(1024, 64, limits);
    let mut cleaned = Vec::new();
    for b in 0..64u64 {
        node.write("vol", "x", b * BS as u64, &block(b), false)
            .unwrap();
        assert!(dirty(&node, c) <= 32, "dirty {}", dirty(&node, c));
        cleaned.push(disk.writes.load(Ordering::SeqCst));
    }
    // Nothing is written below the low watermark; past it writers clean a little, then
    // one block per block at the high watermark.
    assert_eq!(cleaned[15], 0);
    let between = cleaned[31] - cleaned[16];
    let at_high = cleaned[63] - cleaned[48];
    assert!(
        between > 0 && between < 15,
        "cleaned {between} between the watermarks"
    );
    assert!(
        at_high >= 15,
        "cleaned {at_high} over 15 writes at the high watermark"
    );
    // A byte limit tighter than the ratio wins. The cache is past it the moment it is
    // set: a writer then cleans as much as it dirties (no writer waits for the whole
    // excess), and the cleaner takes the cache down to the new low watermark (4 blocks).
    let before = dirty(&node, c);
    assert!(before > 8, "dirty {before}");
    node.configure_cache(
        c,
        CacheConfig {
            dirty: Some(DirtyLimits {
                ratio: 0.5,
                bytes: 8 * BS as u64,
            }),
            ..CacheConfig::default()
        },
    )
    .unwrap();
    let w0 = disk.writes.load(Ordering::SeqCst);
    node.write("vol", "x", 100 * BS as u64, &block(100), false)
        .unwrap();
    assert!(dirty(&node, c) <= before, "dirty {}", dirty(&node, c));
    assert!(disk.writes.load(Ordering::SeqCst) - w0 <= 2);
    assert!(node.clean(1024) > 0);
    assert_eq!(dirty(&node, c), 4);
    // From there writers keep within it.
    for b in 101..120u64 {
        node.write("vol", "x", b * BS as u64, &block(b), false)
            .unwrap();
        assert!(dirty(&node, c) <= 8, "dirty {}", dirty(&node, c));
    }
    // Background cleaning brings the cache to its low watermark (4 blocks), not to zero.
    let n = node.clean(1024);
    assert!(n > 0);
    assert_eq!(dirty(&node, c), 4);
    // Bad limits name the field.
    let e = node
        .configure_cache(
            c,
            CacheConfig {
                dirty: Some(DirtyLimits {
                    ratio: 1.5,
                    bytes: 0,
                }),
                ..CacheConfig::default()
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("dirty_ratio 1.5"), "{e}");
}

#[test]
fn at_full_dirty_writes_keep_the_backends_pace() {
    let n = 150u64;
    let delay = 2000; // µs per backend write: a slow disk
                      // The backend alone.
    let disk = Disk::new(4 * n);
    disk.delay_us.store(delay, Ordering::SeqCst);
    let t0 = Instant::now();
    for b in 0..n {
        disk.write_at(b * BS as u64, &block(b)).unwrap();
    }
    let raw = n as f64 / t0.elapsed().as_secs_f64();
    // Through a 32-block cache already 100 % dirty.
    let (node, disk, c) = setup(4 * n, 32, DirtyLimits::default());
    for b in 0..32 {
        node.write("vol", "x", b * BS as u64, &block(b), false)
            .unwrap();
    }
    assert_eq!(dirty(&node, c), 32);
    disk.delay_us.store(delay, Ordering::SeqCst);
    let t0 = Instant::now();
    for b in n..2 * n {
        node.write("vol", "x", b * BS as u64, &block(b), false)
            .unwrap();
    }
    let cached = n as f64 / t0.elapsed().as_secs_f64();
    println!(
        "100 % dirty: {cached:.0} writes/s through the cache, the backend alone {raw:.0} \
         writes/s ({:.0} %)",
        100.0 * cached / raw
    );
    assert!(cached >= 0.8 * raw, "{cached:.0}/s against {raw:.0}/s");
}

#[test]
fn hits_are_not_delayed_by_cleaning() {
    let (node, disk, c) = setup(256, 64, DirtyLimits::default());
    for b in 0..48u64 {
        node.write("vol", "x", b * BS as u64, &block(b), false)
            .unwrap();
    }
    // Each backend write now takes 50 ms; cleaning 16 blocks takes most of a second.
    disk.delay_us.store(50_000, Ordering::SeqCst);
    let cleaner = {
        let node = node.clone();
        std::thread::spawn(move || node.clean(1024))
    };
    std::thread::sleep(Duration::from_millis(20));
    let mut worst = Duration::ZERO;
    let mut buf = vec![0u8; BS];
    for i in 0..200u64 {
        let b = i % 48;
        let t0 = Instant::now();
        node.read("vol", "x", b * BS as u64, &mut buf).unwrap();
        worst = worst.max(t0.elapsed());
        assert_eq!(buf, block(b));
    }
    let written = cleaner.join().unwrap();
    println!("hits while cleaning {written} blocks: worst {worst:?}");
    assert_eq!(written, 16, "cleaned down to the low watermark of 32");
    assert_eq!(dirty(&node, c), 32);
    assert!(worst < Duration::from_millis(25), "a hit took {worst:?}");
}
