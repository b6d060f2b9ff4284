//! Concurrent readers and writers on overlapping blocks while a controller resizes,
//! switches eviction and write policies, and removes and recreates rules and caches.
//!
//! Each writer owns the blocks `b % WRITERS == w` and writes increasing sequence numbers
//! (the whole block is the number repeated); after a write returns it publishes the number
//! as acknowledged. A reader notes the acknowledged numbers before it reads and checks
//! every block it gets is whole and not older (no stale read). At the end a flush must
//! leave the backend holding the last acknowledged number of every block.

use cache::{Backend, CacheConfig, CacheNode, MemBackend, RoutingRule, WritePolicy};
use policy::EvictionSpec;
use rand::{Rng, SeedableRng};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BS: usize = 256;
const BLOCKS: u64 = 48;
const WRITERS: u64 = 2;

fn block_of(seq: u64) -> Vec<u8> {
    seq.to_le_bytes().repeat(BS / 8)
}

fn seq_of(data: &[u8]) -> u64 {
    let first = u64::from_le_bytes(data[..8].try_into().unwrap());
    assert!(
        data.chunks(8)
            .all(|c| u64::from_le_bytes(c.try_into().unwrap()) == first),
        "torn block"
    );
    first
}

/// A `MemBackend` that yields the CPU in the middle of every read and write, so fills and
/// write-backs overlap other requests as they would on a real disk.
struct Slow(Arc<MemBackend>);

impl Backend for Slow {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::thread::yield_now();
        self.0.read_at(offset, buf)?;
        std::thread::yield_now();
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::thread::yield_now();
        self.0.write_at(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.trim(offset, len)
    }
}

#[test]
fn no_stale_reads_under_control_churn() {
    let node = Arc::new(CacheNode::new(64, BS).unwrap());
    let mem = Arc::new(MemBackend::new(BLOCKS * BS as u64));
    node.add_export("vol", Arc::new(Slow(mem.clone()))).unwrap();
    let c = node
        .create_cache("c", 16, &lru(), WritePolicy::WriteBack)
        .unwrap();
    let all = RoutingRule {
        client: None,
        op: None,
        export: "vol".into(),
        range: None,
    };
    node.create_rule(all.clone(), c).unwrap();
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..BLOCKS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_millis(2500);
    let mut handles = Vec::new();

    for w in 0..WRITERS {
        let (node, acked, stop) = (node.clone(), acked.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(w);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 3_000_000 {
                let b = rng.gen_range(0..BLOCKS / WRITERS) * WRITERS + w;
                let seq = acked[b as usize].load(Ordering::Relaxed) + 1;
                let fua = rng.gen_ratio(1, 50);
                node.write("vol", &format!("w{w}"), b * BS as u64, &block_of(seq), fua)
                    .unwrap();
                acked[b as usize].store(seq, Ordering::Release);
                if rng.gen_ratio(1, 200) {
                    node.flush("vol").unwrap();
                }
                n += 1;
            }
            n
        }));
    }
    for r in 0..2u64 {
        let (node, acked, stop) = (node.clone(), acked.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(100 + r);
            let mut last = vec![0u64; BLOCKS as usize];
            let mut n = 0u64;
            let mut buf = vec![0u8; 4 * BS];
            while !stop.load(Ordering::Relaxed) && n < 3_000_000 {
                let first = rng.gen_range(0..BLOCKS);
                let len = rng.gen_range(1..=4).min(BLOCKS - first);
                let floor: Vec<u64> = (first..first + len)
                    .map(|b| acked[b as usize].load(Ordering::Acquire))
                    .collect();
                let buf = &mut buf[..len as usize * BS];
                node.read("vol", &format!("r{r}"), first * BS as u64, buf)
                    .unwrap();
                for (i, chunk) in buf.chunks(BS).enumerate() {
                    let b = (first + i as u64) as usize;
                    let got = seq_of(chunk);
                    assert!(
                        got >= floor[i],
                        "block {b}: read {got} after {} was acknowledged",
                        floor[i]
                    );
                    assert!(
                        got >= last[b],
                        "block {b}: read {got} after reading {}",
                        last[b]
                    );
                    last[b] = got;
                }
                n += 1;
            }
            n
        }));
    }
    let controller = {
        let (node, stop) = (node.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let policies = ["lru", "arc", "lirs", "2q", "s3fifo", "sieve", "mq"];
            let wps = [
                WritePolicy::WriteBack,
                WritePolicy::WriteThrough,
                WritePolicy::WriteAround,
            ];
            let mut cache = c;
            let mut ops = 0u64;
            while Instant::now() < deadline {
                match rng.gen_range(0..10) {
                    0..=3 => {
                        let size = rng.gen_range(1..=40);
                        node.configure_cache(
                            cache,
                            CacheConfig {
                                size: Some(size),
                                ..Default::default()
                            },
                        )
                        .unwrap();
                    }
                    4..=5 => {
                        let p = policies[rng.gen_range(0..policies.len())];
                        node.configure_cache(
                            cache,
                            CacheConfig {
                                eviction: Some(p.parse().unwrap()),
                                ..Default::default()
                            },
                        )
                        .unwrap();
                    }
                    6..=7 => {
                        let wp = wps[rng.gen_range(0..wps.len())];
                        node.configure_cache(
                            cache,
                            CacheConfig {
                                write_policy: Some(wp),
                                ..Default::default()
                            },
                        )
                        .unwrap();
                    }
                    8 => {
                        let (id, _, _) = node.rules()[0].clone();
                        node.remove_rule(id).unwrap();
                        std::thread::sleep(Duration::from_millis(1));
                        node.create_rule(all.clone(), cache).unwrap();
                    }
                    _ => {
                        node.remove_cache(cache).unwrap();
                        std::thread::sleep(Duration::from_millis(1));
                        cache = node
                            .create_cache("c", 16, &lru(), WritePolicy::WriteBack)
                            .unwrap();
                        node.create_rule(all.clone(), cache).unwrap();
                    }
                }
                ops += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
            stop.store(true, Ordering::Relaxed);
            (ops, cache)
        })
    };
    let (control_ops, cache) = controller.join().unwrap();
    let counts: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    eprintln!("requests per thread {counts:?}, control ops {control_ops}");
    assert!(
        control_ops > 50 && counts.iter().all(|&n| n > 1000),
        "too little work: {counts:?} {control_ops}"
    );
    let stats = node.get_cache_stats(cache).unwrap();
    assert!(stats.resident <= stats.capacity);
    node.flush("vol").unwrap();
    let snap = mem.snapshot();
    for b in 0..BLOCKS as usize {
        let want = acked[b].load(Ordering::Relaxed);
        assert_eq!(
            seq_of(&snap[b * BS..(b + 1) * BS]),
            want,
            "block {b} on the backend after flush"
        );
    }
    assert_eq!(mem.size(), BLOCKS * BS as u64);
}

