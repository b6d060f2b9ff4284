//! The durable write log through a real `CacheNode`: what a crash leaves in the log
//! replays to exactly the acknowledged data; a checkpoint puts it on the backend and
//! empties the log; removing a rule or the cache checkpoints or deletes it.

use cache::write_log::{generations, read_log, LogRecord, WriteLog};
use cache::{Backend, CacheNode, MemBackend, RoutingRule, WritePolicy};
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

const BS: usize = 4096;
const BLOCKS: u64 = 256;

fn setup(log: &Path) -> (Arc<CacheNode>, Arc<MemBackend>, u64) {
    let node = Arc::new(CacheNode::new(64, BS).unwrap());
    let disk = Arc::new(MemBackend::new(BLOCKS * BS as u64));
    node.add_export("e", disk.clone()).unwrap();
    let c = node
        .create_cache("c", 32, &"lru".parse().unwrap(), WritePolicy::WriteBack)
        .unwrap();
    node.create_rule(
        RoutingRule {
            client: None,
            op: None,
            export: "e".into(),
            range: None,
        },
        c,
    )
    .unwrap();
    node.set_log(c, Some(Arc::new(WriteLog::create(log, &[]).unwrap())))
        .unwrap();
    (node, disk, c)
}

/// Applies every record of every generation to `image`, as a restart would.
fn replay(base: &Path, image: &mut [u8]) -> usize {
    let mut n = 0;
    for (_, p) in generations(base).unwrap() {
        let f = read_log(&p).unwrap();
        assert!(f.torn_tail.is_none());
        for r in f.records {
            n += 1;
            match r {
                LogRecord::Write { offset, data, .. } => {
                    let o = offset as usize;
                    image[o..o + data.len()].copy_from_slice(&data);
                }
                LogRecord::Trim { offset, len, .. } => {
                    image[offset as usize..(offset + len) as usize].fill(0);
                }
            }
        }
    }
    n
}

#[test]
fn a_crash_replays_every_acknowledged_write_and_checkpoints_empty_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("c.log");
    let (node, disk, c) = setup(&base);
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let mut expect = vec![0u8; (BLOCKS as usize) * BS];
    for i in 0..400u32 {
        let off = rng.gen_range(0..BLOCKS * BS as u64 - 9000);
        let len = rng.gen_range(1..9000usize);
        if i % 50 == 49 {
            // Whole blocks trimmed read back as zeros.
            let first = off.div_ceil(BS as u64);
            node.trim("e", "t", first * BS as u64, 2 * BS as u64)
                .unwrap();
            let o = first as usize * BS;
            expect[o..o + 2 * BS].fill(0);
            continue;
        }
        let data: Vec<u8> = (0..len).map(|j| (i as usize * 7 + j) as u8).collect();
        node.write("e", "t", off, &data, false).unwrap();
        expect[off as usize..off as usize + len].copy_from_slice(&data);
    }
    // The cache (32 blocks) evicted some dirty blocks to the disk; most are in memory.
    assert!(node.get_cache_stats(c).unwrap().dirty > 0);
    assert_ne!(disk.snapshot(), expect, "not all on the backend yet");
    // "Crash": the memory is gone; the disk plus the log must give every write back.
    let mut image = disk.snapshot();
    let records = replay(&base, &mut image);
    assert_eq!(records, 400);
    assert!(
        image == expect,
        "replayed image differs from the acknowledged writes"
    );
    // A checkpoint writes everything back and leaves one empty generation.
    assert!(node.checkpoint(c).unwrap());
    assert!(disk.snapshot() == expect);
    let gens = generations(&base).unwrap();
    assert_eq!(gens.len(), 1);
    assert!(read_log(&gens[0].1).unwrap().records.is_empty());
    // More writes, then the idle checkpoint of the cleaner's round once clean.
    node.write("e", "t", 0, &[9u8; BS], false).unwrap();
    assert_eq!(node.checkpoint_logs(u64::MAX), 0, "dirty: not idle");
    node.flush("e").unwrap();
    assert_eq!(node.checkpoint_logs(u64::MAX), 1);
    let gens = generations(&base).unwrap();
    assert_eq!(gens.len(), 1);
    assert!(read_log(&gens[0].1).unwrap().records.is_empty());
    // Removing the rule checkpoints; removing the cache deletes the log.
    node.write("e", "t", 0, &[8u8; BS], false).unwrap();
    let rule = node.rules()[0].0;
    node.remove_rule(rule).unwrap();
    let mut b = vec![0u8; BS];
    disk.read_at(0, &mut b).unwrap();
    assert_eq!(b, [8u8; BS]);
    assert!(read_log(&generations(&base).unwrap()[0].1)
        .unwrap()
        .records
        .is_empty());
    node.remove_cache(c).unwrap();
    assert!(generations(&base).unwrap().is_empty());
}

#[test]
fn a_failed_log_fails_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("sub").join("c.log");
    let (node, _disk, _c) = setup(&base);
    node.write("e", "t", 0, &[1u8; 100], false).unwrap();
    // The directory is replaced by a file: the next rotation cannot create its file.
    std::fs::remove_dir_all(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub"), b"x").unwrap();
    let e = node.checkpoint(0).unwrap_err().to_string();
    assert!(e.contains("write log") && e.contains("c.log"), "{e}");
}
