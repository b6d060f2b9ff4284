//! Tests of the hot-chunk tier (moved with it from the `cache` crate).

use super::*;
use cache::MemBackend;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

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

fn rig_with(slow_size: u64, chunk: u64, capacity: u64, spec: &str, rate: u64, jitter: bool) -> Rig {
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
    assert_eq!(s2.threshold, Some(2), "MRFU places at its second access");
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
fn a_throttled_admission_is_deferred_and_placed_at_its_next_access() {
    // One migration a second; MRFU places a chunk on its 2nd access. Chunk 1 is admitted
    // while the bucket is empty: deferred, it keeps its count, so its next access (a
    // second later) places it at once instead of needing two more.
    let r = rig(8 * 512, 512, 4, "mrfu:threshold=2,sequential=0", 1);
    let mut buf = [0u8; 16];
    for c in [0, 0, 1, 1] {
        r.tier.read_at(c * 512, &mut buf).unwrap();
    }
    let s = r.tier.stats();
    assert_eq!((s.migrations, s.throttled), (1, 1));
    r.clock.advance(Duration::from_secs(1));
    r.tier.read_at(512, &mut buf).unwrap();
    let s = r.tier.stats();
    assert_eq!((s.migrations, s.throttled), (2, 1));
    assert_eq!(s.resident_chunks, 2);
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

#[test]
fn a_controlled_threshold_keeps_the_candidates_counts_and_off_places_nothing() {
    // 16 chunks of 4 KiB, room for 8; MRFU at threshold 4, chunks 0, 2, 4 (not a
    // sequential run) read twice each.
    let r = rig(16 * 4096, 4096, 8, "mrfu:threshold=4", 0);
    let mut buf = [0u8; 512];
    for _ in 0..2 {
        for c in [0u64, 2, 4] {
            r.tier.read_at(c * 4096, &mut buf).unwrap();
        }
    }
    let s = r.tier.stats();
    assert_eq!(
        (s.migrations, s.candidates, s.threshold),
        (0, Some(3), Some(4))
    );
    assert!(!s.controlled);
    // The controller lowers the threshold to 3: the third read of each places it, so
    // the two counted before survived the change.
    r.tier.set_threshold(3).unwrap();
    for c in [0u64, 2, 4] {
        r.tier.read_at(c * 4096, &mut buf).unwrap();
    }
    let s = r.tier.stats();
    assert_eq!((s.migrations, s.threshold), (3, Some(3)));
    assert!(s.controlled);
    assert!(r.tier.admission().starts_with("mrfu(threshold=3"));
    // Off: chunk 6 read five times is never placed, resident chunks still hit.
    r.tier.set_enabled(false);
    for _ in 0..5 {
        r.tier.read_at(6 * 4096, &mut buf).unwrap();
    }
    r.tier.read_at(0, &mut buf).unwrap();
    let s = r.tier.stats();
    assert_eq!((s.migrations, s.resident_chunks, s.hits), (3, 3, 1));
    assert!(!s.enabled);
    // A threshold below one, or one for a policy without thresholds, is refused naming
    // the field, and nothing changes.
    let e = r.tier.set_threshold(0).unwrap_err().to_string();
    assert!(e.contains("threshold"), "{e}");
    assert_eq!(r.tier.stats().threshold, Some(3));
    let d = rig(16 * 4096, 4096, 8, "demand", 0);
    let e = d.tier.set_threshold(2).unwrap_err().to_string();
    assert!(e.contains("threshold") && e.contains("demand"), "{e}");
    // An adaptive tier under control stops adapting: its threshold stays the set one.
    let a = rig(16 * 4096, 4096, 8, "adaptive:threshold=2,period=4", 0);
    a.tier.set_threshold(5).unwrap();
    for k in 0..64u64 {
        a.tier.read_at((k % 16) * 4096, &mut buf).unwrap();
    }
    assert_eq!(a.tier.stats().threshold, Some(5));
}