fn lru() -> EvictionSpec {
    EvictionSpec::default()
}

/// The byte at `at` of the patterned volume: differs between neighbouring bytes and
/// between blocks, so a block read into the wrong place, shifted or torn shows.
fn pattern(at: u64) -> u8 {
    (at ^ (at >> 8) ^ (at >> 16).wrapping_mul(31)) as u8
}

/// Many threads read, at once, ranges of a volume whose every byte is known, through a
/// cache far smaller than the volume, so nearly every read misses (and many misses of
/// the same blocks overlap): aligned single blocks, aligned runs, unaligned ranges with
/// partial end blocks, and the volume's partial last block. Every byte read must be the
/// backend's, and blocks installed by those misses must read back the same as hits.
#[test]
fn misses_read_back_the_backend_bytes_under_concurrency() {
    const SIZE: u64 = 200 * BS as u64 + 77; // a partial last block
    let node = Arc::new(CacheNode::new(16, BS).unwrap());
    let mem = Arc::new(MemBackend::new(SIZE));
    let bytes: Vec<u8> = (0..SIZE).map(pattern).collect();
    mem.write_at(0, &bytes).unwrap();
    node.add_export("vol", Arc::new(Slow(mem.clone()))).unwrap();
    let c = node
        .create_cache("c", 8, &lru(), WritePolicy::WriteThrough)
        .unwrap();
    let all = RoutingRule {
        client: None,
        op: None,
        export: "vol".into(),
        range: None,
    };
    node.create_rule(all, c).unwrap();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let node = node.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                let mut buf = Vec::new();
                for i in 0..3000 {
                    let bs = BS as u64;
                    let (offset, len) = match i % 4 {
                        0 => (rng.gen_range(0..200) * bs, bs),
                        1 => (rng.gen_range(0..190) * bs, bs * rng.gen_range(2..8)),
                        2 => {
                            let o = rng.gen_range(0..SIZE - 1);
                            (o, rng.gen_range(1..=(4 * bs).min(SIZE - o)))
                        }
                        _ => (SIZE - 77 - bs * rng.gen_range(0..3), 77),
                    };
                    buf.resize(len as usize, 0);
                    node.read("vol", "t", offset, &mut buf).unwrap();
                    for (k, &b) in buf.iter().enumerate() {
                        let at = offset + k as u64;
                        assert_eq!(b, pattern(at), "byte {at} (read {offset}+{len})");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = node.get_cache_stats(c).unwrap();
    assert!(s.misses > 1000 && s.hits > 0, "{s:?}");
    assert_eq!(mem.snapshot(), bytes, "reads never write");
}
