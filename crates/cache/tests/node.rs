//! The programmable-cache API: errors with reasons, capacity accounting, rules and
//! coherence across rule changes, removal with write-back, per-tenant counters.

use cache::{
    AccessObserver, CacheConfig, CacheError, CacheNode, MemBackend, Op, RoutingRule, WritePolicy,
};
use policy::EvictionSpec;
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

const BS: usize = 512;

fn node_with(size_blocks: u64) -> (CacheNode, Arc<MemBackend>) {
    let node = CacheNode::new(100, BS).unwrap();
    let mem = Arc::new(MemBackend::new(size_blocks * BS as u64));
    node.add_export("vol", mem.clone()).unwrap();
    (node, mem)
}

/// A 64-block export "vol" with one cache `c` of `size` blocks over all of it.
fn cached_vol(size: usize, policy: &str, write: WritePolicy) -> (CacheNode, Arc<MemBackend>, u64) {
    let (node, mem) = node_with(64);
    let c = node
        .create_cache("c", size, &policy.parse().unwrap(), write)
        .unwrap();
    node.create_rule(all("vol"), c).unwrap();
    (node, mem, c)
}

fn all(export: &str) -> RoutingRule {
    RoutingRule {
        client: None,
        op: None,
        export: export.into(),
        range: None,
    }
}

