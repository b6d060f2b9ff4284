//! Exclusive levels in one process: an upper node whose export's backend is a lower node,
//! the upper cache demoting its clean victims straight into the lower one (a synchronous
//! sink), the lower one dropping what it serves. Loop hit counts against inclusive levels,
//! and reads always returning the latest write whatever the write policies.

use cache::{
    Backend, CacheNode, DemoteSink, Exclusive, MemBackend, RoutingRule, TenantSnapshot, WritePolicy,
};
use proptest::prelude::*;
use std::io;
use std::sync::{Arc, Mutex};

const BS: usize = 512;
const BLOCKS: u64 = 32;

/// The lower node's export `vol` as the upper node's backend.
struct Lower(Arc<CacheNode>);

fn io_err(e: cache::CacheError) -> io::Error {
    io::Error::other(e.to_string())
}

impl Backend for Lower {
    fn size(&self) -> u64 {
        BLOCKS * BS as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read("vol", "upper", offset, buf).map_err(io_err)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0
            .write("vol", "upper", offset, data, false)
            .map_err(io_err)
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush("vol").map_err(io_err)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.trim("vol", "upper", offset, len).map_err(io_err)
    }
}

/// Demotes straight into the lower node; records what it was given.
struct Sink {
    lower: Arc<CacheNode>,
    given: Mutex<Vec<u64>>,
}

impl DemoteSink for Sink {
    fn demote(&self, export: &str, offset: u64, data: &[u8]) -> bool {
        self.given.lock().unwrap().push(offset / BS as u64);
        self.lower.insert_clean(export, offset, data).is_ok()
    }
}

struct Pair {
    upper: CacheNode,
    lower: Arc<CacheNode>,
    disk: Arc<MemBackend>,
    sink: Arc<Sink>,
    up: u64,
    low: u64,
}

fn all() -> RoutingRule {
    RoutingRule {
        client: None,
        op: None,
        export: "vol".into(),
        range: None,
    }
}

fn pair(s1: usize, s2: usize, w1: WritePolicy, w2: WritePolicy, exclusive: bool) -> Pair {
    let lower = Arc::new(CacheNode::new(s2, BS).unwrap());
    let disk = Arc::new(MemBackend::new(BLOCKS * BS as u64));
    lower.add_export("vol", disk.clone()).unwrap();
    let low = lower
        .create_cache("l2", s2, &"lru".parse().unwrap(), w2)
        .unwrap();
    lower.create_rule(all(), low).unwrap();
    let upper = CacheNode::new(s1, BS).unwrap();
    upper
        .add_export("vol", Arc::new(Lower(lower.clone())))
        .unwrap();
    let up = upper
        .create_cache("l1", s1, &"lru".parse().unwrap(), w1)
        .unwrap();
    upper.create_rule(all(), up).unwrap();
    let sink = Arc::new(Sink {
        lower: lower.clone(),
        given: Mutex::default(),
    });
    if exclusive {
        upper
            .set_exclusive(up, Exclusive::Upper(sink.clone()))
            .unwrap();
        lower.set_exclusive(low, Exclusive::Lower).unwrap();
    }
    Pair {
        upper,
        lower,
        disk,
        sink,
        up,
        low,
    }
}

fn read_block(p: &Pair, b: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS];
    p.upper.read("vol", "c", b * BS as u64, &mut buf).unwrap();
    buf
}

fn lower_counts(p: &Pair) -> TenantSnapshot {
    p.lower.tenant_stats("vol", "upper").unwrap()
}

/// One loop pass over `w` blocks, asserting each block holds its own byte.
fn pass(p: &Pair, w: u64) {
    for b in 0..w {
        assert!(read_block(p, b).iter().all(|&x| x == b as u8), "block {b}");
    }
}

#[test]
fn a_loop_larger_than_level_one_fits_both_levels_only_when_exclusive() {
    // S1 = 8, S2 = 12 blocks, a loop over 16: LRU misses everything at either level when
    // the levels are inclusive; exclusive, they are one LRU of 20 blocks.
    let (s1, s2, w, passes) = (8, 12, 16u64, 6u64);
    let mut disk_reads = Vec::new();
    for exclusive in [false, true] {
        let p = pair(
            s1,
            s2,
            WritePolicy::WriteThrough,
            WritePolicy::WriteThrough,
            exclusive,
        );
        for b in 0..w {
            p.disk.write_at(b * BS as u64, &vec![b as u8; BS]).unwrap();
        }
        let (r0, _, _) = p.disk.calls();
        for _ in 0..passes {
            pass(&p, w);
        }
        let (r1, _, _) = p.disk.calls();
        let low = p.lower.get_cache_stats(p.low).unwrap();
        let up = p.upper.get_cache_stats(p.up).unwrap();
        assert_eq!(
            up.misses,
            w * passes,
            "level 1 misses every access of the loop"
        );
        assert!(low.resident <= s2);
        if exclusive {
            // The first pass reads the disk; every later one hits level 2.
            assert_eq!(low.misses, w, "{low:?}");
            assert_eq!(low.hits, w * (passes - 1), "{low:?}");
            assert_eq!(up.demoted, w * passes - s1 as u64, "{up:?}");
            assert_eq!(low.dropped_on_read, low.hits);
            assert_eq!(up.exclusive, "upper");
            assert_eq!(low.exclusive, "lower");
        } else {
            assert_eq!(low.misses, w * passes, "{low:?}");
            assert_eq!(up.demoted, 0);
        }
        assert_eq!(lower_counts(&p).misses, low.misses);
        disk_reads.push(r1 - r0);
    }
    assert_eq!(disk_reads, vec![w * passes, w]);
}

