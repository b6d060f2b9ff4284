//! Model-based test of one partition over a `MemBackend`: random reads, writes (with and
//! without FUA), flushes, trims, resizes, policy switches and write-policy changes; every
//! read must equal a plain byte-vector model of acknowledged writes, and after a flush the
//! backend must equal the model.

use cache::{Backend, CachePartition, MemBackend, Route, Volume, VolumeTable, WritePolicy};
use proptest::prelude::*;
use std::sync::Arc;

const BS: usize = 64;
const SIZE: u64 = 16 * BS as u64 - 10; // a partial last block
const POLICIES: [&str; 7] = ["lru", "arc", "lirs", "2q", "mq", "s3fifo", "sieve"];

#[derive(Clone, Debug)]
enum Cmd {
    Read(u64, usize),
    Write(u64, usize, u8, bool),
    Flush,
    Trim(u64, u64),
    Resize(usize),
    Switch(usize),
    SetWp(usize),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let range = (0..SIZE, 1usize..200).prop_map(|(o, l)| (o, l.min((SIZE - o) as usize)));
    prop_oneof![
        6 => range.clone().prop_map(|(o, l)| Cmd::Read(o, l)),
        6 => (range.clone(), any::<u8>(), prop::bool::weighted(0.1)).prop_map(|((o, l), s, f)| Cmd::Write(o, l, s, f)),
        1 => Just(Cmd::Flush),
        1 => range.prop_map(|(o, l)| Cmd::Trim(o, l as u64)),
        1 => (0usize..10).prop_map(Cmd::Resize),
        1 => (0..POLICIES.len()).prop_map(Cmd::Switch),
        1 => (0usize..4).prop_map(Cmd::SetWp),
    ]
}

fn setup(cap: usize, wp: WritePolicy) -> (Arc<MemBackend>, Arc<Volume>, CachePartition) {
    let mem = Arc::new(MemBackend::new(SIZE));
    let table = Arc::new(VolumeTable::default());
    let vol = table.add(|id| Volume::new(id, "v", mem.clone(), BS));
    let p = CachePartition::new(0, cap, BS, &"lru".parse().unwrap(), wp, table).unwrap();
    (mem, vol, p)
}

fn pattern(seed: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add((off as usize + i) as u8) | 1)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn partition_matches_model(wp0 in 0usize..3, cap in 0usize..8, cmds in prop::collection::vec(cmd(), 1..80)) {
        let (mem, vol, p) = setup(cap, WritePolicy::ALL[wp0]);
        let mut model = vec![0u8; SIZE as usize];
        for c in cmds {
            match c {
                Cmd::Read(o, l) => {
                    let mut buf = vec![0xEEu8; l];
                    p.read(&vol, o, &mut buf, Route::Cached).unwrap();
                    prop_assert_eq!(&buf[..], &model[o as usize..o as usize + l], "read {}+{}", o, l);
                }
                Cmd::Write(o, l, s, fua) => {
                    let d = pattern(s, o, l);
                    let ro = p.write_policy() == WritePolicy::ReadOnly;
                    let r = p.write(&vol, o, &d, fua, Route::Cached);
                    if ro {
                        prop_assert!(r.is_err());
                    } else {
                        r.unwrap();
                        model[o as usize..o as usize + l].copy_from_slice(&d);
                        if fua {
                            let snap = mem.snapshot();
                            prop_assert_eq!(&snap[o as usize..o as usize + l], &d[..], "FUA data not on backend");
                        }
                    }
                }
                Cmd::Flush => {
                    p.write_back(Some(&vol)).unwrap();
                    prop_assert_eq!(mem.snapshot(), model.clone(), "backend after flush");
                    prop_assert_eq!(p.dirty_blocks(), 0);
                }
                Cmd::Trim(o, l) => {
                    p.trim(&vol, o, l).unwrap();
                    for b in vol.whole_blocks(o, l) {
                        let s = b as usize * BS;
                        let e = (s + BS).min(SIZE as usize);
                        model[s..e].fill(0);
                    }
                }
                Cmd::Resize(c) => { p.resize(c).unwrap(); }
                Cmd::Switch(i) => p.switch_policy(&POLICIES[i].parse().unwrap()).unwrap(),
                Cmd::SetWp(i) => {
                    let old = p.write_policy();
                    p.set_write_policy(WritePolicy::ALL[i]).unwrap();
                    if old == WritePolicy::WriteBack && WritePolicy::ALL[i] != WritePolicy::WriteBack {
                        prop_assert_eq!(p.dirty_blocks(), 0);
                        prop_assert_eq!(mem.snapshot(), model.clone(), "backend after leaving write-back");
                    }
                }
            }
            prop_assert!(p.len() <= p.capacity(), "{} blocks in a partition of {}", p.len(), p.capacity());
        }
        p.write_back(None).unwrap();
        prop_assert_eq!(mem.snapshot(), model);
    }
}