#[test]
fn bad_requests_name_the_problem() {
    let (node, _) = node_with(64);
    let e = node
        .create_cache("a", 0, &lru(), WritePolicy::WriteBack)
        .unwrap_err();
    assert!(matches!(e, CacheError::ZeroSize), "{e}");
    let e = node
        .create_cache("a", 101, &lru(), WritePolicy::WriteBack)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cache size 101 blocks does not fit: 100 of the node's 100 blocks are free"
    );
    // Eviction specs are checked where they are parsed, before they reach the node.
    let e = "belady".parse::<EvictionSpec>().unwrap_err();
    assert!(
        e.to_string().contains("unknown policy `belady`") && e.to_string().contains("lru"),
        "{e}"
    );
    let a = node
        .create_cache("a", 60, &lru(), WritePolicy::WriteBack)
        .unwrap();
    let e = node
        .create_cache("b", 41, &lru(), WritePolicy::WriteBack)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("40 of the node's 100 blocks are free"),
        "{e}"
    );
    let e = node
        .configure_cache(
            a,
            CacheConfig {
                size: Some(101),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("100 of the node's 100"), "{e}");
    let e = "nope".parse::<EvictionSpec>().unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    let e = node
        .configure_cache(
            a,
            CacheConfig {
                eviction: Some("arc".parse().unwrap()),
                size: Some(101),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("100 of the node's 100"), "{e}");
    assert_eq!(
        node.get_cache_stats(a).unwrap().capacity,
        60,
        "a failed configure changes nothing"
    );
    assert_eq!(node.get_cache_stats(a).unwrap().eviction, "lru");
    assert!(matches!(
        node.get_cache_stats(99),
        Err(CacheError::UnknownCache(99))
    ));
    assert!(matches!(
        node.remove_cache(99),
        Err(CacheError::UnknownCache(99))
    ));
    assert!(matches!(
        node.remove_rule(5),
        Err(CacheError::UnknownRule(5))
    ));
    let e = node.create_rule(all("nope"), a).unwrap_err();
    assert_eq!(e.to_string(), "unknown export `nope`");
    let e = node.create_rule(all("vol"), 42).unwrap_err();
    assert_eq!(e.to_string(), "unknown cache 42");
    node.create_rule(
        RoutingRule {
            client: Some("c1".into()),
            ..all("vol")
        },
        a,
    )
    .unwrap();
    let e = node
        .create_rule(
            RoutingRule {
                client: Some("c1".into()),
                op: Some(Op::Read),
                ..all("vol")
            },
            a,
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("rule 0") && e.to_string().contains("same client"),
        "{e}"
    );
    let e = node
        .create_rule(
            RoutingRule {
                client: Some("c1".into()),
                range: Some((100, 1024)),
                ..all("vol")
            },
            a,
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("multiples of the block size 512"),
        "{e}"
    );
    let mut buf = [0u8; 16];
    let e = node
        .read("vol", "c1", 64 * BS as u64 - 8, &mut buf)
        .unwrap_err();
    assert!(
        e.to_string().contains("out of range") && e.to_string().contains("32768"),
        "{e}"
    );
    assert!(matches!(
        node.add_export("vol", Arc::new(MemBackend::new(10))),
        Err(CacheError::ExportExists(_))
    ));
    assert!(matches!(
        node.remove_export("vol"),
        Err(CacheError::ExportInUse { rules: 1, .. })
    ));
    let ro = node
        .create_cache("ro", 10, &lru(), WritePolicy::ReadOnly)
        .unwrap();
    node.add_export("shared", Arc::new(MemBackend::new(4096)))
        .unwrap();
    node.create_rule(all("shared"), ro).unwrap();
    let e = node.write("shared", "x", 0, &[1], false).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
}

#[test]
fn rules_route_and_stay_coherent() {
    let (node, mem) = node_with(64);
    let wb = node
        .create_cache("wb", 8, &lru(), WritePolicy::WriteBack)
        .unwrap();
    // reads and writes of client a over the first 32 blocks are cached (write-back)
    node.create_rule(
        RoutingRule {
            client: Some("a".into()),
            range: Some((0, 32 * BS as u64)),
            ..all("vol")
        },
        wb,
    )
    .unwrap();
    node.write("vol", "a", 0, &[5u8; BS], false).unwrap();
    assert_eq!(mem.calls().1, 0);
    // client b matches no rule but must see a's dirty data, and its write must be seen
    let mut buf = vec![0u8; BS];
    node.read("vol", "b", 0, &mut buf).unwrap();
    assert_eq!(buf, vec![5u8; BS]);
    node.write("vol", "b", 10, &[6u8; 4], false).unwrap();
    node.read("vol", "a", 0, &mut buf).unwrap();
    assert_eq!(&buf[8..16], &[5, 5, 6, 6, 6, 6, 5, 5]);
    // blocks outside the rule go straight to the backend
    node.write("vol", "a", 40 * BS as u64, &[9u8; BS], false)
        .unwrap();
    assert_eq!(mem.snapshot()[40 * BS], 9);
    // removing the rule writes back and drops block 0
    let stats = node.get_cache_stats(wb).unwrap();
    assert_eq!((stats.resident, stats.dirty), (1, 1));
    let rule = node.rules()[0].0;
    node.remove_rule(rule).unwrap();
    assert_eq!(&mem.snapshot()[8..16], &[5, 5, 6, 6, 6, 6, 5, 5]);
    assert_eq!(node.get_cache_stats(wb).unwrap().resident, 0);
    // tenant counters: a did 1 write hit-miss... exact values
    let a = node.tenant_stats("vol", "a").unwrap();
    assert_eq!(
        (a.reads, a.writes, a.read_bytes, a.write_bytes),
        (1, 2, BS as u64, 2 * BS as u64)
    );
    assert_eq!((a.hits, a.misses), (1, 2));
    let b = node.tenant_stats("vol", "b").unwrap();
    assert_eq!((b.reads, b.writes, b.hits, b.misses), (1, 1, 0, 2));
}

#[test]
fn resident_reads_lend_the_cached_bytes_or_nothing() {
    let (node, _, c) = cached_vol(16, "lru", WritePolicy::WriteBack);
    let data: Vec<u8> = (0..12 * BS).map(|i| (i * 13 + i / BS) as u8).collect();
    // Blocks 0..8 written in order, then 11, 10, 9, 8: the arena holds two runs and
    // then single blocks in reverse order.
    node.write("vol", "x", 0, &data[..8 * BS], false).unwrap();
    for b in (8..12).rev() {
        node.write(
            "vol",
            "x",
            (b * BS) as u64,
            &data[b * BS..(b + 1) * BS],
            false,
        )
        .unwrap();
    }
    let hits = |n: &CacheNode| n.get_cache_stats(c).unwrap().hits;
    let before = hits(&node);
    let (off, len) = (100usize, 12 * BS - 300);
    let pieces = node
        .with_resident("vol", "x", off as u64, len, |p| {
            (p.slices().len(), p.slices().collect::<Vec<_>>().concat())
        })
        .unwrap()
        .expect("every block is resident");
    assert_eq!(pieces.1, &data[off..off + len]);
    assert!(pieces.0 >= 2 && pieces.0 <= 5, "{} pieces", pieces.0);
    assert_eq!(hits(&node) - before, 12);
    let mut buf = vec![0u8; len];
    assert!(node
        .read_if_resident("vol", "x", off as u64, &mut buf)
        .unwrap());
    assert_eq!(buf, &data[off..off + len]);
    // One block missing: nothing handed over, nothing counted.
    let before = hits(&node);
    let lent = node
        .with_resident("vol", "x", 10 * BS as u64, 3 * BS, |_| {
            panic!("not resident")
        })
        .unwrap();
    assert!(lent.is_none());
    assert_eq!(hits(&node), before);
    assert!(matches!(
        node.with_resident("vol", "x", 64 * BS as u64, 1, |_| ()),
        Err(CacheError::OutOfRange { .. })
    ));
}

#[test]
fn remove_cache_and_flush_write_back() {
    let (node, mem, c) = cached_vol(16, "arc", WritePolicy::WriteBack);
    for b in 0..8u64 {
        node.write("vol", "x", b * BS as u64, &[b as u8 + 1; BS], false)
            .unwrap();
    }
    assert_eq!(mem.calls().1, 0);
    node.flush("vol").unwrap();
    assert_eq!(mem.calls().1, 8);
    assert_eq!(node.get_cache_stats(c).unwrap().dirty, 0);
    node.write("vol", "x", 0, &[42u8; 3], false).unwrap();
    node.write("vol", "x", BS as u64, &[43u8; 3], true).unwrap(); // FUA
    assert_eq!(&mem.snapshot()[BS..BS + 4], &[43, 43, 43, 2]);
    assert_eq!(
        mem.snapshot()[0],
        1,
        "non-FUA write still only in the cache"
    );
    node.remove_cache(c).unwrap();
    assert_eq!(&mem.snapshot()[..4], &[42, 42, 42, 1]);
    assert!(node.rules().is_empty());
    assert_eq!(node.allocated_blocks(), 0);
    let mut buf = [0u8; 4];
    node.read("vol", "x", 0, &mut buf).unwrap();
    assert_eq!(buf, [42, 42, 42, 1]);
}

struct Recorder(Arc<Mutex<Vec<u64>>>);
impl AccessObserver for Recorder {
    fn observe(&mut self, key: u64) {
        self.0.lock().unwrap().push(key);
    }
}

#[test]
fn observer_sees_every_lookup() {
    let (node, _, c) = cached_vol(4, "lru", WritePolicy::WriteThrough);
    let seen = Arc::new(Mutex::new(Vec::new()));
    node.set_observer(c, Some(Box::new(Recorder(seen.clone()))))
        .unwrap();
    let mut buf = vec![0u8; 3 * BS];
    node.read("vol", "x", BS as u64, &mut buf).unwrap();
    node.write("vol", "x", 0, &[1u8; 10], false).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn capacities_never_exceed_the_node(ops in prop::collection::vec((0u8..3, 0usize..6, 0usize..70), 1..40)) {
        let (node, _) = node_with(64);
        let mut ids: Vec<u64> = Vec::new();
        for (kind, pick, size) in ops {
            let before = node.allocated_blocks();
            match kind {
                0 => match node.create_cache("c", size, &lru(), WritePolicy::WriteBack) {
                    Ok(id) => ids.push(id),
                    Err(_) => prop_assert!(size == 0 || before + size > 100),
                },
                1 if !ids.is_empty() => {
                    let id = ids[pick % ids.len()];
                    let cur = node.get_cache_stats(id).unwrap().capacity;
                    let r = node.configure_cache(id, CacheConfig { size: Some(size), ..Default::default() });
                    prop_assert_eq!(r.is_ok(), size > 0 && before - cur + size <= 100);
                }
                2 if !ids.is_empty() => {
                    let id = ids.remove(pick % ids.len());
                    node.remove_cache(id).unwrap();
                }
                _ => {}
            }
            prop_assert!(node.allocated_blocks() <= 100);
            let sum: usize = ids.iter().map(|&i| node.get_cache_stats(i).unwrap().capacity).sum();
            prop_assert_eq!(sum, node.allocated_blocks());
        }
    }
}

fn lru() -> EvictionSpec {
    EvictionSpec::default()
}

/// A backend that says every byte is a hole (what a sparse image says of blocks a
/// write-back cache has not written yet), except the runs it is told about.
struct SaysHole {
    mem: MemBackend,
    /// (offset, length) runs it calls allocated, sorted.
    data: Vec<(u64, u64)>,
}

impl cache::Backend for SaysHole {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.mem.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.mem.write_at(offset, data)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.mem.flush()
    }
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.mem.trim(offset, len)
    }
    fn allocation(&self, offset: u64, len: u64) -> std::io::Result<Vec<(u64, bool)>> {
        let end = offset + len;
        let mut out = Vec::new();
        let mut at = offset;
        for &(o, n) in &self.data {
            let (s, e) = (o.max(at), (o + n).min(end));
            if s >= e {
                continue;
            }
            if s > at {
                out.push((s - at, true));
            }
            out.push((e - s, false));
            at = e;
        }
        if at < end {
            out.push((end - at, true));
        }
        Ok(out)
    }
}