#[test]
fn dirty_victims_are_written_back_not_demoted_and_a_resident_copy_keeps_its_bytes() {
    let p = pair(
        4,
        8,
        WritePolicy::WriteBack,
        WritePolicy::WriteThrough,
        true,
    );
    // Four dirty blocks, then four reads evict them: left to the cleaner (a read does not
    // wait for the backend), which writes them back; none is demoted.
    for b in 0..4u64 {
        p.upper
            .write("vol", "c", b * BS as u64, &vec![0xd0 + b as u8; BS], false)
            .unwrap();
    }
    for b in 4..8u64 {
        read_block(&p, b);
    }
    let up = p.upper.get_cache_stats(p.up).unwrap();
    assert_eq!(up.writebacks, 0, "{up:?}");
    assert_eq!((up.dirty, up.writing_back), (0, 4), "{up:?}");
    assert_eq!(p.upper.clean(1024), 4);
    let up = p.upper.get_cache_stats(p.up).unwrap();
    assert_eq!(up.demoted, 0, "{up:?}");
    assert_eq!((up.writebacks, up.writing_back), (4, 0));
    assert!(p.sink.given.lock().unwrap().is_empty());
    // Level 2 (write-through) holds the written-back blocks; reading 8..12 evicts the
    // clean 4..8 from level 1 into level 2.
    for b in 8..12u64 {
        read_block(&p, b);
    }
    assert_eq!(*p.sink.given.lock().unwrap(), vec![4, 5, 6, 7]);
    let low = p.lower.get_cache_stats(p.low).unwrap();
    assert_eq!(low.demoted_in, 4, "{low:?}");
    // A demotion of a block level 2 already holds moves it, keeping its (newer) bytes.
    let o = p.lower.insert_clean("vol", 0, &vec![0xee; BS]).unwrap();
    assert_eq!((o.inserted, o.refreshed), (0, 1));
    assert!(read_block(&p, 0).iter().all(|&x| x == 0xd0));
    // Partial blocks are ignored, nothing reaches the disk.
    let (_, w0, _) = p.disk.calls();
    let o = p
        .lower
        .insert_clean("vol", 20 * BS as u64 + 1, &[1u8; 10])
        .unwrap();
    assert_eq!(o, cache::DemoteOutcome::default());
    assert_eq!(p.disk.calls().1, w0);
    assert!(p.lower.insert_clean("nope", 0, &[0u8; BS]).is_err());
}

#[derive(Clone, Debug)]
enum Step {
    Read(u64),
    Write(u64, u8),
    Partial(u64, u8),
    Trim(u64),
    Flush,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..BLOCKS / 2).prop_map(Step::Read),
        3 => (0..BLOCKS / 2, any::<u8>()).prop_map(|(b, v)| Step::Write(b, v)),
        1 => (0..BLOCKS / 2, any::<u8>()).prop_map(|(b, v)| Step::Partial(b, v)),
        1 => (0..BLOCKS / 2).prop_map(Step::Trim),
        1 => Just(Step::Flush),
    ]
}

fn policy() -> impl Strategy<Value = WritePolicy> {
    prop_oneof![
        Just(WritePolicy::WriteBack),
        Just(WritePolicy::WriteThrough),
        Just(WritePolicy::WriteAround),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the write policies, every read returns the latest write (a block demoted
    /// and then overwritten at level 1 is never read back old), and after a flush the disk
    /// holds it.
    #[test]
    fn reads_return_the_latest_write(
        w1 in policy(),
        w2 in prop_oneof![Just(WritePolicy::WriteBack), Just(WritePolicy::WriteThrough)],
        steps in proptest::collection::vec(step(), 1..200),
    ) {
        let p = pair(3, 5, w1, w2, true);
        let mut model = vec![0u8; BLOCKS as usize * BS];
        for s in steps {
            match s {
                Step::Read(b) => {
                    let at = b as usize * BS;
                    prop_assert_eq!(read_block(&p, b), model[at..at + BS].to_vec(), "block {}", b);
                }
                Step::Write(b, v) => {
                    p.upper.write("vol", "c", b * BS as u64, &vec![v; BS], false).unwrap();
                    let at = b as usize * BS;
                    model[at..at + BS].fill(v);
                }
                Step::Partial(b, v) => {
                    let at = b as usize * BS + 100;
                    p.upper.write("vol", "c", at as u64, &[v; 50], false).unwrap();
                    model[at..at + 50].fill(v);
                }
                Step::Trim(b) => {
                    p.upper.trim("vol", "c", b * BS as u64, BS as u64).unwrap();
                    let at = b as usize * BS;
                    model[at..at + BS].fill(0);
                }
                Step::Flush => p.upper.flush("vol").unwrap(),
            }
        }
        p.upper.flush("vol").unwrap();
        prop_assert_eq!(p.disk.snapshot(), model);
        let low = p.lower.get_cache_stats(p.low).unwrap();
        prop_assert!(low.resident <= 5);
    }
}