#[test]
fn write_back_defers_and_counts() {
    let (mem, vol, p) = setup(4, WritePolicy::WriteBack);
    let block = |b: u64, v: u8| (b * BS as u64, vec![v; BS]);
    for b in 0..4 {
        let (o, d) = block(b, b as u8 + 1);
        p.write(&vol, o, &d, false, Route::Cached).unwrap();
    }
    assert_eq!(
        mem.calls().1,
        0,
        "write-back must not write the backend yet"
    );
    assert_eq!(p.dirty_blocks(), 4);
    // a fifth block evicts the LRU block 0, which is written back
    let (o, d) = block(4, 9);
    p.write(&vol, o, &d, false, Route::Cached).unwrap();
    assert_eq!(mem.calls().1, 1);
    assert_eq!(mem.snapshot()[..BS], [1u8; BS]);
    let s = p.stats();
    assert_eq!(
        (s.misses, s.evictions, s.writebacks, s.dirty, s.resident),
        (5, 1, 1, 4, 4)
    );
    // shrink to 1 evicts three more, left to the cleaner: nothing written yet
    p.resize(1).unwrap();
    assert_eq!(mem.calls().1, 1);
    let s = p.stats();
    assert_eq!((s.writebacks, s.writing_back, s.dirty), (1, 3, 1));
    // read of block 1 misses (evicted) and is served from the write-back table
    let mut buf = vec![0u8; BS];
    p.read(&vol, BS as u64, &mut buf, Route::Cached).unwrap();
    assert_eq!(buf, vec![2u8; BS]);
    // the cleaner writes the three back, and the resident one (the low watermark of a
    // one-block cache is 0)
    assert_eq!(p.clean(1024).unwrap(), 4);
    assert_eq!(mem.calls().1, 5);
    assert_eq!(
        mem.snapshot()[BS..4 * BS],
        [[2u8; BS], [3u8; BS], [4u8; BS]].concat()[..]
    );
    // leaving write-back writes the rest
    p.set_write_policy(WritePolicy::WriteThrough).unwrap();
    assert_eq!(p.dirty_blocks(), 0);
    assert_eq!(mem.snapshot()[4 * BS..5 * BS], [9u8; BS]);
}

#[test]
fn read_hits_and_misses_are_exact() {
    let (mem, vol, p) = setup(4, WritePolicy::WriteThrough);
    mem.write_at(0, &[7u8; 8 * BS]).unwrap();
    let mut buf = vec![0u8; 4 * BS];
    p.read(&vol, 0, &mut buf, Route::Cached).unwrap();
    p.read(&vol, 0, &mut buf, Route::Cached).unwrap();
    let s = p.stats();
    assert_eq!((s.hits, s.misses, s.read_bytes), (4, 4, 8 * BS as u64));
    // a coherent (no-rule) read is served but not counted or cached
    p.read(&vol, 4 * BS as u64, &mut buf, Route::Coherent)
        .unwrap();
    assert_eq!(buf, vec![7u8; 4 * BS]);
    let s = p.stats();
    assert_eq!((s.hits, s.misses, s.coherent_ops, s.resident), (4, 4, 1, 4));
}