proptest! {
    /// Block status never calls a block a cache holds (dirty, never written back) a hole,
    /// covers the range exactly, and keeps the backend's holes elsewhere.
    #[test]
    fn block_status_never_calls_held_data_a_hole(
        written in prop::collection::btree_set(0u64..64, 0..20),
        data in prop::collection::vec((0u64..64 * BS as u64, 1u64..3000), 0..4),
        offset in 0u64..40 * BS as u64,
        len in 1u64..24 * BS as u64,
    ) {
        let mut data: Vec<(u64, u64)> = data;
        data.sort_unstable();
        let node = CacheNode::new(100, BS).unwrap();
        let backend = Arc::new(SaysHole { mem: MemBackend::new(64 * BS as u64), data: data.clone() });
        node.add_export("vol", backend).unwrap();
        let c = node.create_cache("c", 64, &lru(), WritePolicy::WriteBack).unwrap();
        node.create_rule(all("vol"), c).unwrap();
        for &b in &written {
            node.write("vol", "t", b * BS as u64, &[1u8; BS], false).unwrap();
        }
        let runs = node.block_status("vol", offset, len).unwrap();
        prop_assert_eq!(runs.iter().map(|r| r.0).sum::<u64>(), len);
        prop_assert!(runs.iter().all(|r| r.0 > 0));
        let mut at = offset;
        for (n, hole) in runs {
            if hole {
                for byte in [at, at + n - 1] {
                    prop_assert!(!written.contains(&(byte / BS as u64)), "held block {} in a hole", byte / BS as u64);
                    prop_assert!(!data.iter().any(|&(o, l)| o <= byte && byte < o + l), "backend data at {} called a hole", byte);
                }
                let blocks = at / BS as u64..=(at + n - 1) / BS as u64;
                prop_assert!(!written.iter().any(|b| blocks.contains(b)));
            }
            at += n;
        }
    }
}

#[test]
fn block_status_of_a_sparse_file_through_a_write_back_cache() {
    let dir = tempfile::tempdir().unwrap();
    let node = CacheNode::new(100, 4096).unwrap();
    let file = Arc::new(cache::FileBackend::create(dir.path().join("img"), 1 << 20).unwrap());
    node.add_export("vol", file.clone()).unwrap();
    let c = node
        .create_cache("c", 64, &lru(), WritePolicy::WriteBack)
        .unwrap();
    node.create_rule(all("vol"), c).unwrap();
    assert_eq!(
        node.block_status("vol", 0, 1 << 20).unwrap(),
        vec![(1 << 20, true)]
    );
    // Dirty in the cache, a hole on disk: data.
    node.write("vol", "t", 8192, &[7u8; 4096], false).unwrap();
    use cache::Backend;
    assert_eq!(file.allocation(0, 1 << 20).unwrap(), vec![(1 << 20, true)]);
    let want = vec![(8192, true), (4096, false), ((1 << 20) - 12288, true)];
    assert_eq!(node.block_status("vol", 0, 1 << 20).unwrap(), want);
    // Written back: still data, now from the file too.
    node.flush("vol").unwrap();
    assert_eq!(node.block_status("vol", 0, 1 << 20).unwrap(), want);
    // Trimmed: a hole again.
    node.trim("vol", "t", 8192, 4096).unwrap();
    assert_eq!(
        node.block_status("vol", 0, 1 << 20).unwrap(),
        vec![(1 << 20, true)]
    );
    assert!(node.block_status("vol", 1 << 20, 1).is_err());
    assert!(node.block_status("nope", 0, 1).is_err());
}

/// Issue 35: a recovery file adopted at start is settled by a successful flush of its
/// export (before the flush returns), and a FUA write to an export it names flushes the
/// export first, so a durable write is never older than the file.
#[test]
fn an_adopted_recovery_file_is_settled_by_flush_and_fua() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recovery.bin");
    let (node, mem, _) = cached_vol(8, "lru", WritePolicy::WriteBack);
    let block = |v: u8| vec![v; BS];
    let kept = vec![cache::DirtyBlock {
        export: "vol".into(),
        offset: 0,
        data: block(3),
    }];
    cache::recovery::write(&file, &kept).unwrap();
    node.write("vol", "recovery", 0, &block(3), false).unwrap();
    assert!(!node.logged("vol", "recovery", 0, BS as u64).unwrap());
    node.adopt_recovery(cache::recovery::Pending::new(file.clone(), kept.clone()));
    // A plain write leaves the file alone (it is not durable yet).
    node.write("vol", "c1", 0, &block(4), false).unwrap();
    assert!(file.exists());
    assert_eq!(node.pending_recovery(), kept);
    // A FUA write settles the whole export before it returns.
    node.write("vol", "c1", 0, &block(5), true).unwrap();
    assert!(!file.exists());
    assert!(node.pending_recovery().is_empty());
    assert_eq!(&mem.snapshot()[..BS], &block(5)[..]);
    // A flush does the same.
    cache::recovery::write(&file, &kept).unwrap();
    node.adopt_recovery(cache::recovery::Pending::new(file.clone(), kept));
    node.flush("vol").unwrap();
    assert!(!file.exists());
}
